"""Head rules: turn a clean PTB constituency tree into a dependency tree by head percolation.

Every constituent picks one *head child* by a rule for its label; the lexical head of the constituent is the
lexical head of that child, and the lexical heads of all other children depend on it.  The input tree must be
clean (no ``-NONE-`` traces, no constituents they left empty, function tags and indices stripped — see
:func:`depinduce.data.ptb.clean_tree`); labels are looked up as they are.

A rule is a fallback direction plus an ordered list of *searches*.  A search is a direction and a set of labels:
scan the children in that direction and take the first whose label is in the set.  The first search that finds a
child wins.  The classic "for each category in the priority list, scan the children" rule is a list of
single-label searches; Penn2Malt's NP rule uses multi-label searches ("the rightmost of {NN NNS ...}").  When no
search finds anything, the first child in the fallback direction is the head, skipping punctuation children
while a non-punctuation child exists.

Two tables, selected by name (``--head-rules``):

``penn2malt``
    Yamada & Matsumoto (2003) as implemented by Penn2Malt, the convention of NLTK's ``dependency_treebank``.
    The published table (``docs/head-rules.md``) was transcribed from secondary sources; this module follows the data.
    Measured on the 3,914 sentences of the NLTK sample (punctuation included) against ``dependency_treebank``,
    see ``tests/test_headrules.py``.  Deliberate differences from the design table:

    - NP/NX: only ``POS NN NNP NNPS NNS`` form the first right-to-left set; ``NX`` and ``JJR`` follow it, each
      searched on its own, so ``(NP (NNP U.S.) (NX patents ...))`` is headed by *U.S.* and
      ``(NP (DT a) (NN year) (JJR earlier))`` by *year* (design: NX and JJR inside the first set).
    - NP/NX: ``JJ JJS RB QP`` are tried one category at a time, not as one set, so
      ``(NP (DT an) (JJ additional) (QP $ 55 million))`` is headed by *additional* and
      ``(NP (DT the) (JJS largest) (RB newsweekly))`` by *largest* (design: the rightmost of {JJ JJS RB QP}).
    - X: scanned right-to-left, so ``(X (NNP Tray) (NNP Bon) (. ?))`` is headed by *Bon* (design: the default,
      left-to-right).

    With these the agreement is 100.00% (94,084 of 94,084 tokens); the design table as written gives 99.95%.

``collins``
    Collins (1999) as in Stanford's ``CollinsHeadFinder``, with its special NP rule and coordination rule (a
    head preceded by CC/CONJP at child index ≥ 2 moves two children to the left).  Given for information and
    comparison; it is not what the NLTK conversion uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from depinduce.data.punct import PTB_PUNCT_TAGS
from depinduce.errors import UsageError

if TYPE_CHECKING:
    from nltk import Tree

Direction = Literal["left", "right", "last"]
"""``left``: scan left-to-right; ``right``: scan right-to-left; ``last``: only the last child is considered."""


@dataclass(frozen=True)
class Search:
    """Scan children in ``direction`` for the first one whose label is in ``labels``."""

    direction: Direction
    labels: frozenset[str]


@dataclass(frozen=True)
class HeadRule:
    """The searches for one parent label, tried in order, and the fallback direction."""

    fallback: Literal["left", "right"]
    searches: tuple[Search, ...] = ()


@dataclass(frozen=True)
class HeadRules:
    """A named head-rule table: a rule per parent label, a default rule, and Collins' coordination tweak."""

    name: str
    rules: dict[str, HeadRule]
    default: HeadRule
    coordination: bool = False

    def rule(self, label: str) -> HeadRule:
        return self.rules.get(label, self.default)


def _each(direction: Literal["left", "right"], categories: str) -> HeadRule:
    """The classic priority rule: for each category in turn, scan all children in ``direction``."""
    return HeadRule(direction, tuple(Search(direction, frozenset({c})) for c in categories.split()))


def _groups(fallback: Literal["left", "right"], *groups: tuple[Direction, str]) -> HeadRule:
    """A rule of multi-label searches, each with its own direction."""
    return HeadRule(fallback, tuple(Search(d, frozenset(labels.split())) for d, labels in groups))


# NP/NX: the rightmost noun (POS NN NNP NNPS NNS, one set); then, each searched on its own from the right,
# NX, JJR, CD, JJ, JJS, RB, QP, NP; else the rightmost non-punctuation child.
_PENN2MALT_NP = HeadRule(
    "right",
    (Search("right", frozenset("POS NN NNP NNPS NNS".split())),)
    + tuple(Search("right", frozenset({c})) for c in "NX JJR CD JJ JJS RB QP NP".split()),
)

