"""The Python API (``depinduce.load / evaluate / train``): README's example runs as written, results are the
CLI's byte for byte on the PTB sample's test split, errors are the CLI's one-line messages as exceptions, and
nothing is printed to stdout."""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import depinduce
from depinduce.api.words import python_message
from depinduce.cli.main import cli
from depinduce.io import read_sentences
from training_support import make_data, make_ud_data, one_thread, tiny_plugin  # noqa: F401 (fixtures)

REPO = Path(__file__).resolve().parents[1]


def run_cli(*args: str, stdin: str | None = None):
    return CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)


def cli_stdout(*args: str) -> str:
    result = run_cli(*args)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def readme_python_example() -> str:
    """The first ```python block of the API page, docs/api.md (DEPINDUCE_README names another file)."""
    path = Path(os.environ.get("DEPINDUCE_README") or REPO / "docs" / "api.md")
    text = path.read_text(encoding="utf-8")
    block = re.search(r"^```python\n(.*?)^```", text, re.S | re.M)
    if not block:
        pytest.fail(f"{path} has no ```python block (the documented API example)")
    return block.group(1)


@pytest.fixture(scope="module")
def ptb(nltk_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The PTB sample preprocessed as a user would (skips with a reason when ../shared/nltk_data is absent)."""
    out = tmp_path_factory.mktemp("api") / "ptb"
    cli_stdout("preprocess", "ptb", "--sample-only", "--out", str(out), "--quiet")
    return out


def written(parsed, fmt: str = "conllu") -> str:
    stream = io.StringIO()
    depinduce.write(parsed, stream, fmt)
    return stream.getvalue()


# ------------------------------------------------------------------------------------------------ README


def test_readme_python_example_runs_verbatim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)  # no ./runs here: load() and its example behave as on a fresh checkout
    exec(compile(readme_python_example(), "docs/api.md", "exec"), {"__name__": "readme"})
    assert "DDA (UAS)" in capsys.readouterr().out  # the example prints its report


def test_import_is_cheap_and_lists_the_api() -> None:
    code = ("import sys, depinduce; assert 'torch' not in sys.modules; depinduce.evaluate; "
            "assert 'torch' not in sys.modules; print(sorted(depinduce.__all__))")
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    for name in ("load", "evaluate", "train", "DepinduceError"):
        assert name in depinduce.__all__ and getattr(depinduce, name) is not None


# ------------------------------------------------------------------------------------------------ parse


@pytest.mark.parametrize("model", ["right-branching", "left-branching", "random", "default"])
def test_parse_matches_the_cli_on_the_test_split(ptb: Path, model: str, capsys) -> None:
    test = ptb / "test.conllu"
    expected = cli_stdout("parse", "--model", model, "--input-format", "conllu", "--quiet", str(test))
    capsys.readouterr()
    parser = depinduce.load(model)
    from_file = written(parser.parse_file(test, input_format="conllu"))
    # sentence objects in: the first two batches (the same batches as the CLI's, so the same numbers)
    parser = depinduce.load(model)  # afresh, as each CLI run loads it: random's generator starts over
    from_sentences = [s.to_conllu() for s in parser.parse(read_sentences(test, fmt="conllu")[:64])]
    assert capsys.readouterr().out == ""
    assert from_file == expected
    assert from_sentences == [block + "\n\n" for block in expected.split("\n\n")[:64]]


def test_parse_text_tokens_and_brackets_match_the_cli(ptb: Path) -> None:
    lines = (ptb / "test.txt").read_text(encoding="utf-8").splitlines()[:60]
    sample = ptb / "sample.txt"
    sample.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for model in ("right-branching", "default"):
        parser = depinduce.load(model)
        expected = cli_stdout("parse", "--model", model, "--quiet", str(sample))
        assert "".join(s.to_conllu() for s in parser.parse(lines)) == expected
        assert "".join(s.to_conllu() for s in parser.parse([line.split() for line in lines])) == cli_stdout(
            "parse", "--model", model, "--tokenized", "--quiet", str(sample))
        full = cli_stdout("parse", "--model", model, "--full-ud", "--quiet", str(sample))
        assert written(parser.parse(lines), "conllu-ud") == full
        brackets = cli_stdout("parse", "--model", model, "--format", "brackets", "--quiet", str(sample))
        assert "".join(s.to_brackets() + "\n" for s in parser.parse(lines)) == brackets


def test_parse_streams_and_leaves_its_input_alone(ptb: Path) -> None:
    parser = depinduce.load("right-branching")
    gold = read_sentences(ptb / "test.conllu", fmt="conllu")[:5]
    heads = [list(s.heads) for s in gold]

    def endless():
        while True:
            yield "Dogs bark ."

    stream = parser.parse(endless(), batch_size=2)
    first = next(stream)
    assert (first.words, first.heads, first.relations) == (["Dogs", "bark", "."], [2, 0, 2], ["dep", "root", "punct"])
    assert first.to_brackets() == "(Dogs bark .)"
    list(parser.parse(gold))
    assert [s.heads for s in gold] == heads


# ---------------------------------------------------------------------------- every trained backend, as the CLI

# Tiny networks (the sizes each backend's own tests use), trained one epoch on a slice of the PTB sample's training
# text: enough for real, non-uniform scores; the point is that the API and the CLI give the same bytes.
TINY_BACKENDS = {
    "structformer": {"hidden_size": 16, "n_layers": 2, "n_heads": 4, "ff_size": 32, "conv_size": 3,
                     "max_positions": 256},
    "udgn": {"hidden_size": 16, "n_layers": 2, "n_heads": 4, "head_size": 6, "parser_layers": 2,
             "parser_hidden_size": 8},
    "prpn": {"emb_size": 12, "hidden_size": 16, "n_layers": 2, "n_slots": 4, "lookback": 2},
    "probformer": {"d": 8, "n_channels": 3, "n_iter": 2, "rank": 4, "distance_threshold": 1},
}


def _head(path: Path, target: Path, lines: int | None = None, blocks: int | None = None) -> None:
    text = path.read_text(encoding="utf-8")
    if lines is not None:
        text = "".join(line + "\n" for line in text.splitlines()[:lines])
    if blocks is not None:
        text = "".join(block.strip("\n") + "\n\n" for block in text.split("\n\n")[:blocks] if block.strip())
    target.write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def ptb_slice(ptb: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The preprocessed PTB sample with its training text cut to 200 sentences and dev to 30."""
    out = tmp_path_factory.mktemp("api-slice") / "ptb"
    out.mkdir()
    for name in ("vocab.json", "manifest.json"):
        (out / name).write_bytes((ptb / name).read_bytes())
    _head(ptb / "train.txt", out / "train.txt", lines=200)
    _head(ptb / "dev.txt", out / "dev.txt", lines=30)
    _head(ptb / "dev.conllu", out / "dev.conllu", blocks=30)
    _head(ptb / "dev.trees", out / "dev.trees", lines=30)
    return out


@pytest.fixture(scope="module")
def trained_runs(ptb_slice: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One tiny run per unsupervised backend, trained through ``depinduce.train`` with its CPU recipe."""
    import torch

    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("api-runs")
    return {name: depinduce.train(model=name, data=ptb_slice, out=folder / name, quiet=True, threads=1, seed=1,
                                  epochs=1, batch_tokens=400, eval_every=0, max_time=None, model_config=config)
            for name, config in TINY_BACKENDS.items()}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TINY_BACKENDS))
def test_trained_backends_parse_and_score_as_the_cli(ptb: Path, trained_runs: dict[str, Path], tmp_path: Path,
                                                     name: str, capsys) -> None:
    run = trained_runs[name]
    test = ptb / "test.conllu"
    parser = depinduce.load(run)
    assert parser.name == name
    formats = ("brackets",) if name == "prpn" else ("conllu", "brackets")  # PRPN induces constituency only
    for fmt in formats:
        expected = cli_stdout("parse", "--model", str(run), "--input-format", "conllu", "--format", fmt, "--quiet",
                              str(test))
        assert written(parser.parse_file(test, input_format="conllu"), fmt) == expected, fmt
        pred = tmp_path / f"pred.{fmt}"
        pred.write_text(expected, encoding="utf-8")
        gold = test if fmt == "conllu" else ptb / "test.trees"
        result = depinduce.evaluate(gold, pred)
        assert json.loads(cli_stdout("eval", "--gold", str(gold), "--pred", str(pred), "--json")) == result.as_dict()
    if name != "prpn":  # another decoder, from text lines, in the model's own batches
        lines = (ptb / "test.txt").read_text(encoding="utf-8").splitlines()[:70]
        sample = tmp_path / "sample.txt"
        sample.write_text("\n".join(lines) + "\n", encoding="utf-8")
        expected = cli_stdout("parse", "--model", str(run), "--decoder", "eisner", "--batch-size", "16", "--quiet",
                              str(sample))
        assert "".join(s.to_conllu() for s in parser.parse(lines, decoder="eisner", batch_size=16)) == expected
        scores = {s.to_conllu() for s in parser.parse(lines[:5])}
        assert len(scores) == 5  # real parses, one per sentence
    assert capsys.readouterr().out == ""


@pytest.fixture(scope="module")
def rngtr_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny RNGTr (a refining, supervised backend that reads UPOS) trained through the API: (data, run)."""
    import torch

    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("api-rngtr")
    data = make_ud_data(folder / "data", n_train=80, n_dev=20)
    run = depinduce.train(model="rngtr", data=data, out=folder / "run", quiet=True, threads=1, epochs=2,
                          batch_tokens=300, lr=1e-2, warmup_steps=5, max_time=None,
                          model_config={"hidden_size": 32, "n_layers": 2, "n_heads": 4, "ff_size": 64,
                                        "arc_mlp_size": 32, "label_mlp_size": 16, "iterations": 2})
    return data, run


def test_rngtr_parses_and_refines_as_the_cli(rngtr_run: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    data, run = rngtr_run
    dev = data / "dev.conllu"
    parser = depinduce.load(run)
    expected = cli_stdout("parse", "--model", str(run), "--input-format", "conllu", "--quiet", str(dev))
    assert written(parser.parse_file(dev, input_format="conllu")) == expected
    assert written(parser.parse(read_sentences(dev, fmt="conllu"), init="synTr")) == expected
    assert written(depinduce.load(run, iterations=1).parse_file(dev, input_format="conllu")) == cli_stdout(
        "parse", "--model", str(run), "--input-format", "conllu", "--iterations", "1", "--quiet", str(dev))
    # refining another parser's output: a file (as --init FILE) or that parser's sentences in memory
    start = list(depinduce.load("right-branching").parse_file(dev, input_format="conllu"))
    init = tmp_path / "init.conllu"
    depinduce.write(start, init)
    refined = cli_stdout("parse", "--model", str(run), "--input-format", "conllu", "--init", str(init), "--quiet",
                         str(dev))
    assert refined != expected  # the initial graph reaches the model
    assert written(parser.parse_file(dev, input_format="conllu", init=init)) == refined
    assert written(parser.parse(read_sentences(dev, fmt="conllu"), init=start, batch_size=7)) == refined
    assert written(parser.parse_file(dev, input_format="conllu", init=start)) == refined
    assert written(parser.parse(read_sentences(dev, fmt="conllu"), init=init)) == refined
    # the graphs must be for these sentences, and the model must read tags
    with pytest.raises(depinduce.InputError, match=r"<init>: ends before input sentence 20"):
        list(parser.parse(read_sentences(dev, fmt="conllu"), init=start[:19]))
    with pytest.raises(depinduce.InputError, match=r"<init>: holds more sentences than the input's 19"):
        list(parser.parse(read_sentences(dev, fmt="conllu")[:19], init=start))
    with pytest.raises(depinduce.InputError, match=r"<init>: sentence 2 differs from the input at token 1"):
        list(parser.parse(read_sentences(dev, fmt="conllu")[:3], init=[start[0], start[2], start[1]]))
    message = cli_error("parse", "--model", str(run), str(data / "dev.txt"))
    with pytest.raises(depinduce.UsageError) as raised:
        list(parser.parse(["Dogs bark ."]))
    assert str(raised.value) == python_message(message)  # the CLI's line, in the API's parameter names
    with pytest.raises(depinduce.ModelError) as raised:
        depinduce.load("right-branching").parse_file(dev, input_format="conllu", init=init)
    assert str(raised.value) == python_message(cli_error("parse", "--model", "right-branching", "--input-format",
                                                         "conllu", "--init", str(init), str(dev)))
    assert capsys.readouterr().out == ""


# ------------------------------------------------------------------------------------------------ evaluate


@pytest.mark.parametrize("options", [(), ("--keep-punct",), ("--max-length", "10")])
def test_evaluate_matches_the_cli(ptb: Path, tmp_path: Path, options: tuple[str, ...], capsys) -> None:
    gold = ptb / "test.conllu"
    parser = depinduce.load("right-branching")
    pred = tmp_path / "pred.conllu"
    depinduce.write(parser.parse_file(gold, input_format="conllu"), pred)
    kwargs = {"keep_punct": "--keep-punct" in options, "max_length": 10 if "--max-length" in options else None}
    result = depinduce.evaluate(gold, pred, **kwargs)
    assert capsys.readouterr().out == ""
    args = ("eval", "--gold", str(gold), "--pred", str(pred), *options)
    assert json.loads(cli_stdout(*args, "--json")) == result.as_dict()
    assert cli_stdout(*args) == result.report()
    assert cli_stdout(*args, "--by-length") == result.report(by_length=True)
    # sentences in memory: the same numbers as the files
    in_memory = depinduce.evaluate(read_sentences(gold), list(parser.parse_file(gold, input_format="conllu")), **kwargs)
    assert in_memory.metrics == result.metrics
    assert {k: v for k, v in in_memory.as_dict().items() if k not in ("gold", "pred")} == {
        k: v for k, v in result.as_dict().items() if k not in ("gold", "pred")}


def test_evaluate_trees_matches_the_cli(ptb: Path, tmp_path: Path) -> None:
    pred = tmp_path / "pred.trees"
    depinduce.write(depinduce.load("right-branching").parse_file(ptb / "test.conllu", input_format="conllu"), pred,
                    "brackets")
    result = depinduce.evaluate(ptb / "test.trees", pred)
    assert json.loads(cli_stdout("eval", "--gold", str(ptb / "test.trees"), "--pred", str(pred), "--json")) == \
        result.as_dict()
    assert round(result.metrics["uf1_sentence"], 1) == 38.9  # docs/evaluation-protocol.md's anchor


# ------------------------------------------------------------------------------------------------ errors


def cli_error(*args: str) -> str:
    result = run_cli(*args)
    assert result.exit_code == 2 and result.stdout == ""
    return result.stderr.rstrip("\n")


def test_errors_are_the_cli_messages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    missing = str(tmp_path / "missing.conllu")
    present = tmp_path / "one.conllu"
    present.write_text("1\tDogs\t_\tNOUN\t_\t_\t2\tdep\t_\t_\n2\tbark\t_\tVERB\t_\t_\t0\troot\t_\t_\n\n")
    cases = [
        (lambda: depinduce.evaluate(missing, present), ("eval", "--gold", missing, "--pred", str(present))),
        (lambda: depinduce.evaluate(present, missing), ("eval", "--gold", str(present), "--pred", missing)),
        (lambda: depinduce.load("no-such-model"), ("parse", "--model", "no-such-model", str(present))),
        (lambda: depinduce.load("right-branching").parse_file(missing), ("parse", "--model", "right-branching",
                                                                         missing)),
        (lambda: depinduce.load("right-branching").parse("x", decoder="udgn-tree"),
         ("parse", "--model", "right-branching", "--decoder", "udgn-tree", str(present))),
        (lambda: depinduce.train(model="right-branching", data=tmp_path, quiet=True),
         ("train", "--model", "right-branching", "--data", str(tmp_path), "--quiet")),
    ]
    for call, args in cases:
        expected = cli_error(*args)
        with pytest.raises(depinduce.DepinduceError) as raised:
            call()
        assert str(raised.value) == python_message(expected)
    assert capsys.readouterr().out == ""


def test_bad_items_are_one_line_errors() -> None:
    parser = depinduce.load("right-branching")
    for bad, message in (([["Dogs", "bark loudly"]], "token 2 ('bark loudly') is empty or holds a space"),
                         (["  "], "item 1 is blank"), ([3], "item 1 is a int")):
        with pytest.raises(depinduce.DepinduceError, match=re.escape(message)):
            list(parser.parse(bad))


# ------------------------------------------------------------------------------------------------ train


def test_train_returns_the_run_directory_and_prints_nothing(tmp_path: Path, tiny_plugin: Path, one_thread,
                                                            capsys) -> None:
    data = make_data(tmp_path / "data", n_train=40, n_dev=8)
    run = depinduce.train(model="tiny-mlm", data=data, out=tmp_path / "run", quiet=True, epochs=1, lr=1e-3,
                          model_config={"hidden": 8})
    assert run == tmp_path / "run" and (run / "model.pt").is_file()
    config = (run / "config.yaml").read_text()
    assert "hidden: 8" in config and "lr: 0.001" in config
    parsed = list(depinduce.load(run).parse(["a b c"], decoder="eisner"))
    assert len(parsed[0].heads) == 3
    assert capsys.readouterr().out == ""
    with pytest.raises(depinduce.DepinduceError, match="^no_such_key: unknown keyword argument, no recipe value"):
        depinduce.train(model="tiny-mlm", data=data, out=tmp_path / "run2", quiet=True, no_such_key=1)
