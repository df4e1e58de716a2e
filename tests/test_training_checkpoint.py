"""Checkpoints: atomic writes, weights-only loading, and one-line errors for corrupted or foreign files."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from depinduce.cli.main import cli
from depinduce.errors import DepinduceError, ResourceError
from depinduce.training.checkpoint import atomic_torch_save, atomic_write_text, load_train_state
from depinduce.training.engine import TrainOptions, train
from training_support import make_data, one_thread, tiny_plugin  # noqa: F401 (fixtures)


class _Exploit:
    """A pickle that would create a file when unpickled without weights_only."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self):
        return (Path.touch, (self.target,))


@pytest.fixture
def trained_run(tmp_path: Path, tiny_plugin: Path, one_thread) -> tuple[Path, Path]:
    data = make_data(tmp_path / "data", n_train=40, n_dev=8, gold_dev=False)
    run = tmp_path / "run"
    train(TrainOptions(data_dir=data, run_dir=run, model="tiny-mlm", overrides=("epochs=1",), quiet=True),
          log=lambda _: None)
    return data, run


def test_atomic_writes_replace_whole_files_and_leave_nothing_behind(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "state.pt"
    atomic_torch_save({"a": torch.ones(3)}, target)
    atomic_torch_save({"a": torch.zeros(2)}, target)
    assert torch.equal(torch.load(target, weights_only=True)["a"], torch.zeros(2))

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(ResourceError, match=re.escape(f"{target}: cannot write (No space left on device)")):
        atomic_torch_save({"a": torch.ones(5)}, target)  # a failed write keeps the previous file intact
    monkeypatch.undo()
    assert torch.equal(torch.load(target, weights_only=True)["a"], torch.zeros(2))
    atomic_write_text(tmp_path / "x.txt", "hello")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.pt", "x.txt"]


def test_last_pt_holds_everything_and_loads_weights_only(trained_run: tuple[Path, Path]) -> None:
    _, run = trained_run
    state = load_train_state(run / "last.pt")
    assert {"model", "optimizer", "schedule", "rng", "position", "progress"} <= set(state)
    assert {"python", "torch", "mask"} <= set(state["rng"][0])
    assert state["position"]["epoch"] == 1 and state["progress"]["step"] > 0
    assert isinstance(torch.load(run / "model.pt", weights_only=True), dict)


def test_corrupted_and_foreign_checkpoints_are_one_line_errors(trained_run: tuple[Path, Path], tmp_path: Path) -> None:
    _, run = trained_run
    last = run / "last.pt"
    good = last.read_bytes()
    cases = {
        "truncated": (good[: len(good) // 2], "not a readable depinduce checkpoint"),
        "garbage": (b"\x00\x01 not a checkpoint" * 10, "not a readable depinduce checkpoint"),
    }
    for name, (content, message) in cases.items():
        last.write_bytes(content)
        with pytest.raises(DepinduceError) as info:
            load_train_state(last)
        assert message in str(info.value) and "\n" not in str(info.value), name
    torch.save(torch.load(run / "model.pt", weights_only=True), last)  # a model state dict is not a training state
    with pytest.raises(DepinduceError, match="not a depinduce training checkpoint"):
        load_train_state(last)
    torch.save({"format": "depinduce-train-state", "version": 99}, last)
    with pytest.raises(DepinduceError, match="version 99"):
        load_train_state(last)
    marker = tmp_path / "pwned"
    torch.save({"format": "depinduce-train-state", "payload": _Exploit(marker)}, last)
    with pytest.raises(DepinduceError, match="not a readable depinduce checkpoint"):
        load_train_state(last)
    assert not marker.exists(), "loading a checkpoint executed code"


def test_cli_reports_a_corrupted_checkpoint_in_one_line(trained_run: tuple[Path, Path]) -> None:
    data, run = trained_run
    last = run / "last.pt"
    last.write_bytes(last.read_bytes()[:1000])
    result = CliRunner().invoke(cli, ["train", "--data", str(data), "--out", str(run), "--resume", "--quiet"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "last.pt: not a readable depinduce checkpoint" in lines[0]
    (run / "model.pt").write_bytes(b"garbage")
    result = CliRunner().invoke(cli, ["parse", "--model", str(run), "--quiet", "-"], input="a dog saw a cat\n")
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "model.pt: not a readable depinduce checkpoint" in result.output


def test_resume_refuses_changed_data(trained_run: tuple[Path, Path]) -> None:
    data, run = trained_run
    with (data / "train.txt").open("a") as stream:
        stream.write("a new sentence\n")
    with pytest.raises(DepinduceError, match="train.txt changed since this run started"):
        train(TrainOptions(data_dir=data, run_dir=run, resume=True, quiet=True), log=lambda _: None)


def test_resume_ignores_files_the_run_never_recorded(trained_run: tuple[Path, Path]) -> None:
    """A run made by a version that did not checksum a file (train.conllu before the supervised path) resumes;
    a recorded file that disappears is still refused."""
    data, run = trained_run
    recorded = json.loads((run / "manifest.json").read_text(encoding="utf-8"))["data"]["files"]
    assert "train.conllu" not in recorded and not (data / "train.conllu").exists()
    (data / "train.conllu").write_text("1\ta\t_\t_\t_\t_\t0\troot\t_\t_\n\n", encoding="utf-8")
    train(TrainOptions(data_dir=data, run_dir=run, resume=True, quiet=True), log=lambda _: None)
    (data / "dev.txt").unlink()
    with pytest.raises(DepinduceError, match="dev.txt changed since this run started"):
        train(TrainOptions(data_dir=data, run_dir=run, resume=True, quiet=True), log=lambda _: None)


def test_train_loss_chunks_is_the_objective_the_engine_trains_with(tmp_path: Path, tiny_plugin: Path, one_thread,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from depinduce.training.objectives import MaskedLM

    chunks: list = []
    compute = MaskedLM.compute
    monkeypatch.setattr(MaskedLM, "compute", lambda self, *a, **k: chunks.append(self.chunks) or compute(self, *a, **k))
    data = make_data(tmp_path / "data", n_train=20, n_dev=4, gold_dev=False)
    train(TrainOptions(data_dir=data, run_dir=tmp_path / "run", model="tiny-mlm",
                       overrides=("epochs=1", "loss_chunks=4"), quiet=True), log=lambda _: None)
    assert chunks and set(chunks) == {4}