PENN2MALT = HeadRules(
    name="penn2malt",
    rules={
        "ADJP": _each("right", "NNS QP NN $ ADVP JJ VBN VBG ADJP JJR NP JJS DT FW RBR RBS SBAR RB"),
        "ADVP": _each("left", "RB RBR RBS FW ADVP TO CD JJR JJ IN NP JJS NN"),
        "CONJP": _each("left", "CC RB IN"),
        "FRAG": _each("left", ""),
        "INTJ": _each("right", ""),
        "LST": _each("left", "LS :"),
        "NAC": _each("right", "NN NNS NNP NNPS NP NAC EX $ CD QP PRP VBG JJ JJS JJR ADJP FW"),
        "NP": _PENN2MALT_NP,
        "NX": _PENN2MALT_NP,
        "PP": _each("left", "IN TO VBG VBN RP FW"),
        "PRN": _each("right", ""),
        "PRT": _each("left", "RP"),
        "QP": _each("right", "$ IN NNS NN JJ RB DT CD NCD QP JJR JJS"),
        "RRC": _each("left", "VP NP ADVP ADJP PP"),
        "S": _each("right", "TO IN VP S SBAR ADJP UCP NP"),
        "SBAR": _each("right", "WHNP WHPP WHADVP WHADJP IN DT S SQ SINV SBAR FRAG"),
        "SBARQ": _each("right", "SQ S SINV SBARQ FRAG"),
        "SINV": _each("right", "VBZ VBD VBP VB MD VP S SINV ADJP NP"),
        "SQ": _each("right", "VBZ VBD VBP VB MD VP SQ"),
        "UCP": _each("left", ""),
        "VP": _each("left", "VBD VBN MD VBZ VB VBG VBP VP ADJP NN NNS NP"),
        "WHADJP": _each("right", "CC WRB JJ ADJP"),
        "WHADVP": _each("left", "CC WRB"),
        "WHNP": _each("right", "WDT WP WP$ WHADJP WHPP WHNP"),
        "WHPP": _each("left", "IN TO FW"),
        "X": _each("right", ""),
    },
    default=HeadRule("left"),
)

_COLLINS_NP = _groups(
    "right",
    ("last", "POS"),
    ("right", "NN NNP NNPS NNS NX POS JJR"),
    ("left", "NP"),
    ("right", "$ ADJP PRN"),
    ("right", "CD"),
    ("right", "JJ JJS RB QP"),
)

COLLINS = HeadRules(
    name="collins",
    rules={
        "ADJP": _each("left", "NNS QP NN $ ADVP JJ VBN VBG ADJP JJR NP JJS DT FW RBR RBS SBAR RB"),
        "ADVP": _each("right", "RB RBR RBS FW ADVP TO CD JJR JJ IN NP JJS NN"),
        "CONJP": _each("right", "CC RB IN"),
        "FRAG": _each("right", ""),
        "INTJ": _each("left", ""),
        "LST": _each("right", "LS :"),
        "NAC": _each("left", "NN NNS NNP NNPS NP NAC EX $ CD QP PRP VBG JJ JJS JJR ADJP FW"),
        "NP": _COLLINS_NP,
        "NX": _each("left", ""),
        "PP": _each("right", "IN TO VBG VBN RP FW"),
        "PRN": _each("left", ""),
        "PRT": _each("right", "RP"),
        "QP": _each("left", "$ IN NNS NN JJ RB DT CD NCD QP JJR JJS"),
        "RRC": _each("right", "VP NP ADVP ADJP PP"),
        "S": _each("left", "TO IN VP S SBAR ADJP UCP NP"),
        "SBAR": _each("left", "WHNP WHPP WHADVP WHADJP IN DT S SQ SINV SBAR FRAG"),
        "SBARQ": _each("left", "SQ S SINV SBARQ FRAG"),
        "SINV": _each("left", "VBZ VBD VBP VB MD VP S SINV ADJP NP"),
        "SQ": _each("left", "VBZ VBD VBP VB MD VP SQ"),
        "UCP": _each("right", ""),
        "VP": _each("left", "TO VBD VBN MD VBZ VB VBG VBP VP ADJP NN NNS NP"),
        "WHADJP": _each("left", "CC WRB JJ ADJP"),
        "WHADVP": _each("right", "CC WRB"),
        "WHNP": _each("left", "WDT WP WP$ WHADJP WHPP WHNP"),
        "WHPP": _each("right", "IN TO FW"),
        "X": _each("right", ""),
    },
    default=HeadRule("left"),
    coordination=True,
)

HEAD_RULES: dict[str, HeadRules] = {"penn2malt": PENN2MALT, "collins": COLLINS}


def get_head_rules(name: str) -> HeadRules:
    """The table called ``name``; an unknown name is a user error listing the choices."""
    try:
        return HEAD_RULES[name]
    except KeyError:
        raise UsageError(f"unknown head rules {name!r}; choose one of {', '.join(HEAD_RULES)}") from None


def head_child(rule: HeadRule, labels: Sequence[str], coordination: bool = False) -> int:
    """Index of the head among children with ``labels`` (phrase labels or POS tags) under ``rule``."""
    n = len(labels)
    if n == 1:
        return 0
    found = -1
    for search in rule.searches:
        if search.direction == "last":
            if labels[-1] in search.labels:
                found = n - 1
        else:
            order = range(n) if search.direction == "left" else range(n - 1, -1, -1)
            for i in order:
                if labels[i] in search.labels:
                    found = i
                    break
        if found >= 0:
            break
    if found < 0:
        order = range(n) if rule.fallback == "left" else range(n - 1, -1, -1)
        found = next((i for i in order if labels[i] not in PTB_PUNCT_TAGS), order[0])
    if coordination and found >= 2 and labels[found - 1] in ("CC", "CONJP"):
        found -= 2
    return found


def dependency_heads(tree: Tree, rules: HeadRules) -> list[int]:
    """Heads (1-based, 0 = ROOT) of the words of a clean PTB tree, in leaf order."""
    from nltk import Tree  # here, not above: `preprocess --help` reads HEAD_RULES and must not wait for nltk

    heads: list[int] = []

    def lexical_head(node: Tree) -> int:
        if len(node) == 1 and not isinstance(node[0], Tree):
            heads.append(0)
            return len(heads)
        lexical = [lexical_head(child) for child in node]
        k = head_child(rules.rule(node.label()), [child.label() for child in node], rules.coordination)
        head = lexical[k]
        for i, word in enumerate(lexical):
            if i != k:
                heads[word - 1] = head
        return head

    lexical_head(tree)
    return heads
