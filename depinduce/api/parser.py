"""``depinduce.load(...).parse(...)``: the ``depinduce parse`` pipeline from Python.

The model is chosen and loaded as ``parse`` chooses it (:func:`depinduce.models.bundled.default_model_choice`,
:func:`depinduce.models.registry.load_model`), text is tokenised by the same function as a line of a text file
(:func:`depinduce.pipeline.text_sentence`), CoNLL-U sentences go through the same reader, and the sentences are
parsed by :func:`depinduce.pipeline.parse` in the same batches — so the output is the CLI's, byte for byte.
"""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from functools import cached_property
from itertools import islice
from os import PathLike
from pathlib import Path
from typing import Any, TextIO, TypeVar, Union

import conllu.models
from tqdm import tqdm

from depinduce.structures.sentence import Sentence
from depinduce.errors import InputError, UsageError
from depinduce.io.conllu_format import parse_conllu_text
from depinduce.io.initial_graphs import InitialGraph, initial_graph, read_initial_parse
from depinduce.io.lines import display_name
from depinduce.models.base import Backend
from depinduce.models.bundled import default_model_choice
from depinduce.models.registry import load_model
from depinduce.api.checks import checked_record
from depinduce.api.words import python_words
from depinduce.api.results import ParsedSentence, Predictions, write
from depinduce.api.scoring import Evaluation, corpus_sentences, evaluate
from depinduce.training.outcome import RunOutcome, run_outcome
from depinduce.pipeline import (
    DEFAULT_MAX_WORDS,
    ParseRequest,
    check_input,
    check_probs,
    check_refines,
    check_request,
    check_text_input,
    describe_blank_lines,
    parse,
    parse_default,
    read_input,
    text_sentence,
)

# What ``Parser.parse`` takes, one item per sentence: a line of text (tokenised as ``parse`` tokenises a text
# file), a list of tokens (as ``parse --tokenized``), a conllu TokenList (as ``--input-format conllu``), or a
# depinduce Sentence (e.g. from :func:`depinduce.io.read_sentences`).
SentenceInput = Union[str, list[str], tuple[str, ...], conllu.models.TokenList, Sentence]

_INPUT = "<input>"  # how the API's input is named in located errors (a file's name on the command line)
_INIT = "<init>"  # how in-memory initial graphs are named in errors

# What ``init`` takes (refining backends): None, "synTr" or "empty" for the model's own first pass, a CoNLL-U file,
# or parsed sentences (ParsedSentence or Sentence with heads), one per input sentence, in order.
InitInput = Union[None, str, "PathLike[str]", Iterable[Any]]
# The parse format that fills everything a backend can give: heads (and labels) and a bracketed tree.
_EVERYTHING = "jsonl"


