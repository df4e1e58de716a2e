"""Reading .mrg files: bracket scanning with located errors, trace and tag clean-up, sources and splits."""

from __future__ import annotations

from pathlib import Path

import nltk.corpus
import pytest
from nltk import Tree
from nltk.corpus.reader import BracketParseCorpusReader
from nltk.corpus.util import LazyCorpusLoader

from depinduce.data.headrules import PENN2MALT
from depinduce.data.ptb import (
    clean_tree,
    ldc_source,
    nltk_sample_source,
    prune_tree,
    ptb_to_upos,
    read_files,
    read_mrg,
    split_trees,
    strip_function_tags,
    tree_to_line,
)
from depinduce.errors import DepinduceError, InputError

pytestmark = pytest.mark.lower_bounds  # nltk's treebank reader, quickly (scripts/check_lower_bounds.py)

TWO_TREES = """
( (S
    (NP-SBJ-1 (NNP Vinken) )
    (VP (VBD was)
      (VP (VBN named)
        (NP (-NONE- *-1) )
        (NP-PRD (DT a) (NN director) )))
    (. .) ))
( (SINV (`` ``) (VP (VBZ Is) ) (NP-SBJ (PRP it) ) (. ?) ))
"""


def read(text: str, name: str = "wsj_0001.mrg", **kwargs: object):
    return read_mrg(text.encode("utf-8"), name, rules=PENN2MALT, **kwargs)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------- bracket scan


def test_split_trees_finds_each_tree_and_its_line() -> None:
    trees = split_trees(TWO_TREES, "f.mrg")
    assert [t.line for t in trees] == [2, 9]
    assert trees[1].text.startswith("( (SINV")


def test_two_trees_on_one_line_are_split() -> None:
    trees = split_trees("(S (NN a))(S (NN b))\n", "f.mrg")
    assert [t.text for t in trees] == ["(S (NN a))", "(S (NN b))"]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("( (S (NN a)) )\n(S (NN b)) )\n", 2, "')' at column 12 closes nothing"),
        ("( (S\n  (NN a)\n( (S (NN b)) )\n", 1, "2 unclosed '(' when the next tree starts at line 3"),
        ("( (S (NN a)) )\n\n( (S\n  (NN b)\n", 3, "unclosed '(' at the end of the file"),
        ("( (S (NN a)) )\nstray words\n", 2, "text outside any tree"),
    ],
)
def test_unbalanced_brackets_are_located(text: str, line: int, message: str) -> None:
    with pytest.raises(InputError) as error:
        split_trees(text, "bad.mrg")
    assert error.value.line == line
    assert str(error.value).startswith(f"bad.mrg:{line}: ")
    assert message in str(error.value)


# ---------------------------------------------------------------------------------------------- reading


def test_read_mrg_removes_traces_and_function_tags() -> None:
    first, second = read(TWO_TREES)
    assert first.words == ["Vinken", "was", "named", "a", "director", "."]
    assert first.xpos == ["NNP", "VBD", "VBN", "DT", "NN", "."]
    assert first.upos == ["PROPN", "VERB", "VERB", "DET", "NOUN", "PUNCT"]
    assert first.heads == [2, 0, 2, 5, 3, 2]
    assert first.sent_id == "wsj_0001.mrg:1" and second.sent_id == "wsj_0001.mrg:2"
    assert first.line == 2 and second.line == 9
    assert first.text == "Vinken was named a director ."
    assert first.metadata == {"punct_rule": "ptb"}
    # The NP that held only a trace is gone, and the labels lost their function tags.
    assert tree_to_line(first.tree) == (
        "(S (NP (NNP Vinken)) (VP (VBD was) (VP (VBN named) (NP (DT a) (NN director)))) (. .))"
    )


def test_keep_function_tags_keeps_them_in_the_tree_only() -> None:
    first = read(TWO_TREES, keep_function_tags=True)[0]
    assert first.tree is not None and first.tree[0].label() == "NP-SBJ-1"
    assert first.heads == [2, 0, 2, 5, 3, 2]


def test_sent_id_uses_the_file_name_without_folders() -> None:
    assert read(TWO_TREES, name="/data/wsj/02/wsj_0200.mrg")[0].sent_id == "wsj_0200.mrg:1"


@pytest.mark.parametrize(
    ("label", "stripped"),
    [("NP-SBJ-1", "NP"), ("PP-LOC=2", "PP"), ("ADVP|PRT", "ADVP"), ("-NONE-", "-NONE-"), ("-LRB-", "-LRB-"),
     ("S", "S"), ("PRP$", "PRP$")],
)
def test_strip_function_tags(label: str, stripped: str) -> None:
    assert strip_function_tags(label) == stripped


