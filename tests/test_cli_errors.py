"""Bad input through the real command line: one line `FILE:LINE: what is wrong`, exit code 2, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.lower_bounds  # click's option parsing, quickly (scripts/check_lower_bounds.py)

DATA = Path(__file__).parent / "data" / "io"
GOOD = "1\tDogs\t_\tNOUN\tNNS\t_\t2\tnsubj\t_\t_\n2\tbark\t_\tVERB\tVBP\t_\t0\troot\t_\t_\n\n"


def depinduce(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "depinduce", *args], capture_output=True, text=True, cwd=cwd,
                          env=dict(os.environ), timeout=120)


@pytest.mark.parametrize(
    "gold, where, problem",
    [
        ("wrong_columns.conllu", ":10:", "column"),
        ("bad_head.conllu", ":8:", "head"),
        ("cycle.conllu", ":", "cycle"),
        ("two_roots.conllu", ":", "root"),
        ("empty.conllu", "", "no sentences"),
        ("unclosed.txt", ":", "bracket"),
    ],
)
def test_eval_rejects_malformed_gold(gold: str, where: str, problem: str, tmp_path: Path) -> None:
    pred = tmp_path / "pred.conllu"
    pred.write_text(GOOD, encoding="utf-8")
    result = depinduce("eval", "--gold", str(DATA / gold), "--pred", str(pred))
    assert result.returncode == 2
    assert result.stdout == "" and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(str(DATA / gold) + where) and problem in lines[0].lower()


def test_non_utf8_gold_names_the_line(tmp_path: Path) -> None:
    gold = tmp_path / "gold.conllu"
    gold.write_bytes(GOOD.encode() + b"1\tcaf\xe9\t_\tNOUN\tNN\t_\t0\troot\t_\t_\n\n")
    result = depinduce("eval", "--gold", str(gold), "--pred", str(gold))
    assert result.returncode == 2 and result.stderr.startswith(f"{gold}:4:") and "UTF-8" in result.stderr


def test_unbalanced_mrg_stops_preprocess_and_writes_nothing(tmp_path: Path) -> None:
    good = "( (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)) )\n"
    for number in [*range(2, 22), 22]:
        section = tmp_path / "ldc" / f"{number:02d}"
        section.mkdir(parents=True)
        (section / f"wsj_{number:02d}00.mrg").write_text(good, encoding="utf-8")
    (tmp_path / "ldc" / "23").mkdir()
    (tmp_path / "ldc" / "23" / "wsj_2300.mrg").write_text(good + "( (S (NP (DT The) (NN cat))\n  (VP (VBD sat)) (. .))\n",
                                                          encoding="utf-8")
    result = depinduce("preprocess", "ptb", "--quiet", "--ptb-dir", str(tmp_path / "ldc"), "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "wsj_2300.mrg:2:" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_existing_output_is_not_overwritten_without_force(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "keep.txt").write_text("user data", encoding="utf-8")
    text = tmp_path / "in.txt"
    text.write_text("One sentence here.\nAnother one there.\n", encoding="utf-8")
    result = depinduce("preprocess", "text", str(text), "--out", str(out))
    assert result.returncode == 2 and "--force" in result.stderr
    assert (out / "keep.txt").read_text(encoding="utf-8") == "user data"