class Parser:
    """A loaded model with the CLI's parse pipeline around it (see :func:`load`)."""

    def __init__(self, backend: Backend, *, reason: str | None = None,
                 run_dir: str | PathLike[str] | None = None) -> None:
        self.backend = backend
        # why this model was chosen when none was named (the line ``depinduce parse`` prints on stderr)
        self.reason = reason
        self.run_dir = run_dir  # the training run the model was loaded from, if it was

    @cached_property
    def outcome(self) -> RunOutcome | None:
        """For a training run: how it ended and how good its selected model is (None for other models); read
        when first asked for (a run from before right-branching's scores were recorded has them measured)."""
        return None if self.run_dir is None else run_outcome(self.run_dir)

    @property
    def notes(self) -> list[str]:
        """What ``depinduce parse`` says on stderr about a training run before parsing with it: how the run ended
        and its selected dev score beside right-branching's, and a warning line when the score is below."""
        if self.outcome is None:
            return []
        warning = self.outcome.warning(", or parse with --model default (the bundled model)")
        return [f"parse: {self.outcome.path}: {self.outcome.summary()}", *([warning] if warning else [])]

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def default_decoder(self) -> str:
        """The decoder used when ``parse`` is given none (as on the command line): the run's own, else mst — and
        mst too when the run's own does not always give a tree (an argmax; :meth:`decoder_note` says so)."""
        return parse_default(self.backend)[0]

    def decoder_note(self, fmt: str = _EVERYTHING) -> str | None:
        """What ``depinduce parse --format FMT`` says on stderr, once, when it does not decode with the run's own
        decoder because that one does not always give a tree: which decoder the run's scores (and, for a paper
        recipe, the paper's figures) come from, and the ``--decoder`` that asks for it.  None otherwise, and for
        a format that shows no heads (brackets of a model with its own constituency trees)."""
        if not ParseRequest(fmt=fmt).wants_heads(self.backend):
            return None
        return parse_default(self.backend)[1]

    def __repr__(self) -> str:
        return f"<depinduce.Parser model={self.name!r} decoder={self.default_decoder!r}>"

    @classmethod
    @python_words
    def load(cls, name_or_run_dir: str | PathLike[str] | None = None, device: str = "cpu", *, seed: int = 0,
             channel: int | None = None, iterations: int | None = None) -> Parser:
        """SuPar's spelling of :func:`load`."""
        return load(name_or_run_dir, device, seed=seed, channel=channel, iterations=iterations)

    @python_words
    def predict(self, data: SentenceInput | Iterable[SentenceInput] | PathLike[str], *,
                tokenized: bool | None = None, probs: bool = False, decoder: str | None = None,
                input_format: str | None = None, batch_size: int = 32,
                max_words: int | None = DEFAULT_MAX_WORDS, progress: bool = False,
                init: InitInput = None) -> Predictions:
        """Parse everything at once into a :class:`Predictions` list (``.save(path, fmt)``, ``.to_dataframe()``).

        ``data``: what :meth:`parse` takes, or a ``pathlib.Path`` to a file — ``.conllu`` is read as CoNLL-U,
        ``.txt`` as text, any other name needs ``input_format`` (``"text"`` or ``"conllu"``).  A string is always a
        sentence, never a file name (one that names a file is refused).  ``tokenized`` as in :meth:`parse`."""
        if isinstance(data, PathLike):
            fmt_in = input_format or {".conllu": "conllu", ".txt": "text"}.get(Path(data).suffix.lower())
            if fmt_in is None:
                raise UsageError(f"input_format: say 'text' or 'conllu' for {os.fspath(data)}")
            return Predictions(self.parse_file(data, input_format=fmt_in, decoder=decoder, batch_size=batch_size,
                                               tokenized=bool(tokenized), max_words=max_words, progress=progress,
                                               init=init, probs=probs))
        if input_format is not None:
            raise UsageError("input_format applies to a file (a pathlib.Path); in-memory data is read by its type")
        if isinstance(data, str) and os.path.isfile(data) and not any(c.isspace() for c in data):
            raise UsageError(f"data: {data!r} names a file; pass pathlib.Path({data!r}) to parse the file, or "
                             f"[{data!r}] to parse the string as a sentence")
        return Predictions(self.parse(data, tokenized=tokenized, probs=probs, decoder=decoder, batch_size=batch_size,
                                      max_words=max_words, progress=progress, init=init, parameter="data"))

    @python_words
    def evaluate(self, gold: str | PathLike[str] | Iterable[Any], *, decoder: str | None = None,
                 batch_size: int = 32, max_words: int | None = DEFAULT_MAX_WORDS, keep_punct: bool = False,
                 max_length: int | None = None, punct_rule: str = "auto") -> Evaluation:
        """Parse ``gold``'s sentences (a file in any format ``eval`` reads, or sentences) and score the parses
        against it as ``depinduce eval`` does — the gold heads, labels and trees are never shown to the model."""
        sentences, _ = corpus_sentences(gold, check_trees=True, role="gold")
        fmt = "conllu" if self.backend.capabilities.dependency else "brackets"
        bare = [replace(s, heads=None, deprels=None, tree=None, head_probs=None) for s in sentences]
        predicted = [p.sentence for p in self.parse(bare, decoder=decoder, batch_size=batch_size,
                                                    max_words=max_words, fmt=fmt)]
        return evaluate(sentences, predicted, keep_punct=keep_punct, max_length=max_length, punct_rule=punct_rule)

    @python_words
    def parse(self, inputs: SentenceInput | Iterable[SentenceInput], *, decoder: str | None = None,
              batch_size: int = 32, tokenized: bool | None = None, max_words: int | None = DEFAULT_MAX_WORDS,
              progress: bool = False, init: InitInput = None, fmt: str = _EVERYTHING,
              probs: bool = False, parameter: str = "inputs") -> Iterator[ParsedSentence]:
        """Parse sentences, yielding each as soon as its batch is done (a large input streams).

        ``inputs``: one sentence or an iterable of them (see :data:`SentenceInput`); a string is one sentence,
        whatever its length.  ``tokenized=True``: the input is already tokenised — strings are split on
        whitespace only (as ``--tokenized``) and a list of strings without spaces is one sentence's tokens;
        ``False``: each string is a sentence of text.  A list of two or more strings without spaces is refused
        unless ``tokenized`` says which it is (one tokenised sentence, or one-word sentences).  ``init`` (refining backends, as ``parse --init``):
        ``"synTr"``/``"empty"``/None for the model's own first pass, a CoNLL-U file, or parsed sentences (e.g.
        another parser's output) in the order of ``inputs``, token for token.  ``fmt``: the output format the
        sentences are meant for — the default fills everything the backend gives (heads, relations, tree); a
        narrower one skips the rest, as ``parse --format`` does.  The options are checked before the first
        sentence is read, so a bad decoder fails at once.  ``probs``: each word's head distribution too
        (``parse --probs``; ``Token.prob``, ``HeadProb`` in CoNLL-U, ``head_probs`` in JSONL).  A stochastic backend (``random``) continues its
        generator from call to call; load it again to start over, as each CLI run does.
        """
        request = self._request(decoder, batch_size, max_words, _INPUT, fmt, init, probs)
        items = sentence_items(inputs, tokenized, parameter)
        graphs = _initial_graph_source(init)
        return self._stream(items, request, tokenized=bool(tokenized), progress=progress, graphs=graphs)

    @python_words
    def parse_file(self, path: str | PathLike[str], *, input_format: str = "text", decoder: str | None = None,
                   batch_size: int = 32, tokenized: bool = False, max_words: int | None = DEFAULT_MAX_WORDS,
                   progress: bool = False, init: InitInput = None, fmt: str = _EVERYTHING,
                   on_blank: Callable[[list[int]], None] | None = None,
                   probs: bool = False) -> Iterator[ParsedSentence]:
        """Parse a text file (one sentence per line, blank lines skipped) or a CoNLL-U file, read exactly as
        ``depinduce parse [--input-format conllu] PATH`` reads it (``-``: standard input).  ``on_blank``
        receives the numbers of blank text lines (``parse`` warns with them); ``init``, ``fmt`` and ``probs`` as in
        :meth:`parse`.  ``depinduce parse`` is this method and :func:`write`."""
        check_input_options(input_format, tokenized)
        name = display_name(path)
        request = self._request(decoder, batch_size, max_words, name, fmt, init, probs)
        sentences = read_input(path, self.backend, input_format=input_format, pretokenized=tokenized,
                               on_blank=on_blank)
        graphs = _initial_graph_source(init)
        initial = None if graphs is None else _initial_graphs(graphs, sentences, name)
        return (ParsedSentence(sentence, ordinal) for ordinal, sentence in
                enumerate(parse(sentences, self.backend, request, progress=progress, init=initial), start=1))

    def _request(self, decoder: str | None, batch_size: int, max_words: int | None, source: str, fmt: str,
                 init: InitInput, probs: bool = False) -> ParseRequest:
        """The request, checked in the CLI's order (so the first problem reported is the CLI's); the types and
        ranges were checked at the boundary (:func:`~depinduce.api.words.python_words`)."""
        if init is not None:
            check_refines(self.backend)
        request = ParseRequest(fmt=fmt, decoder=decoder or self.default_decoder, batch_size=batch_size,
                               max_words=max_words, source=source, probs=probs)
        try:
            check_request(self.backend, replace(request, probs=False))
        except UsageError as exc:
            if decoder is None and self.backend.decoder_source is not None:  # the run's config chose it
                raise InputError(self.backend.decoder_source, None,
                                 f"train.decoder, the decoder this run's config.yaml names, cannot parse: {exc} "
                                 "(choose one with --decoder)") from None
            raise
        if probs:
            check_probs(self.backend, fmt)
        return request

    def _stream(self, items: Iterable[SentenceInput], request: ParseRequest, *, tokenized: bool, progress: bool,
                graphs: str | PathLike[str] | Iterable[Any] | None) -> Iterator[ParsedSentence]:
        # batches of exactly request.batch_size, as pipeline.parse cuts a whole file: the same batches, the same
        # padding, the same numbers as the command line
        sentences = (self._sentence(item, number, tokenized) for number, item in enumerate(items, start=1))
        read: Iterator[InitialGraph] | None = None  # graphs from a file, checked against the whole input
        initial: Iterator[Any] | None = None  # graphs in memory, checked batch by batch as the input streams
        if isinstance(graphs, (str, PathLike)):  # a file is checked against the whole input, as the CLI does
            whole = list(sentences)
            read = iter(_initial_graphs(graphs, whole, _INPUT))
            sentences = iter(whole)
        elif graphs is not None:
            initial = iter(graphs)
        ordinal = 0
        # one bar for the whole stream (its length is unknown), on stderr like the CLI's
        with tqdm(unit="sent", file=sys.stderr, disable=None if progress else True, leave=False) as bar:
            while batch := list(islice(sentences, request.batch_size)):
                check_input(self.backend, batch, _INPUT)
                init = None
                if read is not None:
                    init = list(islice(read, len(batch)))
                elif initial is not None:
                    init = [_initial_graph_for(initial, sentence, ordinal + k + 1)
                            for k, sentence in enumerate(batch)]
                for sentence in parse(batch, self.backend, request, progress=False, init=init):
                    ordinal += 1
                    yield ParsedSentence(sentence, ordinal)
                bar.update(len(batch))
        if initial is not None and next(initial, None) is not None:
            raise InputError(_INIT, None, f"holds more sentences than the input's {ordinal}")

    def _sentence(self, item: Any, number: int, tokenized: bool) -> Sentence:
        """One input item as the pipeline's sentence record, read as the CLI reads its kind of input."""
        if isinstance(item, Sentence):
            return copy.deepcopy(checked_record(item, _INPUT, number))  # parsing fills heads in place: leave the caller's (gold) sentence alone
        if isinstance(item, conllu.models.TokenList):
            read = parse_conllu_text(item.serialize(), _INPUT)
            if len(read) != 1:
                raise UsageError(f"{_INPUT}: item {number} holds {len(read)} CoNLL-U sentences, not one")
            return read[0]
        check_text_input(self.backend, "text")  # a string or a list of tokens is text
        if isinstance(item, str):
            line = item.strip()
            if not line:
                raise UsageError(f"{_INPUT}: item {number} is blank; give one sentence per item")
            return text_sentence(line, number, pretokenized=tokenized, label=_INPUT)
        if isinstance(item, (list, tuple)) and all(isinstance(token, str) for token in item):
            bad = next((k for k, token in enumerate(item) if not token or token != "".join(token.split())), None)
            if bad is not None or not item:
                where = "has no tokens" if not item else f"token {bad + 1} ({item[bad]!r}) is empty or holds a space"
                raise UsageError(f"{_INPUT}: item {number} {where}")
            return text_sentence(" ".join(item), number, pretokenized=True, label=_INPUT)
        raise UsageError(f"{_INPUT}: item {number} is a {type(item).__name__}; give a string, a list of "
                             "tokens, a conllu TokenList or a depinduce Sentence")


