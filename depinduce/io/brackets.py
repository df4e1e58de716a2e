"""Bracketed trees: PTB-style labelled trees and depinduce's unlabelled ``(w1 (w2 w3))`` trees.

Writing: one tree per line.  Unlabelled nodes (label ``""``) are written ``(child child …)``; labelled nodes
``(LABEL child …)``, preterminals ``(TAG word)``.  A round bracket inside a word would break the syntax, so it
is written as the PTB escape ``-LRB-``/``-RRB-``; square and curly brackets are left alone (they are not
syntax, and escaping them would only make forms differ from the input).  Whitespace inside a word (possible in
CoNLL-U forms) is written as ``_`` so the leaf count is kept.

Reading: one tree per line, or PTB ``.mrg`` trees spread over several lines; the unlabelled root wrapper of
``( (S …) )`` is removed.  Words are kept exactly as written (``-LRB-`` stays ``-LRB-``, as in the PTB, whose
gold words are already escaped), so reading what we wrote gives back every word that had no round bracket.

Labelled or unlabelled?  ``(a (b c))`` reads either way, so the whole file is classified at once, unless the
caller forces it with ``labels=True/False``.  A file is read as labelled when all three hold:
1. every node reads as labelled: a label atom first, then either exactly one word (a preterminal) or only
   subtrees (the root may instead be an unlabelled wrapper around a single subtree);
2. some node has a label and two or more subtrees — real phrase-structure trees branch, whereas an unlabelled
   binary tree that passes test 1 (``(a (b (c d)))``) reads as labelled only as a chain of unary nodes;
3. at least 90% of the would-be labels contain no lowercase letter (``NP``, ``PRP$``, ``-NONE-``, ``,``),
   whereas would-be labels of an unlabelled tree are words, which nearly always do.
A file in which no node branches — every tree a unary chain over one word, as the one-word sentences of a PTB
split are (``(NP (NP (NNS Markets)))``) — is read as labelled when *every* would-be label has no lowercase
letter and looks like a PTB tag (``NP``, ``PRP$``, ``-NONE-``, ``,``), so such a tree is the one-word sentence ``Markets`` and not four words named after its labels.
Otherwise the file is unlabelled, and every atom is a word.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO, Union

if TYPE_CHECKING:  # imported where trees are made or walked (structures.spans.nltk_tree says why)
    from nltk import Tree

from depinduce.structures.sentence import Sentence
from depinduce.structures.spans import nltk_tree
from depinduce.errors import InputError, UsageError
from depinduce.io.lines import display_name, no_sentences, read_text, split_lines

TAG_LIKE_SHARE = 0.9

_TOKEN = re.compile(r"\(|\)|[^\s()]+")
# a PTB tag or phrase label: capitals (with $, digits, -, = after the first), or a punctuation tag
_TAG = re.compile(r"[A-Z][A-Z0-9$=-]*|-[A-Z]+-|[-,.:`'#$]+")


@dataclass
class _Node:
    """A bracketed node before interpretation: its items (words/labels or nodes) and where it opens."""

    line: int
    items: list[Union[str, "_Node"]] = field(default_factory=list)


# --------------------------------------------------------------------------------------------------- reading


def _tokens(text: str) -> Iterator[tuple[str, int]]:
    for line in split_lines(text):
        for match in _TOKEN.finditer(line.text):
            yield match.group(), line.number


def parse_bracket_nodes(text: str, name: str) -> list[_Node]:
    """Split text into top-level bracketed nodes; unbalanced brackets are an InputError at their line."""
    roots: list[_Node] = []
    stack: list[_Node] = []
    for token, line in _tokens(text):
        if token == "(":
            node = _Node(line)
            if stack:
                stack[-1].items.append(node)
            else:
                roots.append(node)
            stack.append(node)
        elif token == ")":
            if not stack:
                raise InputError(name, line, "unbalanced brackets: ')' without a matching '('")
            node = stack.pop()
            if not node.items:
                raise InputError(name, node.line, "empty brackets '()'")
        elif stack:
            stack[-1].items.append(token)
        else:
            raise InputError(name, line, f"text outside brackets: '{token}'")
    if stack:
        raise InputError(name, stack[-1].line, "unbalanced brackets: '(' opened here is never closed")
    return roots


def _walk(root: _Node) -> Iterator[tuple[_Node, bool]]:
    """Every node in document order with whether it is the root, without recursion (trees may be hundreds of
    levels deep), so the first problem found is the first in the file."""
    stack = [(root, True)]
    while stack:
        node, is_root = stack.pop()
        yield node, is_root
        stack.extend((item, False) for item in reversed(node.items) if isinstance(item, _Node))


def _labelled_problem(node: _Node, is_root: bool) -> str | None:
    """Why ``node`` cannot be read as a labelled (PTB) node, or None when it can."""
    first, rest = node.items[0], node.items[1:]
    if isinstance(first, _Node):
        if is_root and not rest:
            return None  # the ( (S ...) ) wrapper
        return "a node starts with a subtree instead of a label"
    if not rest:
        return f"'({first})' has a label but no children"
    words = sum(isinstance(item, str) for item in rest)
    if words == 0 or (words == 1 and len(rest) == 1):
        return None
    if words == len(rest):
        return f"node '{first}' has {words} words directly under it (a preterminal has one)"
    return f"node '{first}' mixes words and subtrees"


def looks_labelled(roots: list[_Node]) -> bool:
    """The per-file decision described in the module docstring."""
    branching = False
    labels = 0
    tag_like = 0
    for root in roots:
        for node, is_root in _walk(root):
            if _labelled_problem(node, is_root):
                return False
            first = node.items[0]
            if isinstance(first, str):
                labels += 1
                tag_like += not any(ch.islower() for ch in first)
                branching = branching or sum(isinstance(i, _Node) for i in node.items[1:]) >= 2
    if not branching:  # only unary chains over one word: labelled when every would-be label is a tag
        return labels > 0 and all(_TAG.fullmatch(str(node.items[0])) for root in roots
                                  for node, _ in _walk(root) if isinstance(node.items[0], str))
    return tag_like >= TAG_LIKE_SHARE * labels


def _to_tree(root: _Node, labelled: bool) -> Tree:
    """Build the nltk Tree bottom-up without recursion; labelled nodes take their first atom as the label."""
    Tree = nltk_tree()  # noqa: N806
    built: dict[int, Tree] = {}
    stack: list[tuple[_Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if not children_done:
            stack.append((node, True))
            stack.extend((item, False) for item in node.items if isinstance(item, _Node))
            continue
        label, items = (str(node.items[0]), node.items[1:]) if labelled else ("", node.items)
        built[id(node)] = Tree(label, [item if isinstance(item, str) else built.pop(id(item)) for item in items])
    return built[id(root)]


def _words_and_tags(tree: Tree) -> tuple[list[str], list[str]]:
    """Leaves in order and, for labelled trees, the label of each leaf's parent (its preterminal tag)."""
    Tree = nltk_tree()  # noqa: N806
    words: list[str] = []
    tags: list[str] = []
    order: list[Tree | tuple[str, str]] = [tree]
    while order:
        item = order.pop()
        if isinstance(item, tuple):
            words.append(item[0])
            tags.append(item[1])
            continue
        for child in reversed(item):
            order.append(child if isinstance(child, Tree) else (str(child), str(item.label())))
    return words, tags


