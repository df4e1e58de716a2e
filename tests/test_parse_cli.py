"""`depinduce parse` end to end: text and CoNLL-U input, every format and decoder, punctuation, bad input."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import conllu
import pytest
from click.testing import CliRunner

from depinduce.cli.main import cli
from depinduce.structures.dependency import is_tree

TEXT = (
    'He said, "I can\'t go (now)."\n'
    "\n"
    "Naïve café owners — über-busy — paid $10.\n"
    "   \n"
    "Dogs bark\n"
)


def run(args: list[str], stdin: str | bytes | None = None):
    return CliRunner().invoke(cli, args, input=stdin, catch_exceptions=False)


def udvalidate(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["udvalidate", "--lang", "ud", "--level", "2", str(path)], capture_output=True, text=True)


def test_text_to_conllu_is_valid_and_keeps_every_token(tmp_path: Path) -> None:
    result = run(["parse", "--model", "right-branching", "--full-ud", "--quiet", "-"], TEXT)
    assert result.exit_code == 0, result.stderr
    out = tmp_path / "out.conllu"
    out.write_text(result.stdout, encoding="utf-8")
    check = udvalidate(out)
    assert check.returncode == 0, check.stdout + check.stderr
    sentences = conllu.parse(result.stdout)
    # blank lines are skipped; sent_id is the input line number
    assert [s.metadata["sent_id"] for s in sentences] == ["1", "3", "5"]
    assert sentences[0].metadata["text"] == 'He said, "I can\'t go (now)."'
    assert [t["form"] for t in sentences[0]] == ["He", "said", ",", '"', "I", "ca", "n't", "go", "(", "now", ")", ".", '"']
    # right-branching over the visible words He said I ca n't go now (positions 1 2 5 6 7 8 10); root = now (10)
    heads = [t["head"] for t in sentences[0]]
    assert heads == [2, 5, 2, 2, 6, 7, 8, 10, 8, 0, 10, 10, 10]
    assert [t["deprel"] for t in sentences[0]].count("root") == 1
    assert [t["form"] for t in sentences[1]][0] == "Naïve"


def test_text_in_conllx_brackets_jsonl() -> None:
    conllx = run(["parse", "--model", "left-branching", "--format", "conllx", "--quiet", "-"], TEXT).stdout
    assert not any(line.startswith("#") for line in conllx.splitlines())
    blocks = conllx.split("\n\n")
    assert conllx.endswith("\n\n") and not conllx.endswith("\n\n\n") and len([b for b in blocks if b]) == 3
    for line in filter(None, conllx.splitlines()):
        cols = line.split("\t")
        assert len(cols) == 10 and cols[6].isdigit() and cols[7] not in ("", "_")

    brackets = run(["parse", "--model", "right-branching", "--format", "brackets", "--quiet", "-"], TEXT).stdout
    lines = brackets.splitlines()
    assert lines[2] == "(Dogs bark)"
    # every token, punctuation included, in order; brackets in words escaped
    assert lines[0].startswith("(He") and "-LRB-" in lines[0] and "-RRB-" in lines[0]
    assert re.findall(r"[^\s()]+", lines[0]) == ["He", "said", ",", '"', "I", "ca", "n't", "go", "-LRB-", "now",
                                                 "-RRB-", ".", '"']

    rows = [json.loads(line) for line in run(["parse", "--model", "random", "--format", "jsonl", "--quiet", "-"],
                                             TEXT).stdout.splitlines()]
    assert [r["sent_id"] for r in rows] == ["1", "3", "5"]
    assert all(is_tree(r["heads"]) and r["tree"].startswith("(") for r in rows)


def test_decoders_agree_on_a_baseline_and_random_is_seeded() -> None:
    outs = {d: run(["parse", "--model", "right-branching", "--decoder", d, "--quiet", "-"], TEXT).stdout
            for d in ("mst", "eisner", "argmax")}
    assert outs["mst"] == outs["eisner"] == outs["argmax"]
    text = "the quick brown fox jumps over the lazy dog\n" * 3
    a = run(["parse", "--model", "random", "--format", "conllx", "--quiet", "-"], text).stdout
    b = run(["parse", "--model", "random", "--format", "conllx", "--quiet", "-"], text).stdout
    c = run(["parse", "--model", "random", "--seed", "7", "--format", "conllx", "--quiet", "-"], text).stdout
    assert a == b and a != c
    eisner = run(["parse", "--model", "random", "--decoder", "eisner", "--format", "jsonl", "--quiet", "-"], text)
    from depinduce.structures.dependency import is_projective
    assert all(is_projective(json.loads(line)["heads"]) for line in eisner.stdout.splitlines())


def test_long_sentence_and_tokenized_input() -> None:
    words = [f"w{i}" for i in range(520)]
    for decoder in ("mst", "eisner"):
        result = run(["parse", "--model", "random", "--decoder", decoder, "--tokenized", "--format", "jsonl",
                      "--quiet", "-"], " ".join(words) + "\n")
        row = json.loads(result.stdout)
        assert row["words"] == words and is_tree(row["heads"])
    result = run(["parse", "--model", "right-branching", "--tokenized", "--format", "jsonl", "--quiet", "-"],
                 "don't  split,this\n")
    assert json.loads(result.stdout)["words"] == ["don't", "split,this"]


def test_conllu_input_keeps_columns(ewt_dir: Path, tmp_path: Path) -> None:
    blocks = (ewt_dir / "en_ewt-ud-dev.conllu").read_text(encoding="utf-8").split("\n\n")[:40]
    gold = tmp_path / "gold.conllu"
    gold.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    result = run(["parse", "--model", "right-branching", "--input-format", "conllu", "--full-ud", "--quiet", str(gold)])
    assert result.exit_code == 0, result.stderr
    pred = tmp_path / "pred.conllu"
    pred.write_text(result.stdout, encoding="utf-8")
    assert udvalidate(pred).returncode == 0, udvalidate(pred).stdout
    for g, p in zip(conllu.parse(gold.read_text()), conllu.parse(result.stdout)):
        assert g.metadata == p.metadata
        for gt, pt in zip(g, p):
            for column in ("id", "form", "lemma", "upos", "xpos", "feats", "misc"):
                assert gt[column] == pt[column]
        words = [t for t in p if isinstance(t["id"], int)]
        heads = [t["head"] for t in words]
        assert is_tree(heads)
        # UD punctuation (UPOS PUNCT) is hidden: no word depends on a punctuation token
        punct = {t["id"] for t in words if t["upos"] == "PUNCT"}
        assert not punct & set(heads)


def _udeval(gold: Path, pred: Path) -> dict[str, float]:
    out = subprocess.run(["udeval", "-v", str(gold), str(pred)], capture_output=True, text=True, check=True).stdout
    scores = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if cells[0] in ("UAS", "LAS"):
            scores[cells[0]] = float(cells[3])  # F1; tokenisation is identical so P = R = F1
    return scores


def test_keep_punct_matches_the_conll18_scorer(ewt_dir: Path, tmp_path: Path) -> None:
    """With --keep-punct, UAS and LAS equal those of UD's own scorer (udeval) to 0.01."""
    gold = tmp_path / "gold.conllu"
    blocks = (ewt_dir / "en_ewt-ud-dev.conllu").read_text(encoding="utf-8").split("\n\n")[:600]
    gold.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    parsed = run(["parse", "--model", "right-branching", "--input-format", "conllu", "--quiet", str(gold)])
    # give the prediction the gold labels (with subtypes) so LAS is non-trivial and label matching is exercised
    gold_sents = conllu.parse(gold.read_text(encoding="utf-8"))
    pred_sents = conllu.parse(parsed.stdout)
    for g, p in zip(gold_sents, pred_sents):
        for gt, pt in zip(g, p):
            if isinstance(pt["id"], int) and pt["head"] != 0 and pt["id"] % 3:
                pt["deprel"] = gt["deprel"]
    pred = tmp_path / "pred.conllu"
    pred.write_text("".join(s.serialize() for s in pred_sents), encoding="utf-8")

    scored = run(["eval", "--gold", str(gold), "--pred", str(pred), "--keep-punct", "--json"])
    assert scored.exit_code == 0, scored.stderr
    ours = json.loads(scored.stdout)
    reference = _udeval(gold, pred)
    assert ours["sentences"] == 600
    assert abs(ours["metrics"]["dda"] - reference["UAS"]) < 0.01
    assert abs(ours["metrics"]["las"] - reference["LAS"]) < 0.01
    assert 10 < ours["metrics"]["las"] < ours["metrics"]["dda"] < 60

    # the default protocol removes punctuation (UPOS PUNCT) before scoring: fewer tokens, different DDA
    default = json.loads(run(["eval", "--gold", str(gold), "--pred", str(pred), "--json"]).stdout)
    assert default["dependency"]["tokens"] < ours["dependency"]["tokens"]


