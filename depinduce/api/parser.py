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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from os import PathLike
from typing import Any, TextIO, Union

import conllu.models
from nltk import Tree
from tqdm import tqdm

from depinduce.data.sentence import Sentence
from depinduce.errors import DepinduceError
from depinduce.io import read_sentences, write_sentences
from depinduce.io.brackets import tree_to_brackets
from depinduce.io.conllu_format import parse_conllu_text
from depinduce.io.lines import display_name
from depinduce.models.base import Backend
from depinduce.models.bundled import default_model_choice
from depinduce.models.registry import load_model
from depinduce.parsing import (
    DEFAULT_MAX_WORDS,
    ParseRequest,
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
            raise DepinduceError(f"sentence {self.ordinal}: the model gave no dependency heads to write as "
                                 "CoNLL-U; use to_brackets()")
        return _written([self], "conllu-ud" if full_ud else "conllu")

    def to_brackets(self) -> str:
        """The bracketed tree (one line, no newline), as ``depinduce parse --format brackets`` writes it."""
        if self.sentence.tree is None:
            raise DepinduceError(f"sentence {self.ordinal}: has no constituency tree to write as brackets")
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
    ``conllx``, ``brackets``, ``jsonl``): exactly the text ``depinduce parse --format FMT`` prints, because it
    is the same writer.  Returns how many sentences were written."""
    sentences = (p.sentence if isinstance(p, ParsedSentence) else p for p in parsed)
    if isinstance(target, (str, PathLike)):
        try:
            with open(target, "w", encoding="utf-8") as stream:
                return write_sentences(sentences, stream, fmt)
        except OSError as exc:
            raise DepinduceError(f"{target}: cannot write ({exc.strerror or exc})") from exc
    return write_sentences(sentences, target, fmt)


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
              progress: bool = False) -> Iterator[ParsedSentence]:
        """Parse sentences, yielding each as soon as its batch is done (a large input streams).

        ``inputs``: one sentence or an iterable of them (see :data:`SentenceInput`); a string is one sentence,
        whatever its length (one list of tokens alone must be wrapped: ``[tokens]``).  ``tokenized``: split strings on whitespace only, as ``--tokenized``.  The
        options are checked before the first sentence is read, so a bad decoder fails at once.  A stochastic
        backend (``random``) continues its generator from call to call; load it again to start over, as each
        CLI run does.
        """
        if batch_size < 1:
            raise DepinduceError(f"batch_size must be at least 1, not {batch_size}")
        request = ParseRequest(fmt=_EVERYTHING, decoder=decoder or self.backend.default_decoder,
                               batch_size=batch_size, max_words=max_words, source=_INPUT)
        check_request(self.backend, request)
        items: Iterable[SentenceInput] = (
            [inputs] if isinstance(inputs, (str, conllu.models.TokenList, Sentence)) else inputs
        )
        return self._stream(items, request, tokenized=tokenized, progress=progress)

    def parse_file(self, path: str | PathLike[str], *, input_format: str = "text", decoder: str | None = None,
                   batch_size: int = 32, tokenized: bool = False, max_words: int | None = DEFAULT_MAX_WORDS,
                   progress: bool = False) -> Iterator[ParsedSentence]:
        """Parse a text file (one sentence per line, blank lines skipped) or a CoNLL-U file, read exactly as
        ``depinduce parse [--input-format conllu] PATH`` reads it."""
        if input_format not in ("text", "conllu"):
            raise DepinduceError(f"unknown input format '{input_format}'; choose one of text, conllu")
        if tokenized and input_format != "text":
            raise DepinduceError("--tokenized applies to text input only; CoNLL-U input is always tokenised")
        request = ParseRequest(fmt=_EVERYTHING, decoder=decoder or self.backend.default_decoder,
                               batch_size=batch_size, max_words=max_words, source=display_name(path))
        check_request(self.backend, request)  # in the CLI's order, so the first problem is the CLI's
        if self.backend.capabilities.whole_sentences and input_format != "conllu":
            raise DepinduceError(needs_conllu_message(self.backend))
        if input_format == "text":
            sentences = read_text(path, pretokenized=tokenized)
        else:
            sentences = read_sentences(path, fmt="conllu")
        check_whole_sentence_input(self.backend, sentences, display_name(path))
        return (ParsedSentence(sentence, ordinal) for ordinal, sentence in
                enumerate(parse(sentences, self.backend, request, progress=progress), start=1))

    def _stream(self, items: Iterable[SentenceInput], request: ParseRequest, *, tokenized: bool,
                progress: bool) -> Iterator[ParsedSentence]:
        # batches of exactly request.batch_size, as parsing.parse cuts a whole file: the same batches, the same
        # padding, the same numbers as the command line
        sentences = (self._sentence(item, number, tokenized) for number, item in enumerate(items, start=1))
        ordinal = 0
        # one bar for the whole stream (its length is unknown), on stderr like the CLI's
        with tqdm(unit="sent", file=sys.stderr, disable=None if progress else True, leave=False) as bar:
            while batch := list(islice(sentences, request.batch_size)):
                check_whole_sentence_input(self.backend, batch, _INPUT)
                for sentence in parse(batch, self.backend, request, progress=False):
                    ordinal += 1
                    yield ParsedSentence(sentence, ordinal)
                bar.update(len(batch))

    def _sentence(self, item: Any, number: int, tokenized: bool) -> Sentence:
        """One input item as the pipeline's sentence record, read as the CLI reads its kind of input."""
        whole = self.backend.capabilities.whole_sentences
        if isinstance(item, Sentence):
            return copy.deepcopy(item)  # parsing fills heads in place: leave the caller's (gold) sentence alone
        if isinstance(item, conllu.models.TokenList):
            read = parse_conllu_text(item.serialize(), _INPUT)
            if len(read) != 1:
                raise DepinduceError(f"{_INPUT}: item {number} holds {len(read)} CoNLL-U sentences, not one")
            return read[0]
        if whole:
            raise DepinduceError(needs_conllu_message(self.backend))
        if isinstance(item, str):
            line = item.strip()
            if not line:
                raise DepinduceError(f"{_INPUT}: item {number} is blank; give one sentence per item")
            return text_sentence(line, number, pretokenized=tokenized, label=_INPUT)
        if isinstance(item, (list, tuple)) and all(isinstance(token, str) for token in item):
            bad = next((k for k, token in enumerate(item) if not token or token != "".join(token.split())), None)
            if bad is not None or not item:
                where = "has no tokens" if not item else f"token {bad + 1} ({item[bad]!r}) is empty or holds a space"
                raise DepinduceError(f"{_INPUT}: item {number} {where}")
            return text_sentence(" ".join(item), number, pretokenized=True, label=_INPUT)
        raise DepinduceError(f"{_INPUT}: item {number} is a {type(item).__name__}; give a string, a list of "
                             "tokens, a conllu TokenList or a depinduce Sentence")


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