def sentence_items(inputs: Any, tokenized: bool | None, parameter: str) -> Iterable[SentenceInput]:
    """The input as an iterable of sentences, never guessing between a list of sentences and one tokenised
    sentence: a list of space-free strings needs ``tokenized`` to say which."""
    if isinstance(inputs, (str, conllu.models.TokenList, Sentence)):
        return [inputs]
    if inputs is None or isinstance(inputs, (bytes, PathLike)) or not isinstance(inputs, Iterable):
        raise UsageError(f"{parameter}: expected a sentence (a string, a list of tokens) or an iterable of "
                         f"sentences, not {type(inputs).__name__}")
    if (isinstance(inputs, (list, tuple)) and len(inputs) > 1 and all(isinstance(x, str) for x in inputs)
            and not any(any(c.isspace() for c in x) for x in inputs)):
        if tokenized is None:
            raise UsageError(f"{parameter}: a list of {len(inputs)} strings without spaces is one tokenised sentence "
                             f"or {len(inputs)} one-word sentences; say which with tokenized=True (one sentence) "
                             "or tokenized=False (one sentence per string)")
        if tokenized:
            return [list(inputs)]
    return inputs


def blank_lines_warning(path: str | PathLike[str], lines: list[int]) -> str:
    """The one-line warning ``parse`` gives for the blank lines of a text file (``on_blank`` of
    :meth:`Parser.parse_file`)."""
    return describe_blank_lines(display_name(path), lines)