@pytest.mark.parametrize(
    "args, stdin, message",
    [
        (["parse", "--model", "no-such-model", "-"], "a b\n", "unknown model 'no-such-model'"),
        (["parse", "--model", "right-branching", "-"], "", "<stdin>: no sentences"),
        (["parse", "--model", "right-branching", "-"], b"good line\nbad \xff byte\n", "<stdin>:2: not valid UTF-8"),
        (["parse", "--model", "right-branching", "--input-format", "conllu", "-"], "1\tx\t_\n\n", "<stdin>:1:"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, stdin, message) -> None:
    result = CliRunner().invoke(cli, args, input=stdin)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr


def test_run_dir_without_config_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["parse", "--model", str(tmp_path), "-"], input="a b\n")
    assert result.exit_code == 2 and "not a run directory" in result.stderr


def test_full_ud_writes_no_enhanced_graph_of_the_input(ewt_dir: Path, tmp_path: Path) -> None:
    """DEPS and empty nodes are the gold's enhanced graph, which no model predicts: --full-ud leaves them out
    (DEPS '_'), keeping comments and multiword tokens, and still passes the UD validator."""
    blocks = (ewt_dir / "en_ewt-ud-dev.conllu").read_text(encoding="utf-8").split("\n\n")
    chosen = [b for b in blocks if re.search(r"^\d+\.\d+\t", b, re.M)][:3] + blocks[:20]
    gold = tmp_path / "gold.conllu"
    gold.write_text("\n\n".join(chosen) + "\n\n", encoding="utf-8")
    assert any(line.split("\t")[8] != "_" for line in gold.read_text().splitlines() if line.count("\t") == 9)
    result = run(["parse", "--model", "right-branching", "--input-format", "conllu", "--full-ud", "--quiet", str(gold)])
    assert result.exit_code == 0, result.stderr
    rows = [line.split("\t") for line in result.stdout.splitlines() if line and not line.startswith("#")]
    assert rows and all(r[8] == "_" for r in rows)
    assert not any(re.fullmatch(r"\d+\.\d+", r[0]) for r in rows)
    assert any(re.fullmatch(r"\d+-\d+", r[0]) for r in rows)
    pred = tmp_path / "pred.conllu"
    pred.write_text(result.stdout, encoding="utf-8")
    check = udvalidate(pred)
    assert check.returncode == 0, check.stdout + check.stderr
