"""Score predicted sentences against gold ones under the protocol of docs/evaluation-protocol.md.

This is the one place where gold and prediction meet: punctuation is decided by the gold tokens, removed on
both sides with re-attachment, the token sequences are checked to be the same, and the pure metric functions
of :mod:`depinduce.metrics.dependency` and :mod:`depinduce.metrics.constituency` are summed over the corpus and
over length buckets.  Model selection on dev calls the same :func:`evaluate`, so training-time and reported
numbers cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from os import PathLike

from depinduce.display import json_text
from depinduce.data.normalize import Normalization
from depinduce.data.punct import is_punct_form, sentence_punct_mask, sentence_punct_rule
from depinduce.structures.sentence import Sentence
from depinduce.errors import InputError, UsageError
from depinduce.metrics.constituency import SpanCounts, score_spans
from depinduce.metrics.dependency import DependencyCounts, score_heads
from depinduce.metrics.protocol import PUNCT_RULES, Protocol
from depinduce.structures.dependency import reattach, subtree_spans, tree_problem
from depinduce.structures.spans import labelled_spans, restrict_spans, scored_spans

# (name, first length, last length or None for open-ended): the --by-length buckets of docs/evaluation-protocol.md.
LENGTH_BUCKETS: tuple[tuple[str, int, int | None], ...] = (
    ("1-10", 1, 10),
    ("11-20", 11, 20),
    ("21-30", 21, 30),
    ("31-40", 31, 40),
    ("41+", 41, None),
)

_MODEL_VIEW = Normalization()
_MISSING = (None, "", "_")


def length_bucket(n: int) -> str:
    """Name of the length bucket holding a sentence of ``n`` scored words (n >= 1)."""
    for name, low, high in LENGTH_BUCKETS:
        if n >= low and (high is None or n <= high):
            return name
    raise ValueError(f"no length bucket for {n} words")


def model_view(form: str) -> str:
    """A form as the models see it (lower-cased, digit runs -> ``N``, spaces -> ``_``), compared lower-cased.

    Parse output written in the model's view can then be scored against the original gold without a mismatch.
    """
    return _MODEL_VIEW.word(form).lower()


@dataclass
class Scores:
    """Metric counters over one set of sentences (the whole corpus or one length bucket)."""

    sentences: int = 0
    tokens: int = 0
    dependency: DependencyCounts | None = None
    constituency: SpanCounts | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "sentences": self.sentences,
            "tokens": self.tokens,
            "dependency": self.dependency.to_dict() if self.dependency else None,
            "constituency": self.constituency.to_dict() if self.constituency else None,
        }


@dataclass
class EvalResult:
    """Everything one evaluation produced: overall scores, per-length scores and the protocol followed."""

    gold_path: str
    pred_path: str
    protocol: Protocol
    overall: Scores
    by_length: dict[str, Scores] = field(default_factory=dict)

    def metrics(self) -> dict[str, float | None]:
        """The headline percentages as a flat dict (for metrics.jsonl and model selection); None = not scored."""
        dep, con = self.overall.dependency, self.overall.constituency
        return {
            "dda": dep.dda if dep else None,
            "uda": dep.uda if dep else None,
            "las": dep.las if dep else None,
            "root_accuracy": dep.root_accuracy if dep else None,
            "well_formed": dep.well_formed_share if dep else None,
            "uf1_sentence": con.sentence_f1 if con else None,
            "uf1_corpus": con.corpus_f1 if con else None,
        }

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form with full precision and every count."""
        return {
            "gold": self.gold_path,
            "pred": self.pred_path,
            "metrics": self.metrics(),
            **self.overall.to_dict(),
            "by_length": {name: scores.to_dict() for name, scores in self.by_length.items()},
            "protocol": self.protocol.to_dict(),
        }

    def to_json(self, indent: int | None = 2) -> str:
        """The result as a JSON document (what ``depinduce eval --json`` prints)."""
        return json_text(self.to_dict(), indent=indent)


