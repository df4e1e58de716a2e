"""``depinduce convert``: any gold (CoNLL-U with its comments, multiword tokens, empty nodes and enhanced graph,
CoNLL-X, PTB trees) as the MaltEval-safe CoNLL-U ``parse`` writes, scored by ``eval`` exactly as the original —
and by the real MaltEval jar where one is at hand."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

import depinduce
from depinduce.cli.main import cli
from depinduce.io import read_sentences
from cli_support import ok
from malteval_reader import MaltEvalError, malteval, read_malteval, require_malteval


def scores(gold: Path, pred: Path, *extra: str) -> dict:
    """``eval --json`` without the file names, which are all that may differ between two golds."""
    document = json.loads(ok(["eval", "--gold", str(gold), "--pred", str(pred), "--json", *extra]))
    document.pop("gold")
    return document


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def without_comments(text: str) -> str:
    """The README's old recipe, ``grep -v '^#'``."""
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#"))


@pytest.fixture(scope="module")
def german(german_dev: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 200 sentences of UD German GSD dev: multiword tokens (zum = zu dem) and comments."""
    blocks = german_dev.read_text(encoding="utf-8").split("\n\n")[:200]
    path = tmp_path_factory.mktemp("de") / "de_dev200.conllu"
    write(path, "\n\n".join(blocks) + "\n\n")
    assert re.search(r"^\d+-\d+\t", path.read_text(encoding="utf-8"), re.M)
    return path


def assert_malteval_safe(text: str) -> None:
    read_malteval(text)
    for line in filter(None, text.splitlines()):
        cols = line.split("\t")
        assert len(cols) == 10 and cols[8] == "_", line


# ------------------------------------------------------------------------------------------- real treebanks


def test_ud_gold_with_multiword_tokens_converts_and_scores_identically(german: Path, tmp_path: Path) -> None:
    with pytest.raises(MaltEvalError):  # what the old recipe gave MaltEval: multiword lines, HEAD '_'
        read_malteval(without_comments(german.read_text(encoding="utf-8")))
    converted = write(tmp_path / "gold.conllu", ok(["convert", str(german)]))
    assert_malteval_safe(converted.read_text(encoding="utf-8"))
    pred = write(tmp_path / "rb.conllu", ok(["parse", "--model", "right-branching", "--input-format", "conllu",
                                             "--quiet", str(german)]))
    assert_malteval_safe(pred.read_text(encoding="utf-8"))
    for extra in ((), ("--keep-punct",)):
        assert scores(converted, pred, *extra) == scores(german, pred, *extra)
    # the syntactic words, their heads, labels and tags are the gold's
    original, written = read_sentences(german), read_sentences(converted)
    assert [(s.words, s.heads, s.deprels, s.upos, s.xpos) for s in written] == [
        (s.words, s.heads, s.deprels, s.upos, s.xpos) for s in original]


@pytest.mark.slow
def test_ptb_gold_keeps_the_word_tag_filter_without_its_comment(ptb_sample: Path, tmp_path: Path) -> None:
    gold = ptb_sample / "test.conllu"
    stripped = write(tmp_path / "stripped.conllu", without_comments(gold.read_text(encoding="utf-8")))
    converted = write(tmp_path / "gold.conllu", ok(["convert", str(gold)]))
    assert_malteval_safe(converted.read_text(encoding="utf-8"))
    for model in ("right-branching", "left-branching"):
        pred = write(tmp_path / f"{model}.conllu", ok(["parse", "--model", model, "--input-format", "conllu",
                                                         "--quiet", str(gold)]))
        assert_malteval_safe(pred.read_text(encoding="utf-8"))
        for extra in ((), ("--keep-punct",)):
            assert scores(converted, pred, *extra) == scores(gold, pred, *extra)
        assert scores(converted, pred)["tokens"] == 13812
        # without `# punct_rule = ptb` the mapped UPOS chose the UD rule: $ and # were scored as words
        assert scores(stripped, pred)["tokens"] == 14024
    rows = [line.split("\t") for line in converted.read_text(encoding="utf-8").splitlines() if line]
    assert {(r[1], r[3], r[4]) for r in rows if r[1] in ("$", ",")} == {("$", "$", "$"), (",", ",", ",")}


def test_ptb_trees_are_converted_by_the_head_rules(nltk_data: Path, ptb_sample: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(nltk_data / "corpora" / "treebank.zip") as archive:
        mrg = write(tmp_path / "wsj_0199.mrg", archive.read("treebank/combined/wsj_0199.mrg").decode("utf-8"))
    out = ok(["convert", str(mrg)])
    converted = read_sentences(write(tmp_path / "0199.conllu", out))
    expected = [s for s in read_sentences(ptb_sample / "test.conllu") if s.sent_id.startswith("wsj_0199.mrg:")]
    assert [(s.words, s.heads, s.xpos) for s in converted] == [(s.words, s.heads, s.xpos) for s in expected]
    rows = [line.split("\t") for line in out.splitlines() if line]
    assert all(r[3] == r[4] for r in rows)  # Penn2Malt's two PTB tag columns: the PTB rule survives


# ------------------------------------------------------------------------------------------- small inputs

UD_FULL = (
    "# sent_id = a\n# text = Im Haus, sagte er.\n"
    "1-2\tIm\t_\t_\t_\t_\t_\t_\t_\t_\n"
    "1\tIn\tin\tADP\tAPPR\t_\t3\tcase\t3:case\t_\n"
    "2\tdem\tder\tDET\tART\t_\t3\tdet\t3:det\t_\n"
    "3\tHaus\tHaus\tNOUN\tNN\t_\t5\tobl\t5:obl\tSpaceAfter=No\n"
    "4\t,\t,\tPUNCT\t$,\t_\t5\tpunct\t5:punct\t_\n"
    "5\tsagte\tsagen\tVERB\tVVFIN\t_\t0\troot\t0:root\t_\n"
    "5.1\tsagte\tsagen\tVERB\tVVFIN\t_\t_\t_\t5:conj\t_\n"
    "6\ter\ter\tPRON\tPPER\t_\t5\tnsubj\t5:nsubj|5.1:nsubj\tSpaceAfter=No\n"
    "7\t.\t.\tPUNCT\t$.\t_\t5\tpunct\t5:punct\t_\n\n"
)

CONLLX = (
    "1\tThe\tthe\tDT\tDT\t_\t2\tNMOD\t2\tNMOD\n"
    "2\tdog\tdog\tNN\tNN\t_\t3\tSBJ\t3\tSBJ\n"
    "3\tbarks\tbark\tVB\tVBZ\t_\t0\tROOT\t0\tROOT\n"
    "4\t$\t$\t$\t$\t_\t3\tP\t3\tP\n"
    "5\t.\t.\t.\t.\t_\t3\tP\t3\tP\n\n"
)


def test_every_ud_extra_goes_and_stdin_works(tmp_path: Path) -> None:
    out = ok(["convert", "-"], UD_FULL)
    assert_malteval_safe(out)
    assert [line.split("\t")[:8] for line in out.splitlines() if line] == [
        ["1", "In", "in", "ADP", "APPR", "_", "3", "case"], ["2", "dem", "der", "DET", "ART", "_", "3", "det"],
        ["3", "Haus", "Haus", "NOUN", "NN", "_", "5", "obl"], ["4", ",", ",", "PUNCT", "$,", "_", "5", "punct"],
        ["5", "sagte", "sagen", "VERB", "VVFIN", "_", "0", "root"], ["6", "er", "er", "PRON", "PPER", "_", "5", "nsubj"],
        ["7", ".", ".", "PUNCT", "$.", "_", "5", "punct"]]
    gold, converted = write(tmp_path / "ud.conllu", UD_FULL), write(tmp_path / "c.conllu", out)
    pred = write(tmp_path / "p.conllu", ok(["parse", "--model", "left-branching", "--input-format", "conllu",
                                           "--quiet", str(gold)]))
    assert scores(converted, pred) == scores(gold, pred)


def test_conllx_with_phead_keeps_the_ptb_rule(tmp_path: Path) -> None:
    gold = write(tmp_path / "g.conllx", CONLLX)
    out = ok(["convert", str(gold)])
    assert_malteval_safe(out)
    assert [line.split("\t")[3:5] for line in out.splitlines() if line] == [
        ["DT", "DT"], ["NN", "NN"], ["VBZ", "VBZ"], ["$", "$"], [".", "."]]
    converted = write(tmp_path / "c.conllu", out)
    pred = write(tmp_path / "p.conllu", ok(["parse", "--model", "right-branching", "--input-format", "conllu",
                                           "--quiet", str(gold)]))
    assert scores(converted, pred) == scores(gold, pred)
    assert scores(converted, pred)["tokens"] == 3  # $ and . are PTB punctuation tags


def test_python_api_writes_what_the_command_prints(tmp_path: Path) -> None:
    gold = write(tmp_path / "g.conllx", CONLLX)
    target = tmp_path / "api.conllu"
    assert depinduce.convert(gold, target) == 1
    assert target.read_text(encoding="utf-8") == ok(["convert", "--from", "conllx", str(gold)])


@pytest.mark.parametrize(
    "text, message",
    [
        ("1\tHello\t_\t_\t_\t_\t_\t_\t_\t_\n\n", "<stdin>:1: sentence 1 has no heads"),
        ("(the (old man))\n", "<stdin>:1: unlabelled trees"),
        ("1\tHello\t_\t_\t_\t_\t3\tdep\t_\t_\n\n", "<stdin>:1:"),
    ],
)
def test_bad_gold_is_one_line_and_no_output(text: str, message: str) -> None:
    result = CliRunner().invoke(cli, ["convert", "-"], input=text)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith(message), result.stderr


# ------------------------------------------------------------------------------------------- the real MaltEval


def test_real_malteval_reads_both_and_agrees_with_keep_punct(german_dev: Path, tmp_path: Path) -> None:
    require_malteval()
    gold = write(tmp_path / "gold.conllu", ok(["convert", str(german_dev)]))
    pred = write(tmp_path / "rb.conllu", ok(["parse", "--model", "right-branching", "--input-format", "conllu",
                                             "--quiet", str(german_dev)]))
    uas, tokens = malteval(gold, pred, "--Metric", "UAS")
    ours = scores(german_dev, pred, "--keep-punct")["dependency"]["dda"]
    assert tokens == ours["total"]
    assert round(uas * tokens) == ours["correct"]
    # the punctuation parse hid (DEPREL punct) is what --ExcludeDeprels punct leaves out
    hidden = sum(line.split("\t")[7] == "punct" for line in pred.read_text(encoding="utf-8").splitlines() if line)
    assert malteval(gold, pred, "--Metric", "UAS", "--ExcludeDeprels", "punct")[1] == tokens - hidden