def check_input_options(input_format: str, tokenized: bool) -> None:
    """The input options ``parse`` checks before loading anything."""
    if input_format not in ("text", "conllu"):
        raise UsageError(f"unknown input format '{input_format}'; choose one of text, conllu")
    if tokenized and input_format != "text":
        raise UsageError("--tokenized applies to text input only; CoNLL-U input is always tokenised")


def _initial_graph_source(init: InitInput) -> str | PathLike[str] | Iterable[Any] | None:
    """A file or in-memory graphs to read, or None when the model makes its own first graph (synTr / empty)."""
    if init is None or (isinstance(init, str) and init.lower() in ("syntr", "empty")):
        return None
    return init


def _initial_graphs(graphs: str | PathLike[str] | Iterable[Any], sentences: list[Sentence],
                    name: str) -> list[InitialGraph]:
    """All initial graphs for ``sentences`` (a file, as ``--init FILE`` reads it, or parsed sentences)."""
    if isinstance(graphs, (str, PathLike)):
        return read_initial_parse(os.fspath(graphs), sentences)
    given = list(graphs)
    if len(given) != len(sentences):
        raise InputError(_INIT, None, f"has {len(given)} sentences, the input has {len(sentences)}")
    return [_checked_graph(graph, sentence, k) for k, (graph, sentence) in enumerate(zip(given, sentences), start=1)]