def evaluate(
    gold: Sequence[Sentence],
    pred: Sequence[Sentence],
    *,
    keep_punct: bool = False,
    max_length: int | None = None,
    punct_rule: str = "auto",
    gold_path: str | PathLike[str] = "gold",
    pred_path: str | PathLike[str] = "prediction",
) -> EvalResult:
    """Score ``pred`` against ``gold`` sentence by sentence.

    Dependency metrics are computed when both sides carry heads; UF1 when the gold carries trees and the
    prediction carries trees or heads (then each word's subtree span is a predicted constituent).  Raises
    :class:`DepinduceError` (located :class:`InputError` where a sentence is at fault) on mismatched sentence
    counts or tokens, heads outside the sentence, or when nothing can be scored.
    """
    gold_name, pred_name = str(gold_path), str(pred_path)
    _check_pairing(gold, pred, gold_name, pred_name, punct_rule)
    if max_length is not None and max_length < 1:
        raise UsageError(f"--max-length must be at least 1, not {max_length}")
    gold_heads = _has_all(gold, "heads", gold_name)
    pred_heads = _has_all(pred, "heads", pred_name)
    gold_trees = _has_all(gold, "tree", gold_name)
    pred_trees = _has_all(pred, "tree", pred_name)
    do_dep = gold_heads and pred_heads
    do_con = gold_trees and (pred_trees or pred_heads)
    if not (do_dep or do_con):
        raise UsageError(
            f"nothing to score: {gold_name} has {_annotation(gold_heads, gold_trees)} and {pred_name} has "
            f"{_annotation(pred_heads, pred_trees)}; dependency metrics need heads on both sides, UF1 needs "
            "gold trees and predicted trees or heads"
        )
    labelled = do_dep and _all_labelled(gold) and _all_labelled(pred)
    protocol = Protocol(
        keep_punct=keep_punct,
        punct_rule=punct_rule,
        max_length=max_length,
        sentences_total=len(gold),
        dependency=do_dep,
        labelled=labelled,
        constituency=do_con,
        uf1_from_heads=do_con and not pred_trees,
    )
    scorer = _SentenceScorer(gold_name, pred_name, protocol, labelled=labelled, do_dep=do_dep, do_con=do_con)
    overall = _empty_scores(do_dep, do_con)
    buckets = {name: _empty_scores(do_dep, do_con) for name, _, _ in LENGTH_BUCKETS}
    for number, (g, p) in enumerate(zip(gold, pred), start=1):
        scored = scorer.score(number, g, p)
        if scored is None:
            continue
        _add(overall, scored)
        _add(buckets[length_bucket(scored.tokens)], scored)
    protocol.sentences_scored = overall.sentences
    protocol.scored_tokens = overall.tokens
    protocol.gold_labelled_trees = bool(overall.constituency and overall.constituency.label_total)
    return EvalResult(gold_name, pred_name, protocol, overall, buckets)


@dataclass(frozen=True)
class Alignment:
    """How ``eval`` pairs one gold sentence with its prediction: the tokens it scores on each side.

    ``how``: ``full`` (the prediction has the gold's tokens), ``aligned`` (it has extra punctuation the gold
    lacks) or ``stripped`` (it has only the gold's scored tokens)."""

    gold_keep: list[bool]
    pred_keep: list[bool]
    how: str

    def heads(self, gold: Sentence, pred: Sentence) -> tuple[list[int], list[int]]:
        """Gold and predicted heads over the scored words (1-based among them, 0 = ROOT), each word whose head
        was left out re-attached to its nearest scored ancestor: what DDA compares."""
        assert gold.heads is not None and pred.heads is not None
        return reattach(gold.heads, self.gold_keep), reattach(pred.heads, self.pred_keep)

    def spans(self, gold: Sentence, pred: Sentence, *, gold_all: list[tuple[str, int, int]] | None = None,
              pred_all: list[tuple[str, int, int]] | None = None,
              ) -> tuple[list[tuple[str, int, int]], set[tuple[int, int]]]:
        """The gold's labelled spans and the predicted span set over the scored words, as UF1 compares them
        (the prediction's tree, else its heads' subtree spans); ``gold_all``/``pred_all``: the trees' spans, when
        the caller has them already."""
        assert gold.tree is not None
        n = sum(self.gold_keep)
        gold_labelled = restrict_spans(gold_all or labelled_spans(gold.tree), self.gold_keep)
        if pred.tree is not None:
            predicted = restrict_spans(pred_all or labelled_spans(pred.tree), self.pred_keep)
            return gold_labelled, scored_spans(predicted, n)
        assert pred.heads is not None
        pred_heads = reattach(pred.heads, self.pred_keep)
        return gold_labelled, {(a, b) for a, b in subtree_spans(pred_heads) if 1 < b - a < n}


