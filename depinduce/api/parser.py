"""``depinduce.load(...).parse(...)``: the ``depinduce parse`` pipeline from Python.

The model is chosen and loaded as ``parse`` chooses it (:func:`depinduce.models.bundled.default_model_choice`,
:func:`depinduce.models.registry.load_model`), text is tokenised by the same function as a line of a text file
(:func:`depinduce.parsing.text_sentence`), CoNLL-U sentences go through the same reader, and the sentences are
parsed by :func:`depinduce.parsing.parse` in the same batches — so the output is the CLI's, byte for byte.
"""

from __future__ import annotations

import copy
import io
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from os import PathLike
from typing import Any, TextIO, Union

import conllu.models
from nltk import Tree
from tqdm import tqdm

from depinduce.structures.sentence import Sentence
from depinduce.errors import InputError, ResourceError, UsageError
from depinduce.io import read_sentences, write_sentences
from depinduce.io.brackets import tree_to_brackets
from depinduce.io.conllu_format import parse_conllu_text
from depinduce.io.initial_graphs import InitialGraph, initial_graph, read_initial_parse
from depinduce.io.lines import display_name
from depinduce.models.base import Backend
from depinduce.models.bundled import default_model_choice
from depinduce.models.registry import load_model
from depinduce.pictures.figures import write_html, write_svg
from depinduce.parsing import (
    DEFAULT_MAX_WORDS,
    PICTURE_FORMATS,
    ParseRequest,
    check_refines,
    check_request,
    check_whole_sentence_input,
    needs_conllu_message,
    parse,
    read_text,
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


@dataclass
class ParsedSentence:
    """One parsed sentence: words, heads (1-based, 0 = root), relations and, where there is one, a tree.

    ``sentence`` is the pipeline's own record, which every depinduce writer and :func:`depinduce.evaluate`
    take; ``ordinal`` is its 1-based position in the input (what the CLI's writers name in their errors).
    """

    sentence: Sentence
    ordinal: int = 1

    @property
    def words(self) -> list[str]:
        return self.sentence.words

    @property
    def heads(self) -> list[int] | None:
        return self.sentence.heads

    @property
    def relations(self) -> list[str] | None:
        return self.sentence.deprels

    @property
    def tree(self) -> Tree | None:
        return self.sentence.tree

    def to_conllu(self, *, full_ud: bool = False) -> str:
        """The CoNLL-U block ``depinduce parse`` writes for this sentence (``full_ud``: as with ``--full-ud``)."""
        if self.sentence.heads is None:
            raise UsageError(f"sentence {self.ordinal}: the model gave no dependency heads to write as "
                                 "CoNLL-U; use to_brackets()")
        return _written([self], "conllu-ud" if full_ud else "conllu")

    def to_brackets(self) -> str:
        """The bracketed tree (one line, no newline), as ``depinduce parse --format brackets`` writes it."""
        if self.sentence.tree is None:
            raise UsageError(f"sentence {self.ordinal}: has no constituency tree to write as brackets")
        return tree_to_brackets(self.sentence.tree)

    def __str__(self) -> str:
        return self.to_conllu() if self.sentence.heads is not None else self.to_brackets()


def _written(parsed: Iterable[ParsedSentence], fmt: str) -> str:
    stream = io.StringIO()
    write(parsed, stream, fmt)
    return stream.getvalue()


def write(parsed: Iterable[ParsedSentence | Sentence], target: str | PathLike[str] | TextIO,
          fmt: str = "conllu") -> int:
    """Write parsed sentences to a stream or a file in ``fmt`` (``conllu``, ``conllu-ud`` for ``--full-ud``,
    ``conllx``, ``brackets``, ``jsonl``, and the pictures ``html`` and ``svg``): exactly the text ``depinduce
    parse --format FMT`` prints, because it is the same writer.  Returns how many sentences were written."""
    sentences = (p.sentence if isinstance(p, ParsedSentence) else p for p in parsed)
    if isinstance(target, (str, PathLike)):
        try:
            with open(target, "w", encoding="utf-8") as stream:
                return _write(sentences, stream, fmt)
        except OSError as exc:
            raise ResourceError(f"{target}: cannot write ({exc.strerror or exc})") from exc
    return _write(sentences, target, fmt)


def _write(sentences: Iterable[Sentence], stream: TextIO, fmt: str) -> int:
    if fmt in PICTURE_FORMATS:
        return (write_html if fmt == "html" else write_svg)(sentences, stream)
    return write_sentences(sentences, stream, fmt)


class Parser:
    """A loaded model with the CLI's parse pipeline around it (see :func:`load`)."""

    def __init__(self, backend: Backend, *, reason: str | None = None) -> None:
        self.backend = backend
        # why this model was chosen when none was named (the line ``depinduce parse`` prints on stderr)
        self.reason = reason

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def default_decoder(self) -> str:
        """The decoder used when ``parse`` is given none: the run's own, else mst (as on the command line)."""
        return self.backend.default_decoder

    def __repr__(self) -> str:
        return f"<depinduce.Parser model={self.name!r} decoder={self.default_decoder!r}>"

    def parse(self, inputs: SentenceInput | Iterable[SentenceInput], *, decoder: str | None = None,
              batch_size: int = 32, tokenized: bool = False, max_words: int | None = DEFAULT_MAX_WORDS,
              progress: bool = False, init: InitInput = None, fmt: str = _EVERYTHING) -> Iterator[ParsedSentence]:
        """Parse sentences, yielding each as soon as its batch is done (a large input streams).

        ``inputs``: one sentence or an iterable of them (see :data:`SentenceInput`); a string is one sentence,
        whatever its length (one list of tokens alone must be wrapped: ``[tokens]``).  ``tokenized``: split
        strings on whitespace only, as ``--tokenized``.  ``init`` (refining backends, as ``parse --init``):
        ``"synTr"``/``"empty"``/None for the model's own first pass, a CoNLL-U file, or parsed sentences (e.g.
        another parser's output) in the order of ``inputs``, token for token.  ``fmt``: the output format the
        sentences are meant for — the default fills everything the backend gives (heads, relations, tree); a
        narrower one skips the rest, as ``parse --format`` does.  The options are checked before the first
        sentence is read, so a bad decoder fails at once.  A stochastic backend (``random``) continues its
        generator from call to call; load it again to start over, as each CLI run does.
        """
        request = self._request(decoder, batch_size, max_words, _INPUT, fmt, init)
        items: Iterable[SentenceInput] = (
            [inputs] if isinstance(inputs, (str, conllu.models.TokenList, Sentence)) else inputs
        )
        graphs = _initial_graph_source(init)
        return self._stream(items, request, tokenized=tokenized, progress=progress, graphs=graphs)

    def parse_file(self, path: str | PathLike[str], *, input_format: str = "text", decoder: str | None = None,
                   batch_size: int = 32, tokenized: bool = False, max_words: int | None = DEFAULT_MAX_WORDS,
                   progress: bool = False, init: InitInput = None, fmt: str = _EVERYTHING,
                   on_blank: Callable[[list[int]], None] | None = None) -> Iterator[ParsedSentence]:
        """Parse a text file (one sentence per line, blank lines skipped) or a CoNLL-U file, read exactly as
        ``depinduce parse [--input-format conllu] PATH`` reads it (``-``: standard input).  ``on_blank``
        receives the numbers of blank text lines (``parse`` warns with them); ``init`` and ``fmt`` as in
        :meth:`parse`.  ``depinduce parse`` is this method and :func:`write`."""
        check_input_options(input_format, tokenized)
        name = display_name(path)
        request = self._request(decoder, batch_size, max_words, name, fmt, init)
        if self.backend.capabilities.whole_sentences and input_format != "conllu":
            raise UsageError(needs_conllu_message(self.backend))
        if input_format == "text":
            sentences = read_text(os.fspath(path), pretokenized=tokenized, on_blank=on_blank)
        else:
            sentences = read_sentences(path, fmt="conllu")
        check_whole_sentence_input(self.backend, sentences, name)
        graphs = _initial_graph_source(init)
        initial = None if graphs is None else _initial_graphs(graphs, sentences, name)
        return (ParsedSentence(sentence, ordinal) for ordinal, sentence in
                enumerate(parse(sentences, self.backend, request, progress=progress, init=initial), start=1))

    def _request(self, decoder: str | None, batch_size: int, max_words: int | None, source: str, fmt: str,
                 init: InitInput) -> ParseRequest:
        """The request, checked in the CLI's order (so the first problem reported is the CLI's)."""
        if batch_size < 1:
            raise UsageError(f"batch_size must be at least 1, not {batch_size}")
        if init is not None:
            check_refines(self.backend)
        request = ParseRequest(fmt=fmt, decoder=decoder or self.backend.default_decoder, batch_size=batch_size,
                               max_words=max_words, source=source)
        check_request(self.backend, request)
        return request

    def _stream(self, items: Iterable[SentenceInput], request: ParseRequest, *, tokenized: bool, progress: bool,
                graphs: str | PathLike[str] | Iterable[Any] | None) -> Iterator[ParsedSentence]:
        # batches of exactly request.batch_size, as parsing.parse cuts a whole file: the same batches, the same
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
                check_whole_sentence_input(self.backend, batch, _INPUT)
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
        whole = self.backend.capabilities.whole_sentences
        if isinstance(item, Sentence):
            return copy.deepcopy(item)  # parsing fills heads in place: leave the caller's (gold) sentence alone
        if isinstance(item, conllu.models.TokenList):
            read = parse_conllu_text(item.serialize(), _INPUT)
            if len(read) != 1:
                raise UsageError(f"{_INPUT}: item {number} holds {len(read)} CoNLL-U sentences, not one")
            return read[0]
        if whole:
            raise UsageError(needs_conllu_message(self.backend))
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


def load(name_or_run_dir: str | PathLike[str] | None = None, device: str = "cpu", *, seed: int = 0,
         channel: int | None = None, iterations: int | None = None) -> Parser:
    """A parser for a registered backend name (the baselines), a training run directory, or ``"default"``.

    With no name, the model ``depinduce parse`` picks: the newest finished run under ``./runs``, else the
    bundled default model (``Parser.reason`` says which).  ``channel`` and ``iterations`` are ``parse
    --channel`` and ``--iterations``.
    """
    reason = None
    if name_or_run_dir is None:
        choice = default_model_choice()
        name_or_run_dir, reason = choice.target, choice.reason
    backend = load_model(os.fspath(name_or_run_dir), device=device, seed=seed)
    if channel is not None:
        backend.select_channel(channel)
    if iterations is not None:
        backend.set_iterations(iterations)
    return Parser(backend, reason=reason)