def _strip_wrapper(root: _Node) -> _Node:
    """``( (S ...) )`` → ``(S ...)``: a root around a single subtree adds no constituent."""
    while len(root.items) == 1 and isinstance(root.items[0], _Node):
        root = root.items[0]
    return root


def _sentence(root: _Node, labelled: bool, name: str) -> Sentence:
    if labelled:
        for node, is_root in _walk(root):
            problem = _labelled_problem(node, is_root)
            if problem:
                raise InputError(name, node.line, f"not a labelled tree: {problem}")
    tree = _to_tree(_strip_wrapper(root), labelled)
    words, tags = _words_and_tags(tree)
    return Sentence(words=words, xpos=tags if labelled else None, tree=tree, line=root.line)


def parse_brackets_text(text: str, name: str, *, labels: bool | None = None) -> list[Sentence]:
    """Parse bracketed trees; ``labels`` forces labelled (True) or unlabelled (False) reading."""
    roots = parse_bracket_nodes(text, name)
    if not roots:
        raise no_sentences(name)
    labelled = looks_labelled(roots) if labels is None else labels
    return [_sentence(root, labelled, name) for root in roots]


def read_brackets(path: str, *, labels: bool | None = None) -> list[Sentence]:
    """Read a bracketed-tree file (``-`` = stdin)."""
    return parse_brackets_text(read_text(path), display_name(path), labels=labels)


# --------------------------------------------------------------------------------------------------- writing


def escape_atom(text: str) -> str:
    """A word or label as one bracket-safe atom (see the module docstring)."""
    text = re.sub(r"\s+", "_", str(text)) or "_"
    return text.replace("(", "-LRB-").replace(")", "-RRB-")


def tree_to_brackets(tree: Tree) -> str:
    """One line: ``(w1 (w2 w3))`` for unlabelled trees, ``(S (NP (DT the) …) …)`` for labelled ones."""
    Tree = nltk_tree()  # noqa: N806
    tokens: list[str] = []  # "(" or "(LABEL", atoms, and ")"
    stack: list[Tree | str | None] = [tree]  # None marks a node's end; no recursion, so deep trees are fine
    while stack:
        item = stack.pop()
        if item is None:
            tokens.append(")")
        elif isinstance(item, Tree):
            label = str(item.label())
            tokens.append("(" + escape_atom(label) if label else "(")
            stack.append(None)
            stack.extend(reversed(list(item)))
        else:
            tokens.append(escape_atom(item))
    out: list[str] = []
    for previous, token in zip([""] + tokens, tokens):
        if previous not in ("", "(") and token != ")":
            out.append(" ")
        out.append(token)
    return "".join(out)


def write_brackets(sentences: Iterable[Sentence], stream: TextIO) -> int:
    """Write each sentence's tree on its own line; returns how many were written."""
    count = 0
    for count, sentence in enumerate(sentences, start=1):
        if sentence.tree is None:
            raise UsageError(f"sentence {count}: has no constituency tree to write as brackets")
        stream.write(tree_to_brackets(sentence.tree) + "\n")
    return count