def align(gold: Sequence[Sentence], pred: Sequence[Sentence], *, keep_punct: bool = False, punct_rule: str = "auto",
          gold_path: str | PathLike[str] = "gold", pred_path: str | PathLike[str] = "prediction") -> list[Alignment]:
    """Pair every gold sentence with its prediction exactly as :func:`evaluate` pairs them (the same punctuation,
    the same alignment, the same one-line errors), for what shows the scored tokens (``depinduce show --gold``)."""
    gold_name, pred_name = str(gold_path), str(pred_path)
    _check_pairing(gold, pred, gold_name, pred_name, punct_rule)
    protocol = Protocol(keep_punct=keep_punct, punct_rule=punct_rule)
    scorer = _SentenceScorer(gold_name, pred_name, protocol, labelled=False, do_dep=False, do_con=False)
    return [scorer.align(number, g, p) for number, (g, p) in enumerate(zip(gold, pred), start=1)]


def _check_pairing(gold: Sequence[Sentence], pred: Sequence[Sentence], gold_name: str, pred_name: str,
                   punct_rule: str) -> None:
    """A known punctuation rule and one prediction per gold sentence, or a located error."""
    if punct_rule not in PUNCT_RULES:
        raise UsageError(f"unknown punctuation rule {punct_rule!r}; choose one of {', '.join(PUNCT_RULES)}")
    if len(gold) != len(pred):
        # point at the first sentence without a counterpart, in the longer file
        longer, name, other = (pred, pred_name, gold_name) if len(pred) > len(gold) else (gold, gold_name, pred_name)
        first = longer[min(len(gold), len(pred))]
        raise InputError(
            name, first.line,
            f"sentence {min(len(gold), len(pred)) + 1} has no counterpart in {other}: {gold_name} has {len(gold)} "
            f"sentences but {pred_name} has {len(pred)}; a prediction needs exactly one sentence per gold sentence"
        )


