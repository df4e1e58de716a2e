"""``depinduce.evaluate(gold, pred)``: the ``depinduce eval`` scores and protocol from Python.

``depinduce eval`` calls :func:`evaluate` itself, so the two read files the same way (gold trees checked,
predictions not) and score under the same protocol; only the printing differs.  Imports no torch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from os import PathLike
from typing import TYPE_CHECKING, Any, Union

from depinduce.structures.sentence import Sentence
from depinduce.api.checks import checked_record
from depinduce.api.words import python_words
from depinduce.errors import UsageError
from depinduce.io import read_sentences
from depinduce.metrics import EvalResult
from depinduce.metrics import evaluate as score
from depinduce.metrics.report import render_table, report_text

if TYPE_CHECKING:
    from rich.console import Console

# A file (any format ``eval`` reads, detected) or sentences: depinduce Sentences, or what Parser.parse yields.
Corpus = Union[str, PathLike, Iterable[Any]]


@dataclass(frozen=True)
class Evaluation:
    """The result of one evaluation: the headline metrics, every count, and the protocol that produced them.

    ``result`` is the metrics layer's :class:`~depinduce.metrics.EvalResult` (per-length scores and all).
    """

    result: EvalResult

    @property
    def metrics(self) -> dict[str, float | None]:
        """Headline percentages (dda, uda, las, root_accuracy, well_formed, uf1_sentence, uf1_corpus); None =
        not scored."""
        return self.result.metrics()

    @property
    def protocol(self) -> list[str]:
        """The protocol in words, one line per rule — the lines ``depinduce eval`` prints under its table."""
        return self.result.protocol.describe()

    def as_dict(self) -> dict[str, object]:
        """Everything, at full precision: the document ``depinduce eval --json`` prints."""
        return self.result.to_dict()

    def to_json(self, indent: int | None = 2) -> str:
        """``depinduce eval --json``'s output (without its final newline)."""
        return self.result.to_json(indent)

    def report(self, *, by_length: bool = False) -> str:
        """The tables and protocol text ``depinduce eval [--by-length]`` prints when its output is not a
        terminal."""
        return report_text(self.result, by_length=by_length)

    def render(self, console: Console, *, by_length: bool = False) -> None:
        """Print the tables and protocol to ``console``: ``depinduce eval``'s output, which calls this."""
        render_table(self.result, console, by_length=by_length)

    def __str__(self) -> str:
        return self.report()


def corpus_sentences(corpus: Corpus, *, check_trees: bool, role: str) -> tuple[list[Sentence], str]:
    """The sentences of a file (read as ``eval`` reads it) or of a list, and the name errors will use."""
    if isinstance(corpus, (str, PathLike)):
        return read_sentences(corpus, check_trees=check_trees), str(corpus)
    if isinstance(corpus, bytes) or not isinstance(corpus, Iterable):
        raise UsageError(f"{role}: expected a file path or sentences (e.g. what Parser.parse yields), not "
                         f"{type(corpus).__name__}")
    sentences = []
    for number, item in enumerate(corpus, start=1):  # a ParsedSentence carries the pipeline's record
        sentences.append(checked_record(item, role, number))
    return sentences, role


@python_words
def evaluate(gold: Corpus, pred: Corpus, *, keep_punct: bool = False, max_length: int | None = None,
             punct_rule: str = "auto") -> Evaluation:
    """Score ``pred`` against ``gold`` as ``depinduce eval --gold GOLD --pred PRED`` does.

    Both may be file paths (format detected; ``-`` is stdin) or lists of sentences.  Gold heads must form trees;
    predicted ones need not (a decoder may produce non-trees, which the well-formedness metric counts).
    """
    gold_sentences, gold_name = corpus_sentences(gold, check_trees=True, role="gold")
    pred_sentences, pred_name = corpus_sentences(pred, check_trees=False, role="prediction")
    return Evaluation(score(gold_sentences, pred_sentences, keep_punct=keep_punct, max_length=max_length,
                            punct_rule=punct_rule, gold_path=gold_name, pred_path=pred_name))
