"""What the API's parsers return: a parsed sentence that behaves like a sequence of tokens, and a list of them
(:class:`Predictions`) that saves itself to a file.

Every view is read from the pipeline's own :class:`~depinduce.structures.sentence.Sentence` through the CLI's
writers (CoNLL-U, JSONL, SVG), so what a notebook shows is what ``depinduce parse`` writes.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from os import PathLike
from typing import Any, NamedTuple, TextIO

from nltk import Tree

from depinduce.api.checks import checked_record
from depinduce.api.words import python_words
from depinduce.display import html_text
from depinduce.errors import ResourceError, UsageError
from depinduce.io import write_sentences
from depinduce.io.brackets import tree_to_brackets
from depinduce.io.jsonl import sentence_to_json
from depinduce.io.outputs import written_file
from depinduce.pipeline import PICTURE_FORMATS
from depinduce.pictures.figures import sentence_svg, write_html, write_svg
from depinduce.structures.sentence import Sentence
from depinduce.structures.spans import display_tree


class Token(NamedTuple):
    """One word of a parsed sentence: ``id`` 1-based, ``head`` 0 = ROOT, ``prob`` the probability of that head
    (with ``probs=True``; None otherwise and for punctuation, which depinduce attaches by rule)."""

    id: int
    form: str
    head: int | None
    deprel: str | None
    prob: float | None = None
    upos: str | None = None


def _dataframe(rows: list[dict[str, Any]]) -> Any:
    """A pandas DataFrame of ``rows``; pandas is optional, so its absence is one line, not a traceback."""
    try:
        import pandas
    except ImportError:
        raise ResourceError("to_dataframe() needs pandas, which is not installed "
                            "(pip install 'depinduce[dataframe]')") from None
    return pandas.DataFrame(rows)


@dataclass
class ParsedSentence:
    """One parsed sentence: ``len()`` words, iterated (and indexed) as :class:`Token` records; ``words``,
    ``heads`` (1-based, 0 = root), ``relations``, ``probs`` and, where there is one, ``tree``.

    ``sentence`` is the pipeline's own record, which every depinduce writer and :func:`depinduce.evaluate`
    take; ``ordinal`` is its 1-based position in the input (what the CLI's writers name in their errors).
    In Jupyter it draws itself with ``parse --format svg``'s picture.
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
    def probs(self) -> list[float | None] | None:
        """Each word's chosen-head probability (``probs=True``; None for punctuation), else None."""
        if self.sentence.head_probs is None:
            return None
        return [self.sentence.head_prob(i) for i in range(len(self))]

    @property
    def head_probs(self) -> list[list[float] | None] | None:
        """Each word's whole head distribution over [ROOT, word 1, …, word n] (``probs=True``), else None."""
        return self.sentence.head_probs

    @property
    def tree(self) -> Tree | None:
        """The constituency tree, words in order under preterminals (their UPOS, else ``X``) and phrases
        labelled ``X``, so ``tree.pretty_print()`` shows it as it is; ``to_brackets()`` writes the tree itself."""
        if self.sentence.tree is None:
            return None
        return display_tree(self.sentence.tree, self.sentence.upos)

    @property
    def tokens(self) -> list[Token]:
        s = self.sentence
        return [Token(i + 1, word, None if s.heads is None else s.heads[i],
                      None if s.deprels is None else s.deprels[i], s.head_prob(i),
                      None if s.upos is None or s.upos[i] in ("", "_") else s.upos[i])
                for i, word in enumerate(s.words)]

    def __len__(self) -> int:
        return len(self.sentence.words)

    def __iter__(self) -> Iterator[Token]:
        return iter(self.tokens)

    def __getitem__(self, index: int) -> Token:
        return self.tokens[index]

    def to_dict(self) -> dict[str, Any]:
        """The JSON object ``parse --format jsonl`` writes for this sentence (``head_probs`` with ``probs``)."""
        return sentence_to_json(self.sentence, self.ordinal)

    def to_dataframe(self) -> Any:
        """One row per token (id, form, upos, head, deprel, prob); needs pandas, which depinduce does not."""
        return _dataframe([token._asdict() for token in self])

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

    def _repr_svg_(self) -> str:
        """Jupyter's picture: the figure ``parse --format svg`` draws (arcs, and the model's own tree)."""
        return sentence_svg(self.sentence)

    def __str__(self) -> str:
        return self.to_conllu() if self.sentence.heads is not None else self.to_brackets()


SHOWN = 10  # sentences a notebook draws of a Predictions list


class Predictions(list):  # list[ParsedSentence]; subclassing the generic alias breaks nothing but pickling
    """What :meth:`~depinduce.api.parser.Parser.predict` returns: a list of :class:`ParsedSentence` that saves
    itself in any ``parse --format`` and becomes a token table."""

    @python_words
    def save(self, path: str | PathLike[str] | TextIO, fmt: str = "conllu", *, force: bool = False) -> int:
        """Write every sentence to ``path`` (or a stream) as :func:`write` does; returns how many."""
        return write(self, path, fmt, force=force)

    def to_dataframe(self) -> Any:
        """One row per token of every sentence, with its sentence's 1-based number first; needs pandas."""
        return _dataframe([{"sentence": k, **token._asdict()} for k, parsed in enumerate(self, start=1)
                           for token in parsed])

    def __repr__(self) -> str:
        return f"<depinduce.Predictions: {len(self)} sentences>"

    def _repr_html_(self) -> str:
        """Jupyter's view: the first :data:`SHOWN` sentences as ``parse --format svg`` draws them, then how many
        more there are (a large list would otherwise make the notebook megabytes long)."""
        figures = [f"<figure><figcaption>{parsed.ordinal}: {html_text(' '.join(parsed.words))}</figcaption>"
                   f"{sentence_svg(parsed.sentence)}</figure>" for parsed in self[:SHOWN]]
        if len(self) > SHOWN:
            figures.append(f"<p>… {len(self) - SHOWN:,} more sentences</p>")
        return f"<div>{''.join(figures) or '<p>no sentences</p>'}</div>"


def _written(parsed: Iterable[ParsedSentence], fmt: str) -> str:
    stream = io.StringIO()
    write(parsed, stream, fmt)
    return stream.getvalue()


@python_words
def write(parsed: Iterable[ParsedSentence | Sentence], target: str | PathLike[str] | TextIO,
          fmt: str = "conllu", *, force: bool = False) -> int:
    """Write parsed sentences to a stream or a file in ``fmt`` (``conllu``, ``conllu-ud`` for ``--full-ud``,
    ``conllx``, ``brackets``, ``jsonl``, and the pictures ``html`` and ``svg``): exactly the text ``depinduce
    parse --format FMT`` prints, because it is the same writer.  A named file that exists is replaced only with
    ``force``; it is written whole or not at all.  Returns how many sentences were written."""
    if isinstance(parsed, (str, bytes, PathLike)) or not isinstance(parsed, Iterable):
        raise UsageError(f"parsed: expected parsed sentences (what Parser.parse yields), not a "
                         f"{type(parsed).__name__}")
    if not isinstance(fmt, str):
        raise UsageError(f"fmt: expected a format name such as 'conllu', not a {type(fmt).__name__}")
    sentences = (_sentence_of(p, k) for k, p in enumerate(parsed, start=1))
    if isinstance(target, (str, PathLike)):
        # the output policy: an existing file only with ``force``, and all or nothing (a bad item leaves no file)
        with written_file(target, force, "force=True") as stream:
            return _write(sentences, stream, fmt)
    if not callable(getattr(target, "write", None)):
        raise UsageError(f"target: expected a file name or a text stream, not a {type(target).__name__}")
    return _write(sentences, target, fmt)


def _sentence_of(item: Any, ordinal: int) -> Sentence:
    if not isinstance(item, (ParsedSentence, Sentence)):
        raise UsageError(f"item {ordinal} is a {type(item).__name__}, not a parsed sentence")
    return checked_record(item, "parsed", ordinal)


def _write(sentences: Iterable[Sentence], stream: TextIO, fmt: str) -> int:
    if fmt in PICTURE_FORMATS:
        return (write_html if fmt == "html" else write_svg)(sentences, stream)
    return write_sentences(sentences, stream, fmt)