class _SentenceScorer:
    """Aligns one gold/predicted pair, strips punctuation and returns its counts (None when not scored)."""

    def __init__(
        self, gold_name: str, pred_name: str, protocol: Protocol, *, labelled: bool, do_dep: bool, do_con: bool
    ) -> None:
        self.gold_name = gold_name
        self.pred_name = pred_name
        self.protocol = protocol
        self.labelled = labelled
        self.do_dep = do_dep
        self.do_con = do_con

    def align(self, number: int, g: Sentence, p: Sentence) -> Alignment:
        """The scored tokens of one pair (the gold's punctuation rule, then the prediction checked against it)."""
        keep = self._keep_mask(g)
        pred_keep = self._align(number, g, p, keep, sum(keep))
        if pred_keep is None:
            return Alignment(keep, [True] * len(p.words), "stripped")
        return Alignment(keep, pred_keep, "full" if pred_keep is keep else "aligned")

    def score(self, number: int, g: Sentence, p: Sentence) -> Scores | None:
        protocol = self.protocol
        n_full = len(g.words)
        pair = self.align(number, g, p)
        keep = pair.gold_keep
        n = sum(keep)
        protocol.gold_tokens += n_full
        protocol.removed_tokens += n_full - n
        if n == 0:
            protocol.sentences_empty += 1
            return None
        if protocol.max_length is not None and n > protocol.max_length:
            protocol.sentences_over_max += 1
            return None
        if pair.how == "full":
            protocol.pred_full += 1
        elif pair.how == "aligned":
            protocol.pred_aligned += 1
        else:
            protocol.pred_stripped += 1
        scores = Scores(sentences=1, tokens=n)
        if p.heads is not None:
            self._check_heads(self.pred_name, number, p)
        if self.do_dep:
            assert g.heads is not None and p.heads is not None
            self._check_heads(self.gold_name, number, g)
            gold_heads, pred_heads = pair.heads(g, p)
            gold_labels = pred_labels = None
            if self.labelled:
                assert g.deprels is not None and p.deprels is not None
                gold_labels = _kept(g.deprels, keep)
                pred_labels = _kept(p.deprels, pair.pred_keep)
            scores.dependency = score_heads(
                gold_heads,
                pred_heads,
                gold_labels=gold_labels,
                pred_labels=pred_labels,
                pred_well_formed=tree_problem(p.heads) is None,
            )
        if self.do_con and n >= 2:
            gold_all = self._tree_spans(self.gold_name, number, g)
            pred_all = self._tree_spans(self.pred_name, number, p) if p.tree is not None else None
            gold_labelled, pred_spans = pair.spans(g, p, gold_all=gold_all, pred_all=pred_all)
            scores.constituency = score_spans(scored_spans(gold_labelled, n), pred_spans, gold_labelled=gold_labelled)
        elif self.do_con:
            scores.constituency = SpanCounts()
        return scores

    def _keep_mask(self, g: Sentence) -> list[bool]:
        """Which gold tokens are scored: all with ``keep_punct``, else those the one punctuation rule
        (:func:`~depinduce.data.punct.sentence_punct_mask`, which ``parse`` hides by too) does not remove."""
        if self.protocol.keep_punct:
            return [True] * len(g.words)
        chosen = sentence_punct_rule(g, self.protocol.punct_rule)  # type: ignore[arg-type]
        self.protocol.rules_used[chosen] += 1
        return [not is_punct for is_punct in sentence_punct_mask(g, chosen)]

    def _align(self, number: int, g: Sentence, p: Sentence, keep: list[bool], n: int) -> list[bool] | None:
        """Check the predicted tokens against the gold ones.

        Returns which predicted tokens are scored: ``keep`` itself for a prediction over the full gold sequence, an
        alignment mask for a longer prediction whose extra tokens are punctuation, None for a prediction over the
        punctuation-free sequence (nothing to remove).
        """
        n_full = len(g.words)
        if len(p.words) == n_full:
            self._check_forms(number, g, p, g.words, full=True)
            return keep
        if len(p.words) == n:
            self._check_forms(number, g, p, _kept(g.words, keep), full=False)
            return None
        aligned = self._align_extra_punct(p.words, _kept(g.words, keep)) if len(p.words) > n_full else None
        if aligned is not None:
            return aligned
        candidates = [g.words, _kept(g.words, keep)]
        where = max(_first_difference(p.words, c) for c in candidates)
        detail = ""
        if where < len(p.words):
            detail = f"; the first unexpected token is {where + 1} '{p.words[where]}'"
        raise InputError(
            self.pred_name,
            p.line_of(where) if where < len(p.words) else p.line,
            f"sentence {number}{_sent_id(g)}: the prediction has {len(p.words)} tokens but the gold "
            f"({self.gold_name}) has {n_full}, {n} without punctuation{detail}",
        )

    def _align_extra_punct(self, predicted: Sequence[str], expected: Sequence[str]) -> list[bool] | None:
        """Match ``expected`` in order inside ``predicted``, skipping only tokens that can be punctuation."""
        mask: list[bool] = []
        k = 0
        normalised = 0
        for form in predicted:
            if k < len(expected) and _same_form(form, expected[k]):
                normalised += form.lower() != expected[k].lower()
                mask.append(True)
                k += 1
            elif _removable(form):
                mask.append(False)
            else:
                return None
        if k != len(expected):
            return None
        self.protocol.normalised_matches += normalised
        return mask

    def _check_forms(self, number: int, g: Sentence, p: Sentence, expected: Sequence[str], *, full: bool) -> None:
        for i, (pf, gf) in enumerate(zip(p.words, expected)):
            if pf.lower() == gf.lower():
                continue
            if pf.lower() == model_view(gf):
                self.protocol.normalised_matches += 1
                continue
            which = "" if full else " (punctuation-free sequence)"
            raise InputError(
                self.pred_name,
                p.line_of(i),
                f"sentence {number}{_sent_id(g)}: token {i + 1}{which} is '{pf}' in the prediction but "
                f"'{gf}' in the gold ({self.gold_name})",
            )

    @staticmethod
    def _check_heads(path: str, number: int, s: Sentence) -> None:
        assert s.heads is not None
        n = len(s.heads)
        if n != len(s.words):
            raise InputError(path, s.line, f"sentence {number}: {n} heads for {len(s.words)} tokens")
        for i, h in enumerate(s.heads, start=1):
            if not 0 <= h <= n:
                raise InputError(path, s.line, f"sentence {number}: head {h} of token {i} is outside 0..{n}")

    @staticmethod
    def _tree_spans(path: str, number: int, s: Sentence) -> list[tuple[str, int, int]]:
        """The tree's labelled spans, after checking it covers exactly the sentence's tokens."""
        assert s.tree is not None
        spans = labelled_spans(s.tree)
        # the root span ends at the leaf count (no span at all: a lone preterminal, one leaf); cheaper than leaves()
        leaves = max(end for _, _, end in spans) if spans else len(s.tree.leaves())
        if leaves != len(s.words):
            raise InputError(path, s.line, f"sentence {number}: the tree has {leaves} leaves for {len(s.words)} tokens")
        return spans


