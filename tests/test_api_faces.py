"""Every command of the CLI called from Python (issue 49): ``preprocess``, ``analyze heads|channels``, ``report``,
``perplexity`` and ``models`` each return what the command prints, and their errors speak Python."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from click.testing import CliRunner

import depinduce
from depinduce.api.words import python_message
from depinduce.cli.main import cli
from depinduce.data.vocab import Vocab
from depinduce.errors import DepinduceError, ModelError, UsageError
from test_analyze_heads import CONLLU, _udgn_run
from training_support import make_data, one_thread, tiny_plugin  # noqa: F401 (fixtures)


def _stdout(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def test_preprocess_from_python_writes_the_commands_files(ptb_sample: Path, tmp_path: Path) -> None:
    out = tmp_path / "sample"
    manifest = depinduce.preprocess("ptb", out, sample_only=True)
    assert manifest == json.loads((out / "manifest.json").read_text())
    written = sorted(p.name for p in out.iterdir())
    assert written == sorted(p.name for p in ptb_sample.iterdir())
    for name in written:
        if name != "manifest.json":  # it names its own folder
            assert (out / name).read_bytes() == (ptb_sample / name).read_bytes(), name
    with pytest.raises(DepinduceError, match=r"force=True"):
        depinduce.preprocess("ptb", out, sample_only=True)


def test_analyze_heads_returns_what_the_command_prints(tmp_path: Path) -> None:
    gold = tmp_path / "gold.conllu"
    gold.write_text(CONLLU)
    run = _udgn_run(tmp_path / "run")
    result = depinduce.analyze_heads(run, gold, top=2)
    assert result.rows[0]["label"] == "nsubj" and len(result.rows) == 2 and result.correlation.edges == 5
    assert _stdout("analyze", "heads", "--model", str(run), "--gold", str(gold), "--labels", "2",
                   "--quiet") == result.report()
    command = json.loads(_stdout("analyze", "heads", "--model", str(run), "--gold", str(gold), "--json", "--quiet"))
    assert command == json.loads(depinduce.analyze_heads(depinduce.load(run), gold).to_json())
    csv = tmp_path / "heads.csv"
    depinduce.analyze_heads(run, gold, csv=csv)
    with pytest.raises(DepinduceError, match=r"already exists \(use force=True to overwrite it\)$"):
        depinduce.analyze_heads(run, gold, csv=csv)
    with pytest.raises(ModelError, match="has no competitive heads"):
        depinduce.analyze_heads("right-branching", gold)
    with pytest.raises(UsageError, match="^top must be at least 1, not 0$"):
        depinduce.analyze_heads(run, gold, top=0)


def _probformer_run(directory: Path) -> Path:
    """An untrained three-channel Probabilistic Transformer over the labelled gold's words."""
    from depinduce.models.probformer.config import ProbFormerConfig
    from depinduce.models.probformer.model import ProbFormer

    config = {"d": 8, "n_channels": 3, "n_iter": 2, "rank": 4, "distance_threshold": 1}
    torch.manual_seed(0)
    vocab = Vocab(["the", "cat", "which", "slept", "sat", "dogs", "bark"])
    directory.mkdir()
    vocab.save(directory / "vocab.json")
    (directory / "config.yaml").write_text(yaml.safe_dump({"model": "probformer", "model_config": config}))
    torch.save(ProbFormer(ProbFormerConfig(**config), vocab).state_dict(), directory / "model.pt")
    return directory


def test_analyze_channels_returns_what_the_command_prints(tmp_path: Path) -> None:
    gold = tmp_path / "gold.conllu"
    gold.write_text(CONLLU)
    run = _probformer_run(tmp_path / "run")
    result = depinduce.analyze_channels(run, gold, decoder="argmax")
    assert result.channels.channels == [1, 2, 3] and result.best_channel in (1, 2, 3)
    assert _stdout("analyze", "channels", "--model", str(run), "--gold", str(gold), "--decoder", "argmax",
                   "--quiet") == result.report()
    command = _stdout("analyze", "channels", "--model", str(run), "--gold", str(gold), "--json", "--quiet")
    assert json.loads(command) == json.loads(depinduce.analyze_channels(run, gold).to_json())
    with pytest.raises(ModelError, match="has no head channels to analyse"):
        depinduce.analyze_channels("right-branching", gold)


