"""The SuPar-style API: docs/api.md's example run verbatim, the tokenised-or-not refusal, the sentence protocol,
pretty-printed trees in word order, and arguments of the wrong type refused in one line naming the parameter."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import depinduce
from depinduce import Parser
from depinduce.api.words import python_message
from depinduce.errors import DepinduceError, ResourceError, UsageError
from training_support import REPO

SENTENCE = ["I", "saw", "Sarah", "with", "a", "telescope", "."]


def _example() -> str:
    page = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    section = page.split("## As in SuPar", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S)[1]


def test_the_documented_supar_style_example_runs_verbatim(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _example()], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert "HeadProb=" in (tmp_path / "pred.conllu").read_text(encoding="utf-8")
    # the tree prints in word order
    tree_lines = [line for line in done.stdout.splitlines() if "telescope" in line and "Sarah" in line]
    assert tree_lines and [w for w in tree_lines[-1].split()] == SENTENCE


def test_a_list_of_space_free_strings_is_refused_unless_tokenized_says_which() -> None:
    parser = Parser.load("right-branching")
    for call in (lambda: list(parser.parse(SENTENCE)), lambda: parser.predict(SENTENCE)):
        with pytest.raises(UsageError, match=r"tokenized=True \(one sentence\) or tokenized=False"):
            call()
    assert len(parser.predict(SENTENCE, tokenized=True)) == 1
    assert len(parser.predict(SENTENCE, tokenized=False)) == 7
    assert len(parser.predict(["I saw Sarah .", "Hi ."])) == 2  # strings with spaces are sentences


def test_parsed_sentences_are_sequences_of_tokens(tmp_path: Path) -> None:
    parsed = Parser.load("right-branching").predict([SENTENCE], probs=True)[0]
    assert len(parsed) == 7 and [t.form for t in parsed] == SENTENCE and parsed[2].head == 4
    assert parsed.to_dict()["head_probs"][0] == [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert parsed.tree.leaves() == SENTENCE and parsed.tree.label() == "X"
    assert parsed._repr_svg_().startswith("<svg")
    assert parsed.to_brackets() == "(I (saw (Sarah (with (a telescope)))) .)"  # the tree itself is unchanged


def test_to_dataframe_without_pandas_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    parsed = Parser.load("right-branching").predict(["a b"])
    with pytest.raises(ResourceError, match=r"^to_dataframe\(\) needs pandas, which is not installed"):
        parsed.to_dataframe()


def test_predictions_save_and_evaluate_as_the_cli(tmp_path: Path) -> None:
    parser = Parser.load("right-branching")
    gold = tmp_path / "gold.conllu"
    parser.predict(["The cat sat on the mat .", "Dogs bark ."]).save(gold)
    with pytest.raises(DepinduceError, match=r"already exists \(use force=True to overwrite it\)"):
        parser.predict(["x y"]).save(gold)
    assert parser.evaluate(gold).metrics["uda"] == 100.0
    assert Parser.load("left-branching").evaluate(gold).metrics["uda"] < 100.0


@pytest.mark.parametrize("call, message", [
    (lambda: depinduce.load(5), "name_or_run_dir must be a str, os.PathLike or None, not int"),
    (lambda: list(Parser.load("right-branching").parse(None)), "inputs must be a str, a list of str, a tuple of "
                                                               "str, a TokenList, a Sentence or an iterable, not None"),
    (lambda: depinduce.evaluate(None, None), "gold must be a str, os.PathLike or an iterable, not None"),
    (lambda: depinduce.train(data=5), "data must be a str, os.PathLike or None, not int"),
    (lambda: Parser.load("right-branching").predict(["a b"], batch_size="4"), "batch_size must be an int, not str"),
])
def test_wrong_argument_types_are_one_usage_line(call, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        call()


def test_heads_that_are_strings_are_refused() -> None:
    from depinduce.structures.sentence import Sentence

    good = Sentence(words=["a", "b"], heads=[2, 0])
    with pytest.raises(UsageError, match=r"gold: item 1: heads must be a list of integers \(0 = root\), not '2'"):
        depinduce.evaluate([Sentence(words=["a", "b"], heads=["2", "0"])], [good])
    with pytest.raises(UsageError, match="parsed: item 1: heads must be"):
        depinduce.write([Sentence(words=["a", "b"], heads=["2", "0"])], sys.stderr)


def test_errors_speak_python_from_python_and_the_cli_from_the_cli() -> None:
    with pytest.raises(UsageError, match=r"^probs=True writes to fmt='conllu' or fmt='jsonl', not brackets$"):
        list(Parser.load("right-branching").parse(["a b"], probs=True, fmt="brackets"))
    assert python_message("--set lr=fast: not a number") == "settings=['lr=fast']: not a number"
    assert python_message("choose one with --decoder") == "choose one with decoder=NAME"
    cli = subprocess.run([sys.executable, "-m", "depinduce", "parse", "--model", "right-branching", "--probs",
                          "--format", "brackets"], input="a b\n", capture_output=True, text=True)
    assert cli.returncode == 2
    assert cli.stderr.strip() == "--probs writes to --format conllu or --format jsonl, not brackets"


def test_every_command_has_a_python_face() -> None:
    listing = depinduce.list_models()
    names = {row["name"]: row for row in listing["backends"]}
    assert names["udgn"]["head_probs"] == "scores" and names["cpcfg"]["head_probs"] == "none"
    assert names["right-branching"]["head_probs"] == "decoded"
    for face in ("preprocess", "perplexity", "list_runs", "convert", "evaluate", "train", "load", "analyze_heads",
                 "analyze_channels", "report_runs"):
        assert callable(getattr(depinduce, face))
    with pytest.raises(UsageError, match="kind: expected one of ptb, ud, text"):
        depinduce.preprocess("wiki")