def _initial_graph_for(graphs: Iterator[Any], sentence: Sentence, number: int) -> InitialGraph:
    """The next in-memory graph, checked against the input sentence it is for."""
    graph = next(graphs, None)
    if graph is None:
        raise InputError(_INIT, None, f"ends before input sentence {number}")
    return _checked_graph(graph, sentence, number)


def _checked_graph(graph: Any, sentence: Sentence, number: int) -> InitialGraph:
    if isinstance(graph, ParsedSentence):
        graph = graph.sentence
    if not isinstance(graph, Sentence):
        raise UsageError(f"{_INIT}: item {number} is a {type(graph).__name__}; give parsed sentences (what "
                         "Parser.parse yields) or depinduce Sentences with heads")
    return initial_graph(graph, sentence, number, _INIT, None)


@python_words
def load(name_or_run_dir: str | PathLike[str] | None = None, device: str = "cpu", *, seed: int = 0,
         channel: int | None = None, iterations: int | None = None) -> Parser:
    """A parser for a registered backend name (the baselines), a training run directory, or ``"default"``.

    With no name, the model ``depinduce parse`` picks: the newest finished run under ``./runs``, else the
    bundled default model (``Parser.reason`` says which).  For a training run, ``Parser.outcome`` says how it
    ended and how good it is, and ``Parser.notes`` are the lines ``parse`` prints about it (a warning when its
    selected model scores below right-branching on its dev data).  ``channel`` and ``iterations`` are ``parse
    --channel`` and ``--iterations``; ``device`` is ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
    """
    reason = None
    if name_or_run_dir is None:
        choice = default_model_choice()
        name_or_run_dir, reason = choice.target, choice.reason
    target = os.fspath(name_or_run_dir)
    backend = load_model(target, device=device, seed=seed)
    if channel is not None:
        backend.select_channel(channel)
    if iterations is not None:
        backend.set_iterations(iterations)
    # a folder is a run directory (load_model read it as one); its outcome is None without a run manifest
    return Parser(backend, reason=reason, run_dir=target if os.path.isdir(target) else None)


T = TypeVar("T")


def parse_to(parser: Parser, path: str | PathLike[str], out: TextIO, *, fmt: str, full_ud: bool = False,
             decoder: str | None = None, say: Callable[[str], object], **options: Any) -> None:
    """``depinduce parse`` in one call: read ``path`` (``-``: stdin), parse, write ``fmt`` to ``out``.  The notes
    (blank input lines; how a training run ended; the decoder its figures come from when ``parse`` writes trees
    with another) go to ``say``, the run's notes once the first batch is parsed, so a mistake in the options or
    the input stays the only line.  ``options`` are :meth:`Parser.parse_file`'s."""
    parsed = parser.parse_file(path, decoder=decoder, fmt=fmt,
                               on_blank=lambda lines: say(blank_lines_warning(path, lines)), **options)
    said = [note] if decoder is None and (note := parser.decoder_note(fmt)) else []
    parsed = _after_first(parsed, lambda: [say(note) for note in [*parser.notes, *said]])
    write(parsed, out, "conllu-ud" if full_ud else fmt)


def _after_first(items: Iterator[T], announce: Callable[[], object]) -> Iterator[T]:
    """``items``, calling ``announce`` once the first has come (or the input turned out empty)."""
    announced = False
    for item in items:
        if not announced:
            announce()
            announced = True
        yield item
    if not announced:
        announce()