def _has_all(sentences: Sequence[Sentence], attribute: str, path: str) -> bool:
    """True when every non-empty sentence carries ``attribute``; an error when only some do (a broken file)."""
    present = [getattr(s, attribute) is not None for s in sentences if s.words]
    if all(present):
        return bool(present)
    if not any(present):
        return False
    missing = next(i for i, s in enumerate(sentences, start=1) if s.words and getattr(s, attribute) is None)
    what = "heads" if attribute == "heads" else "a tree"
    raise InputError(
        path,
        sentences[missing - 1].line,
        f"sentence {missing} has no {what} although other sentences do; cannot score a partially annotated file",
    )


# What an unlabelled parse writes in DEPREL (depinduce's own output, the PTB head-rule conversion).
_UNLABELLED = frozenset({"root", "dep"})


def _all_labelled(sentences: Sequence[Sentence]) -> bool:
    """True when every non-empty sentence has dependency labels and the file uses more than ``root``/``dep``.

    A file labelled only ``root``/``dep`` is an unlabelled parse written in CoNLL form; LAS against it would just
    repeat DDA, so it is not reported.
    """
    if not all(_present(s.deprels) for s in sentences if s.words):
        return False
    return any(label.split(":")[0] not in _UNLABELLED for s in sentences for label in (s.deprels or ()))


def _present(column: Sequence[str | None] | None) -> bool:
    return column is not None and any(value not in _MISSING for value in column)


def _annotation(heads: bool, trees: bool) -> str:
    kinds = [name for name, has in (("heads", heads), ("trees", trees)) if has]
    return " and ".join(kinds) if kinds else "neither heads nor trees"


def _removable(form: str) -> bool:
    """A token the PTB word-tag filter could have removed: no letter or digit, or a currency token (``US$``,
    tagged ``$``)."""
    return is_punct_form(form) or not any(ch.isalnum() for ch in form) or "$" in form or "#" in form


def _same_form(predicted: str, gold: str) -> bool:
    """Forms match case-insensitively, or the prediction is the models' normalisation of the gold form."""
    return predicted.lower() == gold.lower() or predicted.lower() == model_view(gold)


def _kept(values: Sequence[str], keep: Sequence[bool]) -> list[str]:
    return [v for v, k in zip(values, keep) if k]


def _first_difference(a: Sequence[str], b: Sequence[str]) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x.lower() != y.lower() and x.lower() != model_view(y):
            return i
    return min(len(a), len(b))


def _sent_id(s: Sentence) -> str:
    return f" (sent_id {s.sent_id})" if s.sent_id else ""


def _empty_scores(do_dep: bool, do_con: bool) -> Scores:
    return Scores(
        dependency=DependencyCounts() if do_dep else None,
        constituency=SpanCounts() if do_con else None,
    )


def _add(total: Scores, one: Scores) -> None:
    total.sentences += one.sentences
    total.tokens += one.tokens
    if total.dependency is not None and one.dependency is not None:
        total.dependency.add(one.dependency)
    if total.constituency is not None and one.constituency is not None:
        total.constituency.add(one.constituency)
