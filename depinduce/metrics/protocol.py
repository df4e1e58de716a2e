"""The evaluation protocol in words — the single source of the text printed under every result.

Unsupervised-parsing numbers are only comparable when the protocol is stated (punctuation handling, root
encoding, sentence- vs corpus-level F1 move results by several points), so every report says exactly what was
scored.  The README and the CLI help should quote these constants rather than paraphrase them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from depinduce.data.punct import PTB_PUNCT_TAGS

PUNCT_RULES: tuple[str, ...] = ("auto", "ptb", "ud", "shape")

# docs/evaluation-protocol.md's order, for display; any tag added to PTB_PUNCT_TAGS later is listed after these.
_TAG_ORDER = (",", ".", ":", "``", "''", "-LRB-", "-RRB-", "#", "$", "-NONE-")
_PTB_TAGS_TEXT = " ".join(
    sorted(PTB_PUNCT_TAGS, key=lambda t: (_TAG_ORDER.index(t) if t in _TAG_ORDER else len(_TAG_ORDER), t))
)

RULE_TEXT: dict[str, str] = {
    "ptb": f"PTB word-tag filter on the PTB tags, XPOS or else CPOSTAG/UPOS (removes {_PTB_TAGS_TEXT})",
    "ud": "UD rule (removes UPOS PUNCT; SYM is kept)",
    "shape": "token shape (removes tokens made only of punctuation characters; symbols such as $ % & # are "
             "kept; no tags available)",
}

AUTO_RULE_TEXT = (
    "rule chosen per gold sentence, as parse chooses what it hides: '# punct_rule = ...' metadata if present, "
    "else UD rule when the gold UPOS column holds UD tags, else PTB rule when either POS column holds PTB tags, "
    "else token shape"
)

REATTACH_TEXT = (
    "A kept token whose head was removed is re-attached to its nearest kept ancestor (ROOT if none), on the gold "
    "and on predictions given over the full token sequence alike."
)

ALIGNMENT_TEXT = (
    "Predictions may cover the full token sequence (the gold's removal and re-attachment are then applied to "
    "them) or the punctuation-free sequence; forms must match case-insensitively, where a predicted form may also "
    "be the models' normalisation of the gold form (digit runs -> N, spaces -> _). A prediction with more tokens "
    "than the gold's full sequence (e.g. parse output with punctuation against the punctuation-free .trees) is "
    "aligned in order: predicted tokens the gold lacks that have no letter or digit (or are currency tokens such "
    "as US$) are removed, with re-attachment, as punctuation."
)

KEEP_PUNCT_TEXT = "Every token is scored (--keep-punct), as UD's CoNLL 2018 scorer does."

ROOT_TEXT = (
    "Root encoding: head 0 = ROOT; in UDA the root edge of word i is the unordered pair {i, 0}. Root accuracy: "
    "share of sentences whose predicted root word(s) are exactly the gold root word(s). A predicted self-loop "
    "(HEAD = own ID) is a wrong head in every metric and not a root."
)

DDA_TEXT = (
    "DDA (= UAS): tokens whose predicted head is the gold head / scored tokens; UDA (= UUAS): |predicted edges "
    "∩ gold edges| as unordered pairs / scored tokens. Both micro-averaged over tokens."
)

LAS_TEXT = (
    "LAS: head and label both correct, labels compared on their universal part (nsubj:pass -> nsubj) as in the "
    "CoNLL 2018 scorer; only when both sides carry labels."
)

LAS_ABSENT_TEXT = "LAS: not reported (labels are missing on the gold or the prediction)."

WELL_FORMED_TEXT = (
    "Well-formed: share of predictions that are trees (exactly one root, no cycle), judged on each prediction "
    "as submitted, before punctuation removal; non-trees are still scored."
)

UF1_SPANS_TEXT = (
    "UF1: unlabelled spans compared as sets; length-1 spans and the whole-sentence span excluded; one-word "
    "sentences skipped. Gold trees: punctuation and trace leaves removed, emptied constituents deleted, unary "
    "chains collapsed, labels ignored."
)

UF1_FROM_HEADS_TEXT = (
    "Predicted spans come from the dependency prediction: the span covered by each word's subtree (the "
    "covering span when a subtree is discontinuous)."
)

UF1_SENTENCE_TEXT = (
    "UF1 sentence-level: mean over sentences of per-sentence F1, with precision = 1 when the prediction has no "
    "spans and recall = 1 when the gold has none, so every 2-word sentence scores 100 (PRPN, ON-LSTM, "
    "StructFormer, Compound PCFG)."
)

UF1_CORPUS_TEXT = (
    "UF1 corpus-level (EVALB-like, micro): F1 of precision and recall computed from matched, predicted and gold "
    "span counts summed over all sentences."
)

LABEL_RECALL_TEXT = (
    "Per-label recall: share of gold constituents with that label (function tags dropped) whose span is predicted."
)


@dataclass
class Protocol:
    """What one evaluation actually did, with the counts a reader needs to trust or reproduce it."""

    keep_punct: bool = False
    punct_rule: str = "auto"
    max_length: int | None = None
    rules_used: Counter[str] = field(default_factory=Counter)
    sentences_total: int = 0
    sentences_scored: int = 0
    sentences_empty: int = 0
    sentences_over_max: int = 0
    gold_tokens: int = 0
    removed_tokens: int = 0
    scored_tokens: int = 0
    pred_full: int = 0
    pred_stripped: int = 0
    pred_aligned: int = 0
    normalised_matches: int = 0
    dependency: bool = False
    labelled: bool = False
    constituency: bool = False
    uf1_from_heads: bool = False
    gold_labelled_trees: bool = False

    def describe(self) -> list[str]:
        """The protocol as plain sentences, one per line, printed under the result table."""
        lines: list[str] = []
        if self.keep_punct:
            lines.append(KEEP_PUNCT_TEXT)
        else:
            used = ", ".join(
                f"{RULE_TEXT[rule]} in {_count(count, 'sentence')}" for rule, count in sorted(self.rules_used.items())
            )
            how = f"punctuation removed before scoring, decided by the gold tokens: {used or 'no sentences'}"
            if self.punct_rule == "auto":
                how += f" ({AUTO_RULE_TEXT})"
            lines.append(how[0].upper() + how[1:] + ".")
            lines.append(
                f"{self.removed_tokens} of {self.gold_tokens} gold tokens removed. {REATTACH_TEXT}"
            )
            lines.append(ALIGNMENT_TEXT)
            lines.append(
                f"Predictions over the full sequence: {self.pred_full} sentences; already punctuation-free: "
                f"{self.pred_stripped}; aligned to a punctuation-free gold: {self.pred_aligned}; tokens matched only in the models' normalisation: {self.normalised_matches}."
            )
        subset = ""
        if self.max_length is not None:
            subset = f" (only sentences with <= {self.max_length} scored words; {self.sentences_over_max} excluded)"
        lines.append(
            f"Scored: {_count(self.scored_tokens, 'token')} in {_count(self.sentences_scored, 'sentence')}{subset}; "
            f"{_count(self.sentences_empty, 'sentence')} had no token left to score."
        )
        if self.dependency:
            lines.append(DDA_TEXT)
            lines.append(ROOT_TEXT)
            lines.append(LAS_TEXT if self.labelled else LAS_ABSENT_TEXT)
            lines.append(WELL_FORMED_TEXT)
        if self.constituency:
            lines.append(UF1_SPANS_TEXT)
            if self.uf1_from_heads:
                lines.append(UF1_FROM_HEADS_TEXT)
            lines.append(UF1_SENTENCE_TEXT)
            lines.append(UF1_CORPUS_TEXT)
            if self.gold_labelled_trees:
                lines.append(LABEL_RECALL_TEXT)
        return lines

    def to_dict(self) -> dict[str, object]:
        """JSON form: the settings, the counts and the description lines."""
        return {
            "keep_punct": self.keep_punct,
            "punct_rule": self.punct_rule,
            "rules_used": dict(sorted(self.rules_used.items())),
            "max_length": self.max_length,
            "sentences_total": self.sentences_total,
            "sentences_scored": self.sentences_scored,
            "sentences_empty": self.sentences_empty,
            "sentences_over_max": self.sentences_over_max,
            "gold_tokens": self.gold_tokens,
            "removed_tokens": self.removed_tokens,
            "scored_tokens": self.scored_tokens,
            "pred_full": self.pred_full,
            "pred_stripped": self.pred_stripped,
            "pred_aligned": self.pred_aligned,
            "normalised_matches": self.normalised_matches,
            "uf1_from_heads": self.uf1_from_heads,
            "description": self.describe(),
        }


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
