"""Penn Treebank WSJ: find the .mrg files, read their trees, clean them and convert them to dependencies.

Two sources, one shape of result (:class:`PtbSource`: the .mrg files of each split):

- an LDC tree (``--ptb-dir``): section folders ``00``–``24`` of ``wsj_NNNN.mrg``, standard split train 02–21,
  dev 22, test 23;
- NLTK's ``treebank`` sample (wsj_0001–wsj_0199): train 0001–0124, dev 0125–0149, test 0150–0199.

Both are opened through nltk's :class:`BracketParseCorpusReader` (file discovery, zip access) and every tree is
read by nltk's ``Tree.fromstring``.  The reader's own corpus view is not used for the trees: it silently
"recovers" from unbalanced brackets (a wrong tree instead of an error) and its seekable stream makes reading
three times slower.  Instead a bracket scan splits each file into trees the way the reader does (a tree starts
at an unindented ``(``), records each tree's line, and turns unbalanced brackets into ``FILE:LINE`` errors.
nltk ≥ 3.9 opens corpora only below ``nltk.data.path``, so a ``--ptb-dir`` the user names is added to it.

Cleaning (:func:`clean_tree`) drops ``-NONE-`` traces and the constituents they leave empty and strips function
tags and indices (``NP-SBJ-1`` → ``NP``, ``PP-LOC=2`` → ``PP``, ``ADVP|PRT`` → ``ADVP``); head rules are looked up
on the stripped labels (:mod:`depinduce.data.headrules`).  Traces are always removed: both the head rules and the
evaluation protocol's word-tag filter are defined on trace-free trees.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nltk import Tree
from nltk.corpus.reader import BracketParseCorpusReader

from depinduce.data.headrules import HeadRules, dependency_heads
from depinduce.structures.sentence import Sentence
from depinduce.errors import InputError, NotFoundError
from depinduce.io.lines import decode_utf8

SPLITS = ("train", "dev", "test")

# Standard split of the full WSJ treebank by section.
LDC_SECTIONS: dict[str, tuple[int, ...]] = {"train": tuple(range(2, 22)), "dev": (22,), "test": (23,)}

# Split of NLTK's 199-file sample by file number (inclusive ranges).
SAMPLE_FILES: dict[str, tuple[int, int]] = {"train": (1, 124), "dev": (125, 149), "test": (150, 199)}

NLTK_HINT = "install NLTK's sample with `python -m nltk.downloader treebank brown`, or pass --ptb-dir PATH"

# The standard PTB → UD v2 part-of-speech map (tag-only; e.g. every MD is AUX, every VB* is VERB).
PTB_TO_UPOS: dict[str, str] = {
    "#": "SYM", "$": "SYM", "''": "PUNCT", "``": "PUNCT", ",": "PUNCT", ".": "PUNCT", ":": "PUNCT",
    "-LRB-": "PUNCT", "-RRB-": "PUNCT", "HYPH": "PUNCT", "NFP": "PUNCT",
    "AFX": "ADJ", "JJ": "ADJ", "JJR": "ADJ", "JJS": "ADJ",
    "CC": "CCONJ", "CD": "NUM", "DT": "DET", "PDT": "DET", "WDT": "DET", "EX": "PRON",
    "FW": "X", "LS": "X", "ADD": "X", "GW": "X", "XX": "X", "-NONE-": "X",
    "IN": "ADP", "RP": "ADP", "MD": "AUX",
    "NN": "NOUN", "NNS": "NOUN", "NNP": "PROPN", "NNPS": "PROPN",
    "POS": "PART", "TO": "PART", "PRP": "PRON", "PRP$": "PRON", "WP": "PRON", "WP$": "PRON",
    "RB": "ADV", "RBR": "ADV", "RBS": "ADV", "WRB": "ADV",
    "SYM": "SYM", "UH": "INTJ",
    "VB": "VERB", "VBD": "VERB", "VBG": "VERB", "VBN": "VERB", "VBP": "VERB", "VBZ": "VERB",
}

_FILE_NUMBER = re.compile(r"wsj_(\d{4})\.mrg$", re.IGNORECASE)
_LDC_FILEIDS = r"(?i)\d\d/wsj_\d{4}\.mrg"
_SCAN_TOKEN = re.compile(r"[()]|[^\s()]+")


def ptb_to_upos(tag: str) -> str:
    """The UD part of speech for a PTB tag; unknown tags become ``X``."""
    return PTB_TO_UPOS.get(tag, "X")


# --------------------------------------------------------------------------------------------- bracket scan


@dataclass(frozen=True)
class TreeText:
    """The bracketed text of one tree and the 1-based line where it starts."""

    line: int
    text: str


def split_trees(text: str, name: str) -> list[TreeText]:
    """Split a .mrg file into bracketed trees, raising ``FILE:LINE`` errors for unbalanced brackets.

    A tree starts at a ``(`` at depth 0 and ends where its brackets balance.  An unindented ``(`` inside an open
    tree means the previous tree lost a ``)``: that tree's start line is reported.  Lines are handled with
    ``str.count`` where their brackets cannot close the tree, so a 40k-tree treebank scans in well under a second.
    """
    trees: list[TreeText] = []
    depth = 0
    start_line = 0
    start_offset = 0
    offset = 0
    for number, line in enumerate(text.split("\n"), start=1):
        line_offset = offset
        offset += len(line) + 1
        if depth > 0 and line.startswith("("):
            raise InputError(name, start_line, f"unbalanced brackets: the tree starting on this line has {depth} "
                                               f"unclosed '(' when the next tree starts at line {number}")
        closes = line.count(")")
        if depth > 0 and depth - closes > 0:
            depth += line.count("(") - closes
            continue
        for match in _SCAN_TOKEN.finditer(line):
            token = match.group()
            if token == "(":
                if depth == 0:
                    start_line, start_offset = number, line_offset + match.start()
                depth += 1
            elif token == ")":
                if depth == 0:
                    raise InputError(name, number, f"unbalanced brackets: ')' at column {match.start() + 1} "
                                                   "closes nothing")
                depth -= 1
                if depth == 0:
                    trees.append(TreeText(start_line, text[start_offset:line_offset + match.end()]))
            elif depth == 0:
                raise InputError(name, number, f"text outside any tree at column {match.start() + 1}: "
                                               f"{token[:30]!r}")
    if depth > 0:
        raise InputError(name, start_line, f"unbalanced brackets: the tree starting on this line has {depth} "
                                           "unclosed '(' at the end of the file")
    return trees


def parse_tree(tree_text: TreeText, name: str) -> Tree:
    """Read one bracketed tree with nltk, dropping the unlabelled wrapper ``( (S ...) )``."""
    try:
        tree = Tree.fromstring(tree_text.text)
    except ValueError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "cannot read the tree"
        raise InputError(name, tree_text.line, f"malformed tree: {first}") from None
    if tree.label() == "" and len(tree) == 1 and isinstance(tree[0], Tree):
        return tree[0]
    if tree.label() == "":
        tree.set_label("TOP")
    return tree


# ----------------------------------------------------------------------------------------------- cleaning


def strip_function_tags(label: str) -> str:
    """``NP-SBJ-1`` → ``NP``, ``PP-LOC=2`` → ``PP``, ``ADVP|PRT`` → ``ADVP``; ``-NONE-``/``-LRB-`` stay."""
    if label.startswith("-"):
        return label
    base = re.split(r"[-=|]", label, maxsplit=1)[0]
    return base or label


class TreeShapeError(ValueError):
    """A bracketed tree that is not a PTB tree (a word beside constituents, a constituent with no children)."""


def clean_tree(tree: Tree, *, strip_tags: bool = True) -> Tree | None:
    """A copy without ``-NONE-`` leaves and the constituents left empty; None when nothing is left.

    Phrase labels lose function tags and indices when ``strip_tags``; preterminal tags are never changed.
    Raises :class:`TreeShapeError` when a word is not alone under its tag or a constituent is empty.
    """
    if len(tree) == 1 and not isinstance(tree[0], Tree):
        return None if tree.label() == "-NONE-" else Tree(tree.label(), [tree[0]])
    if not tree:
        raise TreeShapeError(f"({tree.label()}) has no children")
    children = []
    for child in tree:
        if not isinstance(child, Tree):
            raise TreeShapeError(f"the word {child!r} is not alone under a part-of-speech tag in ({tree.label()} ...)")
        kept = clean_tree(child, strip_tags=strip_tags)
        if kept is not None:
            children.append(kept)
    if not children:
        return None
    return Tree(strip_function_tags(tree.label()) if strip_tags else tree.label(), children)


def prune_tree(tree: Tree, keep: Sequence[bool]) -> Tree | None:
    """A copy keeping only the words flagged in ``keep`` (leaf order); emptied constituents are deleted."""
    position = 0

    def walk(node: Tree) -> Tree | None:
        nonlocal position
        if len(node) == 1 and not isinstance(node[0], Tree):
            position += 1
            return Tree(node.label(), [node[0]]) if keep[position - 1] else None
        children = [kept for kept in (walk(child) for child in node) if kept is not None]
        return Tree(node.label(), children) if children else None

    return walk(tree)


def tree_to_line(tree: Tree, keep: Sequence[bool] | None = None) -> str | None:
    """One tree as one line of brackets, optionally keeping only the flagged words (as :func:`prune_tree` does,
    without building the pruned copy); None when no word is kept."""
    position = 0

    def walk(node: Tree) -> str | None:
        nonlocal position
        if len(node) == 1 and not isinstance(node[0], Tree):
            position += 1
            if keep is not None and not keep[position - 1]:
                return None
            return f"({node.label()} {node[0]})"
        parts = [part for part in (walk(child) for child in node) if part is not None]
        return f"({node.label()} {' '.join(parts)})" if parts else None

    return walk(tree)


# ------------------------------------------------------------------------------------------------ reading


def read_mrg(
    data: bytes,
    name: str,
    *,
    rules: HeadRules,
    keep_function_tags: bool = False,
) -> list[Sentence]:
    """Sentences of one .mrg file: words, tags (XPOS and UPOS), heads by ``rules``, the clean tree.

    ``name`` is the file name used in sentence ids (``wsj_0001.mrg:1``) and error messages.
    """
    text = decode_utf8(data, name)
    if not text.strip():
        raise InputError(name, 1, "empty file: no trees")
    base = Path(name).name
    sentences: list[Sentence] = []
    for number, tree_text in enumerate(split_trees(text, name), start=1):
        raw = parse_tree(tree_text, name)
        try:
            clean = clean_tree(raw)
        except TreeShapeError as exc:
            raise InputError(name, tree_text.line, f"malformed tree starting on this line: {exc}") from None
        except RecursionError:
            raise InputError(name, tree_text.line, "tree nested too deeply to process") from None
        if clean is None:
            continue
        tagged = clean.pos()
        words = [w for w, _ in tagged]
        tags = [t for _, t in tagged]
        sentences.append(
            Sentence(
                words=words,
                xpos=tags,
                upos=[ptb_to_upos(t) for t in tags],
                heads=dependency_heads(clean, rules),
                tree=clean_tree(raw, strip_tags=False) if keep_function_tags else clean,
                sent_id=f"{base}:{number}",
                text=" ".join(words),
                line=tree_text.line,
                metadata={"punct_rule": "ptb"},
            )
        )
    return sentences


MRG_MAX_BYTES = 64 * 2**20


@dataclass
class MrgFile:
    """One .mrg file of a split: how to name it and where its bytes come from."""

    name: str
    reader: BracketParseCorpusReader
    fileid: str

    def read_bytes(self) -> bytes:
        """The file's bytes, at most :data:`MRG_MAX_BYTES` (a WSJ file holds tens of kB): a device or an endless
        file put in a treebank folder is one line, not all of memory."""
        try:
            with self.reader.abspath(self.fileid).open() as stream:
                data = stream.read(MRG_MAX_BYTES + 1)
        except ValueError as exc:  # nltk refuses a link that leads out of the treebank folder
            raise InputError(self.name, None, f"cannot read it ({exc})") from None
        if len(data) > MRG_MAX_BYTES:
            raise InputError(self.name, None, f"more than {MRG_MAX_BYTES // 2**20} MiB, too large for a treebank file")
        return data


@dataclass
class PtbSource:
    """The files of each split and a description for the manifest."""

    kind: str
    location: str
    files: dict[str, list[MrgFile]] = field(default_factory=dict)
    missing_sections: list[str] = field(default_factory=list)

    def describe(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "location": self.location,
            "files": {split: len(files) for split, files in self.files.items()},
            "missing_sections": self.missing_sections,
            "split": (
                {s: f"sections {sec[0]:02d}-{sec[-1]:02d}" for s, sec in LDC_SECTIONS.items()}
                if self.kind == "ldc"
                else {s: f"wsj_{a:04d}-wsj_{b:04d}" for s, (a, b) in SAMPLE_FILES.items()}
            ),
        }


def _authorize_for_nltk(root: Path) -> str:
    """Let nltk read a folder the user named: recent nltk only opens corpora under ``nltk.data.path``."""
    import nltk

    resolved = str(root.resolve())
    if resolved not in nltk.data.path:
        nltk.data.path.append(resolved)
    return resolved


def ldc_source(ptb_dir: str | Path) -> PtbSource:
    """The standard WSJ split of an LDC tree.

    A split with none of its sections is an error naming them; a partial tree (some training sections absent)
    is used as it is, and the absent sections are listed in the manifest (and logged).
    """
    root = Path(ptb_dir)
    if not root.is_dir():
        raise NotFoundError(f"--ptb-dir {root}: not a directory")
    reader = BracketParseCorpusReader(_authorize_for_nltk(root), _LDC_FILEIDS)
    by_section: dict[int, list[str]] = {}
    for fileid in reader.fileids():
        by_section.setdefault(int(fileid[:2]), []).append(fileid)
    if not by_section:
        raise NotFoundError(f"--ptb-dir {root}: no NN/wsj_NNNN.mrg files (expected section folders 00-24 of "
                            "the LDC WSJ tree, e.g. .../parsed/mrg/wsj)")
    source = PtbSource("ldc", str(root))
    for split, sections in LDC_SECTIONS.items():
        present = [s for s in sections if s in by_section]
        if not present:
            raise NotFoundError(f"--ptb-dir {root}: the {split} split needs section(s) "
                                f"{', '.join(f'{s:02d}' for s in sections)}, which have no wsj_NNNN.mrg files")
        source.missing_sections.extend(f"{s:02d}" for s in sections if s not in by_section)
        source.files[split] = [MrgFile(str(root / f), reader, f) for s in present for f in sorted(by_section[s])]
    return source


def nltk_sample_source() -> PtbSource:
    """NLTK's ``treebank`` sample split by file number; absent → an error that says how to get it."""
    from nltk.corpus import treebank

    try:
        fileids = treebank.fileids()
    except LookupError:
        raise NotFoundError(f"no Penn Treebank found: {NLTK_HINT}") from None
    source = PtbSource("nltk-sample", str(treebank.root))
    for split, (first, last) in SAMPLE_FILES.items():
        chosen = [f for f in fileids if (m := _FILE_NUMBER.search(f)) and first <= int(m[1]) <= last]
        source.files[split] = [MrgFile(f, treebank, f) for f in sorted(chosen)]
    if not any(source.files.values()):
        raise NotFoundError(f"NLTK's treebank at {treebank.root} holds no wsj_NNNN.mrg files: {NLTK_HINT}")
    return source


def read_files(
    files: Sequence[MrgFile], *, rules: HeadRules, keep_function_tags: bool = False
) -> Iterator[list[Sentence]]:
    """Sentences of each file in turn (a generator, so callers can show progress per file)."""
    for mrg in files:
        yield read_mrg(mrg.read_bytes(), mrg.name, rules=rules, keep_function_tags=keep_function_tags)
