"""A training start that fails before its first step leaves nothing it made (so the same command runs again, with
no "already exists; use --force"), and never removes what it did not make: a user's folder or file, a run that
trained steps before it failed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from depinduce.cli.main import cli
from depinduce.errors import ResourceError
from depinduce.training.step import OptimiserStep
from training_support import make_data, one_thread, tiny_plugin  # noqa: F401 (fixtures)

TRAIN = ["--model", "tiny-mlm", "--threads", "1", "--set", "epochs=1", "--set", "batch_tokens=100"]


def _train(data: Path, out: Path, *extra: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["train", "--data", str(data), "--out", str(out), *TRAIN, *extra])


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return make_data(tmp_path / "data", n_train=30, n_dev=5)


def _no_tensorboard(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # as if the extra were not installed


def _fail_at_step(monkeypatch: pytest.MonkeyPatch, failing: int) -> None:
    """The ``failing``-th optimiser step raises (the steps before it train)."""
    original, calls = OptimiserStep.__call__, [0]

    def step(self: OptimiserStep, inputs):  # type: ignore[no-untyped-def]
        calls[0] += 1
        if calls[0] == failing:
            raise ResourceError("the device went away")
        return original(self, inputs)

    monkeypatch.setattr(OptimiserStep, "__call__", step)


def test_a_missing_extra_leaves_no_folder_and_the_same_command_runs_again(
        tmp_path: Path, data: Path, tiny_plugin: Path, one_thread, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "new" / "deeper" / "run"  # its two parents made for it too
    with monkeypatch.context() as patch:
        _no_tensorboard(patch)
        for _ in range(2):
            result = _train(data, out, "--set", "tensorboard=true")
            assert result.exit_code == 2 and "depinduce[tensorboard]" in result.output, result.output
            assert "already exists" not in result.output
            assert not (tmp_path / "new").exists()
    assert _train(data, out).exit_code == 0 and (out / "model.pt").is_file()


def test_a_failed_start_keeps_what_the_user_made(tmp_path: Path, data: Path, tiny_plugin: Path, one_thread,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    assert _train(data, run).exit_code == 0
    (run / "notes.txt").write_text("mine\n")
    _no_tensorboard(monkeypatch)
    made = tmp_path / "mine"  # an empty folder of the user's, given as --out
    made.mkdir()
    assert _train(data, made, "--set", "tensorboard=true").exit_code == 2
    assert made.is_dir() and not any(made.iterdir())
    # --force over a run holding a file of the user's: the new start's files go, the user's file stays
    assert _train(data, run, "--force", "--set", "tensorboard=true").exit_code == 2
    assert sorted(p.name for p in run.iterdir()) == ["notes.txt"]
    # a folder that is not a run is refused, and nothing in it is touched
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "config.yaml").write_text("mine\n")
    result = _train(data, foreign, "--force", "--set", "tensorboard=true")
    assert result.exit_code != 0 and (foreign / "config.yaml").read_text() == "mine\n"


def test_an_error_in_the_first_step_takes_the_run_back_a_later_one_does_not(
        tmp_path: Path, data: Path, tiny_plugin: Path, one_thread, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:
        _fail_at_step(patch, 1)
        result = _train(data, tmp_path / "first")
        assert result.exit_code != 0 and "the device went away" in result.output, result.output
        assert not (tmp_path / "first").exists()
    _fail_at_step(monkeypatch, 3)  # two steps trained: the run and its log stay, to be read
    result = _train(data, tmp_path / "third")
    assert result.exit_code != 0 and "the device went away" in result.output, result.output
    assert (tmp_path / "third" / "train.log").is_file() and (tmp_path / "third" / "config.yaml").is_file()


def test_a_failed_resume_takes_nothing_back(tmp_path: Path, data: Path, tiny_plugin: Path, one_thread,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    assert _train(data, run, "--max-tokens", "100").exit_code == 0  # stopped by the budget: steps left to train
    before = sorted(p.name for p in run.iterdir())
    _fail_at_step(monkeypatch, 1)
    result = CliRunner().invoke(cli, ["train", "--out", str(run), "--resume", "--data", str(data),
                                      "--max-tokens", "100000", "--threads", "1"])
    assert result.exit_code != 0 and "the device went away" in result.output, result.output
    assert sorted(p.name for p in run.iterdir()) == before
