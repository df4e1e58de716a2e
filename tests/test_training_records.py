"""The record a run keeps of its training: train.log (the status lines, no progress-bar fragments), the training
loss every ``train.log_every`` steps in metrics.jsonl, TensorBoard events, and one progress bar for the whole run."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from depinduce.cli.main import cli
from training_support import make_data, one_thread, tiny_plugin  # noqa: F401 (fixtures)

TRAIN = ["--model", "tiny-mlm", "--threads", "1", "--set", "epochs=2", "--set", "batch_tokens=200"]
STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ")


def _train(data: Path, out: Path, *extra: str):  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(cli, ["train", "--data", str(data), "--out", str(out), *TRAIN, *extra])
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def test_train_log_holds_the_status_lines_without_bar_fragments(tmp_path: Path, tiny_plugin: Path,
                                                                 one_thread) -> None:
    data = make_data(tmp_path / "data", n_train=150, n_dev=25)
    result = _train(data, tmp_path / "run", "--set", "log_every=2")
    log = (tmp_path / "run" / "train.log").read_text()
    assert "\r" not in log and "%|" not in log and "\x1b" not in log
    lines = log.splitlines()
    assert all(STAMP.match(line) for line in lines)
    said = [STAMP.sub("", line) for line in lines]
    # the log is what stderr showed, in order, less the bar (which stderr has around these lines)
    position = 0
    for line in said:
        position = result.stderr.index(line, position) + len(line)
    assert result.stderr.count("%|") > 0
    assert said[0].startswith("train tiny-mlm") and said[-2].startswith("finished after 12 steps")
    assert said[-1].startswith("dev (selected model, step ") and " · right-branching: DDA " in said[-1]
    assert sum(s.startswith("step ") and "train loss" in s for s in said) == 6
    # a resume appends; --force starts the log over
    resumed = CliRunner().invoke(cli, ["train", "--out", str(tmp_path / "run"), "--resume", "--data", str(data),
                                       "--threads", "1"])
    assert resumed.exit_code == 0, resumed.output
    again = (tmp_path / "run" / "train.log").read_text()
    assert again.startswith(log) and len(again) > len(log)
    _train(data, tmp_path / "run", "--force", "--quiet")  # --quiet: nothing on stderr, the log still kept
    assert "finished after 12 steps" in (tmp_path / "run" / "train.log").read_text()
    assert (tmp_path / "run" / "train.log").read_text().count("finished after") == 1


def test_training_loss_every_n_steps_in_metrics(tmp_path: Path, tiny_plugin: Path, one_thread) -> None:
    data = make_data(tmp_path / "data", n_train=150, n_dev=25)
    _train(data, tmp_path / "run", "--set", "log_every=4", "--quiet")
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    logged = [r for r in records if r.get("train_log")]
    assert [r["step"] for r in logged] == [4, 8, 12]
    assert all(r["train_loss"] > 0 and r["tokens_seen"] > 0 and r["wall_s"] > 0 for r in logged)
    evaluations = [r for r in records if not r.get("train_log")]
    assert [r["step"] for r in evaluations] == [6, 12] and all("dev_uda" in r for r in evaluations)
    # report and status read the evaluations only
    status = CliRunner().invoke(cli, ["report", str(tmp_path / "run"), "--test", str(data / "dev.conllu"),
                                      "--format", "json"])
    assert status.exit_code == 0, status.output
    bad = CliRunner().invoke(cli, ["train", "--data", str(data), "--out", str(tmp_path / "bad"), *TRAIN,
                                   "--set", "log_every=-1"])
    assert bad.exit_code == 2 and "log_every" in bad.output and "Traceback" not in bad.output


def test_the_bar_counts_the_whole_run_not_the_epoch(tmp_path: Path, tiny_plugin: Path, one_thread) -> None:
    data = make_data(tmp_path / "data", n_train=150, n_dev=25)
    result = _train(data, tmp_path / "run")
    bars = [part for line in result.stderr.splitlines() for part in line.split("\r") if "%|" in part]
    assert bars and all("step 0/12" in bar or "step 12/12" in bar or "/12" in bar for bar in bars)
    budget = _train(data, tmp_path / "timed", "--max-time", "5", "--set", "epochs=1")
    assert any("5-minute budget" in part for part in budget.stderr.split("\r"))


def test_tensorboard_events(tmp_path: Path, tiny_plugin: Path, one_thread) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    data = make_data(tmp_path / "data", n_train=150, n_dev=25)
    _train(data, tmp_path / "run", "--set", "log_every=3", "--set", "tensorboard=true", "--quiet")
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert {"train/loss", "dev/uda", "dev/ppl", "run/lr"} <= set(tags)
    assert [e.step for e in events.Scalars("dev/uda")] == [6, 12]
    assert [e.step for e in events.Scalars("train/loss")] == [3, 6, 6, 9, 12, 12]  # log_every and evaluations


def test_tensorboard_missing_is_one_line(tmp_path: Path, tiny_plugin: Path, one_thread,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # as if the package were not installed
    data = make_data(tmp_path / "data", n_train=20, n_dev=5)
    result = CliRunner().invoke(cli, ["train", "--data", str(data), "--out", str(tmp_path / "run"), *TRAIN,
                                      "--set", "tensorboard=true"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "depinduce[tensorboard]" in result.output