def test_report_and_perplexity_return_what_the_commands_print(tmp_path: Path, tiny_plugin: Path,
                                                               one_thread) -> None:
    data = make_data(tmp_path / "data", n_train=120, n_dev=20)
    extra = make_data(tmp_path / "extra", n_train=5, n_dev=20, seed=7)
    for suffix in ("conllu", "trees", "txt"):
        shutil.copy(extra / f"dev.{suffix}", data / f"test.{suffix}")
    run = depinduce.train(model="tiny-mlm", data=data, out=tmp_path / "run", threads=1, quiet=True, epochs=1,
                          batch_tokens=200)
    for fmt in ("table", "markdown"):
        assert depinduce.report_runs(run, fmt=fmt, warn=lambda line: None) == _stdout("report", str(run),
                                                                                      "--format", fmt)
    measured = depinduce.perplexity(run, data / "test.txt")
    assert json.loads(_stdout("perplexity", "--model", str(run), "--json", "--quiet",
                              str(data / "test.txt"))) == measured.as_dict()
    with pytest.raises(UsageError, match=r"^labels name the test files: give tests=\[FILE, \.\.\.\] with one label"):
        depinduce.report_runs(run, labels=["mine"])
    with pytest.raises(DepinduceError, match=r"^tests: .*nothing.conllu: no such file$"):
        depinduce.report_runs([run], tests=tmp_path / "nothing.conllu")


def test_list_models_is_models_json() -> None:
    assert depinduce.list_models() == json.loads(_stdout("models", "--json"))


def test_predictions_draw_their_first_ten_sentences_in_a_notebook() -> None:
    parser = depinduce.Parser.load("right-branching")
    many = parser.predict([f"word{k} runs ." for k in range(12)])
    page = many._repr_html_()
    assert page.count("<svg") == 10 and "… 2 more sentences" in page and "word9 runs" in page
    assert "word10" not in page
    assert parser.predict(["a b"])._repr_html_().count("<svg") == 1


@pytest.mark.parametrize("option, python", [
    ("--seeds and --seed exclude each other: give the seeds as --seeds 0,1,2 (or --seeds N for seeds 0..N-1)",
     "seeds and seed exclude each other: give the seeds as seeds=[0, 1, 2] (or seeds=N for seeds 0..N-1)"),
    ("--jobs runs several seeds at once: give the seeds with --seeds (0,1,2,3 or a count)",
     "jobs runs several seeds at once: give the seeds with seeds=[0, 1, 2, 3] or seeds=N"),
    ("--resume needs --out RUN_DIR: the run to continue", "resume=True needs out=RUN_DIR: the run to continue"),
    ("no model given: pass --model NAME or a recipe with a 'model' key",
     "no model given: pass model=NAME or a recipe with a 'model' key"),
    ("lm_mode continuous reads the text as one stream (add --set curriculum_start=null)",
     "lm_mode continuous reads the text as one stream (add settings=['curriculum_start=null'])"),
    ("--set lr: the prefix must be 'train.' or 'model_config.'",
     "settings key 'lr': the prefix must be 'train.' or 'model_config.'"),
    ("--device tpu: not a device name (auto, cpu, cuda or cuda:N)",
     "device='tpu': not a device name (auto, cpu, cuda or cuda:N)"),
    ("cannot parse: x (choose one with --decoder)", "cannot parse: x (choose one with decoder=NAME)"),
    ("--train-on: unknown split 'x'", "train_on: unknown split 'x'"),
    ("stopped: `depinduce train --resume --out runs/a` continues it",  # a shell command stays one
     "stopped: `depinduce train --resume --out runs/a` continues it"),
])
def test_renamed_messages_read_as_python(option: str, python: str) -> None:
    assert python_message(option) == python


def test_the_command_group_alone_keeps_its_option_names(tmp_path: Path) -> None:
    from depinduce.cli.preprocess import preprocess

    out = tmp_path / "mine"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    alone = CliRunner().invoke(preprocess, ["text", "--quiet", "--out", str(out), "-"], input="a b\n")
    assert isinstance(alone.exception, DepinduceError) and "--force" in str(alone.exception)