def test_clean_and_prune() -> None:
    tree = Tree.fromstring("(S (NP (-NONE- *)) (VP (VB go) (, ,) (NP (-NONE- *T*))) (. .))")
    clean = clean_tree(tree)
    assert clean is not None and tree_to_line(clean) == "(S (VP (VB go) (, ,)) (. .))"
    assert tree_to_line(clean, [True, False, False]) == "(S (VP (VB go)))"
    pruned = prune_tree(clean, [True, False, False])
    assert pruned is not None and tree_to_line(pruned) == "(S (VP (VB go)))"
    assert clean_tree(Tree.fromstring("(S (NP (-NONE- *)))")) is None


def test_upos_map() -> None:
    assert [ptb_to_upos(t) for t in ["MD", "TO", "$", "#", "-LRB-", "WDT", "PRP$", "RP", "ZZZ"]] == [
        "AUX", "PART", "SYM", "SYM", "PUNCT", "DET", "PRON", "ADP", "X"
    ]


@pytest.mark.parametrize(
    ("data", "line", "message"),
    [
        (b"", 1, "empty file"),
        (b"( (S (NN a)) )\n( (S (NN \xe9t\xe9)) )\n", 2, "not valid UTF-8"),
        (b"( (S (NN a) word) )\n", 1, "not alone under a part-of-speech tag"),
        (b"( (S (NN a)) )\n( (S (NP)) )\n", 2, "(NP) has no children"),
    ],
)
def test_bad_files_are_located(data: bytes, line: int, message: str) -> None:
    with pytest.raises(InputError) as error:
        read_mrg(data, "bad.mrg", rules=PENN2MALT)
    assert str(error.value).startswith(f"bad.mrg:{line}: ")
    assert message in str(error.value)


def test_tree_of_only_traces_is_skipped_but_numbering_kept() -> None:
    sentences = read("( (S (NP (-NONE- *))) )\n( (S (NN a)) )\n")
    assert [s.sent_id for s in sentences] == ["wsj_0001.mrg:2"]


# ---------------------------------------------------------------------------------------------- sources


def make_ldc_tree(root: Path, sections: dict[str, list[str]]) -> Path:
    """A fake LDC tree: section folders holding copies of NLTK sample files under LDC names."""
    from nltk.corpus import treebank

    for section, names in sections.items():
        (root / section).mkdir(parents=True, exist_ok=True)
        for k, name in enumerate(names):
            with treebank.abspath(f"wsj_{k + 1:04d}.mrg").open() as stream:
                (root / section / name).write_bytes(stream.read())
    return root


def test_ldc_source_uses_the_standard_sections(nltk_data: Path, tmp_path: Path) -> None:
    sections = {f"{s:02d}": [f"wsj_{s:02d}{k:02d}.mrg" for k in range(2)] for s in (0, 2, 21, 22, 23, 24)}
    root = make_ldc_tree(tmp_path / "wsj", sections)
    source = ldc_source(root)
    names = {split: [Path(f.name).name for f in files] for split, files in source.files.items()}
    assert names == {
        "train": ["wsj_0200.mrg", "wsj_0201.mrg", "wsj_2100.mrg", "wsj_2101.mrg"],
        "dev": ["wsj_2200.mrg", "wsj_2201.mrg"],
        "test": ["wsj_2300.mrg", "wsj_2301.mrg"],
    }
    description = source.describe()
    assert description["split"] == {"train": "sections 02-21", "dev": "sections 22-22", "test": "sections 23-23"}
    assert description["missing_sections"] == [f"{s:02d}" for s in range(3, 21)]
    per_file = list(read_files(source.files["test"], rules=PENN2MALT))
    assert len(per_file) == 2
    assert per_file[0][0].words[:2] == ["Pierre", "Vinken"]
    assert per_file[0][0].sent_id == "wsj_2300.mrg:1"


def test_ldc_source_names_missing_sections(nltk_data: Path, tmp_path: Path) -> None:
    root = make_ldc_tree(tmp_path / "wsj", {"02": ["wsj_0200.mrg"], "23": ["wsj_2300.mrg"]})
    with pytest.raises(DepinduceError, match=r"the dev split needs section\(s\) 22, which"):
        ldc_source(root)
    with pytest.raises(DepinduceError, match="no NN/wsj_NNNN.mrg files"):
        ldc_source(tmp_path / "wsj" / "02")
    with pytest.raises(DepinduceError, match="not a directory"):
        ldc_source(tmp_path / "nowhere")


def test_nltk_sample_split(nltk_data: Path) -> None:
    source = nltk_sample_source()
    assert {split: len(files) for split, files in source.files.items()} == {"train": 124, "dev": 25, "test": 50}
    assert source.files["dev"][0].name == "wsj_0125.mrg"
    assert source.files["test"][-1].name == "wsj_0199.mrg"


def test_missing_sample_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    missing = LazyCorpusLoader("treebank_not_installed", BracketParseCorpusReader, r"wsj_.*\.mrg")
    monkeypatch.setattr(nltk.corpus, "treebank", missing)
    with pytest.raises(DepinduceError) as error:
        nltk_sample_source()
    assert "python -m nltk.downloader treebank" in str(error.value)
    assert "--ptb-dir" in str(error.value)
