"""The documented main job, through the CLI: preprocess the PTB sample → baseline parse → eval, on real data.

Each step's output feeds the next as a user would chain them, and the numbers must be docs/evaluation-protocol.md's
anchors.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from depinduce.cli.main import cli


def run(*args: str, stdin: str | None = None) -> str:
    result = CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def ptb(nltk_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("e2e") / "ptb"
    run("preprocess", "ptb", "--sample-only", "--out", str(out), "--quiet")
    return out


def metrics(gold: Path, pred: Path, *extra: str) -> dict:
    return json.loads(run("eval", "--gold", str(gold), "--pred", str(pred), "--json", *extra))


def test_right_branching_dependency_anchor(ptb: Path, tmp_path: Path) -> None:
    pred = tmp_path / "out.conllu"
    pred.write_text(run("parse", "--model", "right-branching", "--input-format", "conllu", "--quiet",
                        str(ptb / "test.conllu")), encoding="utf-8")
    result = metrics(ptb / "test.conllu", pred)
    assert result["dependency"]["tokens"] == 13812
    assert (round(result["metrics"]["dda"], 1), round(result["metrics"]["uda"], 1)) == (30.3, 50.2)
    assert result["metrics"]["las"] is None  # root/dep labels only: LAS would repeat DDA


def test_right_branching_constituency_anchors(ptb: Path, tmp_path: Path) -> None:
    for split, expected in (("test", (38.9, 36.2, 658)), ("wsj10", (57.6, 55.0, 542))):
        pred = tmp_path / f"{split}.trees"
        pred.write_text(run("parse", "--model", "right-branching", "--input-format", "conllu", "--format",
                            "brackets", "--quiet", str(ptb / f"{split}.conllu")), encoding="utf-8")
        result = metrics(ptb / f"{split}.trees", pred)
        con = result["metrics"]
        assert (round(con["uf1_sentence"], 1), round(con["uf1_corpus"], 1)) == expected[:2]
        assert result["constituency"]["sentences"] == expected[2]


def test_left_branching_against_nltk_dependency_files(ptb: Path, nltk_data: Path, tmp_path: Path) -> None:
    """Gold straight from nltk's word/tag/head .dp files, prediction written as CoNLL-X (MaltEval's format)."""
    with zipfile.ZipFile(nltk_data / "corpora" / "dependency_treebank.zip") as archive:
        names = sorted(n for n in archive.namelist() if n.endswith(".dp") and 150 <= int(n[-7:-3]) <= 199)
        blocks = [archive.read(n).decode("utf-8").strip("\n") for n in names]
    gold = tmp_path / "test.dp"
    gold.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    pred = tmp_path / "left.conllx"
    pred.write_text(run("parse", "--model", "left-branching", "--input-format", "conllu", "--format", "conllx",
                        "--quiet", str(ptb / "test.conllu")), encoding="utf-8")
    result = metrics(gold, pred)
    assert result["dependency"]["tokens"] == 13812
    assert (round(result["metrics"]["dda"], 1), round(result["metrics"]["uda"], 1)) == (20.0, 49.9)

