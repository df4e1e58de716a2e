"""The record a run keeps of its training: train.log (the status lines, no progress-bar fragments), the training
loss every ``train.log_every`` steps in metrics.jsonl, TensorBoard events (one value per tag and step), and one
progress bar for the whole run — on a terminal; elsewhere plain complete progress lines."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from depinduce.cli.main import cli
from depinduce.training.budget_bar import ProgressLine
from training_support import make_data, one_thread, tiny_plugin  # noqa: F401 (fixtures)

TRAIN = ["--model", "tiny-mlm", "--threads", "1", "--set", "epochs=2", "--set", "batch_tokens=200"]
STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ")


def _train(data: Path, out: Path, *extra: str):  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(cli, ["train", "--data", str(data), "--out", str(out), *TRAIN, *extra])
    assert result.exit_code == 0, (result.output, result.exception)
    return result


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """stderr taken for a terminal: the bar is drawn (CliRunner's stderr is none)."""
    monkeypatch.setattr("depinduce.training.budget_bar.on_terminal", lambda: True)


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
    # stderr is no terminal here: plain complete progress lines, no bar, and none of them in the log
    assert "\r" not in result.stderr and "%|" not in result.stderr and "progress: " in result.stderr
    assert "progress: " not in log
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


def test_the_bar_counts_the_whole_run_not_the_epoch(tmp_path: Path, tiny_plugin: Path, one_thread,
                                                    terminal: None) -> None:
    data = make_data(tmp_path / "data", n_train=150, n_dev=25)
    result = _train(data, tmp_path / "run", "--set", "log_every=2")
    bars = [part for line in result.stderr.splitlines() for part in line.split("\r") if "%|" in part]
    assert bars and all("step 0/12" in bar or "step 12/12" in bar or "/12" in bar for bar in bars)
    assert "progress: " not in result.stderr
    # the bar shows the loss, so the log_every lines go to train.log alone
    assert re.search(r"(^|[\r\n])step \d+ \| train loss", result.stderr) is None
    assert len(re.findall(r":\d\d step \d+ \| train loss", (tmp_path / "run" / "train.log").read_text())) == 6
    budget = _train(data, tmp_path / "timed", "--max-time", "5", "--set", "epochs=1")
    assert any("5-minute budget" in part for part in budget.stderr.split("\r"))


def _progress_lines(stderr: str) -> list[ProgressLine]:
    lines = [line for line in stderr.splitlines() if line.startswith("progress: ")]
    parsed = [ProgressLine.parse(line) for line in lines]
    assert None not in parsed, lines
    return parsed  # type: ignore[return-value]


def test_plain_progress_lines_where_stderr_is_no_terminal(tmp_path: Path, tiny_plugin: Path, one_thread,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipe or a file gets complete lines with the bar's figures (no carriage returns, no half-drawn bars): at
    each tenth of the way and every DEPINDUCE_PROGRESS_EVERY seconds (30 by default)."""
    data = make_data(tmp_path / "data", n_train=150, n_dev=25)
    result = _train(data, tmp_path / "run")
    assert "\r" not in result.stderr and "%|" not in result.stderr
    lines = _progress_lines(result.stderr)
    # 12 steps: a line at each tenth crossed (the run is far quicker than 30 seconds)
    assert 5 <= len(lines) <= 10
    assert [line.percent for line in lines] == sorted(line.percent for line in lines) and lines[-1].percent == 100
    assert all(re.fullmatch(r"step \d+/12", line.done) and line.epoch in ("1/2", "2/2") for line in lines)
    assert all(line.loss and line.lr and line.speed and line.seen and re.fullmatch(r"\d\d:\d\d|\?", line.left)
               for line in lines)
    assert lines[0].tokens_per_second > 0
    # against a token budget, and a line after every step when asked
    monkeypatch.setenv("DEPINDUCE_PROGRESS_EVERY", "0")
    tokens = _train(data, tmp_path / "tokens", "--max-tokens", "1000")
    steps = json.loads((tmp_path / "tokens" / "metrics.jsonl").read_text().splitlines()[-1])["step"]
    lines = _progress_lines(tokens.stderr)
    assert len(lines) == steps and all(line.done.endswith("/1000 tokens of the budget") for line in lines)
    timed = _train(data, tmp_path / "timed", "--max-time", "5", "--set", "epochs=1")
    assert all(line.done.endswith("of the 5-minute budget") for line in _progress_lines(timed.stderr))


def test_a_progress_line_reads_back_as_written() -> None:
    line = ProgressLine(epoch="3/40", percent=7, done="2.50M/40.00M tokens of the budget", left="1:02:03",
                        loss="4.123", lr="1.00e-03", speed="12,345", seen="2.50M")
    assert line.text() == ("progress: epoch 3/40 | 7% | 2.50M/40.00M tokens of the budget | 1:02:03 left | "
                           "loss 4.123 | lr 1.00e-03 | 12,345 tok/s | 2.50M tokens seen")
    assert ProgressLine.parse(line.text()) == line and line.tokens_per_second == 12345.0
    early = ProgressLine(epoch="1/3", percent=0, done="step 0/24", left="?")
    assert ProgressLine.parse(early.text()) == early
    assert ProgressLine.parse("epoch 1 step 8 | train loss 8.5 | best dev_ppl 6755 *") is None


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
    assert [e.step for e in events.Scalars("train/loss")] == [6, 12]  # the evaluations'
    assert [e.step for e in events.Scalars("log/train/loss")] == [3, 6, 9, 12]  # log_every's


class _Writer:
    """A SummaryWriter that keeps what it is given (the tensorboard extra need not be installed)."""

    made: list[_Writer] = []

    def __init__(self, log_dir: str, purge_step: int | None = None) -> None:
        self.purge_step, self.scalars = purge_step, []
        _Writer.made.append(self)

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self.scalars.append((tag, step))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_each_tensorboard_tag_has_one_value_per_step(tmp_path: Path, tiny_plugin: Path, one_thread,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A log_every step can be an evaluation's step too: the two records average different windows, so they
    are written under different tags; a resume hides what a killed run wrote after its checkpoint."""
    import types

    _Writer.made = []
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", types.SimpleNamespace(SummaryWriter=_Writer))
    data = make_data(tmp_path / "data", n_train=150, n_dev=25)
    _train(data, tmp_path / "run", "--set", "log_every=3", "--set", "tensorboard=true", "--set",
           "curve_every_tokens=300", "--quiet")
    scalars = _Writer.made[0].scalars
    assert len(scalars) == len(set(scalars)), sorted(pair for pair in scalars if scalars.count(pair) > 1)
    steps = {tag: [step for name, step in scalars if name == tag] for tag, _ in scalars}
    assert steps["train/loss"] == [6, 12] and steps["log/train/loss"] == [3, 6, 9, 12]
    assert "run/lr" in steps and "log/run/lr" in steps and any(tag.startswith("curve/") for tag in steps)
    assert _Writer.made[0].purge_step is None
    # a resume continues after its checkpoint's step: events from that step on are the killed run's
    resumed = CliRunner().invoke(cli, ["train", "--out", str(tmp_path / "run"), "--resume", "--data", str(data),
                                       "--quiet"])
    assert resumed.exit_code == 0 and len(_Writer.made) == 2 and _Writer.made[-1].purge_step == 13


def test_tensorboard_missing_is_one_line(tmp_path: Path, tiny_plugin: Path, one_thread,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # as if the package were not installed
    data = make_data(tmp_path / "data", n_train=20, n_dev=5)
    result = CliRunner().invoke(cli, ["train", "--data", str(data), "--out", str(tmp_path / "run"), *TRAIN,
                                      "--set", "tensorboard=true"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "depinduce[tensorboard]" in result.output
