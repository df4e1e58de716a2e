"""A real training process killed with SIGKILL in the middle of an epoch resumes from its last checkpoint and ends
bitwise identical to an uninterrupted run with the same seed (CPU, one thread)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from depinduce.training.engine import TrainOptions, train
from training_support import depinduce_command, make_data, one_thread, subprocess_env, tiny_plugin  # noqa: F401

SETTINGS = ("epochs=3", "batch_tokens=120", "checkpoint_every=3", "lr=5e-3", "dev_parse=false")
# Only the process that gets killed is slowed down (sleep does not change any number), so the test can catch it
# inside an epoch.
SLOW = ("sleep=0.03",)


def _sets() -> list[str]:
    return [arg for item in SETTINGS + SLOW for arg in ("--set", item)]


def _state(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def _metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _wait_for_mid_epoch_checkpoint(proc: subprocess.Popen, last: Path, timeout: float = 90.0) -> None:
    """Until last.pt records a position inside the second epoch (an evaluation already happened before it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"training ended before it could be killed: {proc.stderr.read()}")
        if last.is_file():
            position = _state(last)["position"]
            if position["epoch"] >= 1 and position["batches_done"] > 0:
                return
        time.sleep(0.02)
    raise AssertionError("no mid-epoch checkpoint appeared")


@pytest.mark.slow
def test_sigkill_mid_epoch_then_resume_matches_an_uninterrupted_run(tmp_path: Path, tiny_plugin: Path,
                                                                    one_thread) -> None:
    data = make_data(tmp_path / "data", n_train=200, n_dev=20, gold_dev=False)
    reference = tmp_path / "reference"
    train(TrainOptions(data_dir=data, run_dir=reference, model="tiny-mlm", overrides=SETTINGS, threads=1, seed=7,
                       quiet=True), log=lambda _: None)

    run = tmp_path / "run"
    env = subprocess_env(tiny_plugin)
    proc = subprocess.Popen(
        depinduce_command("train", "--model", "tiny-mlm", "--data", str(data), "--out", str(run), "--threads", "1",
                          "--seed", "7", "--quiet", *_sets()),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_mid_epoch_checkpoint(proc, run / "last.pt")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    killed = _state(run / "last.pt")
    killed_step = killed["progress"]["step"]
    total_steps = _metrics(reference)[-1]["step"]
    assert 0 < killed["position"]["batches_done"] and killed_step < total_steps
    assert not list(run.glob(".*.tmp")), "a temporary checkpoint file was left behind"

    resumed = subprocess.run(
        # no --data: a resumed run reads the data folder it was started on (its manifest's data.dir)
        depinduce_command("train", "--out", str(run), "--resume", "--threads", "1", "--quiet"),
        env=env, capture_output=True, text=True, timeout=180)
    assert resumed.returncode == 0, resumed.stderr

    # the resumed run continued from the checkpoint (position, optimiser, RNG) and finished: same weights ...
    final, expected = _state(run / "last.pt"), _state(reference / "last.pt")
    assert final["progress"]["step"] == total_steps and final["progress"]["epoch"] == 3
    assert final["model"].keys() == expected["model"].keys()
    for name, tensor in expected["model"].items():
        assert torch.equal(final["model"][name], tensor), name
    for a, b in zip(final["optimizer"]["state"].values(), expected["optimizer"]["state"].values()):
        assert torch.equal(a["exp_avg"], b["exp_avg"]) and torch.equal(a["exp_avg_sq"], b["exp_avg_sq"])
    best, best_expected = torch.load(run / "model.pt", weights_only=True), torch.load(reference / "model.pt",
                                                                                     weights_only=True)
    assert all(torch.equal(best[k], v) for k, v in best_expected.items())
    # ... and the same evaluations: no step lost, none repeated, identical numbers
    got, want = _metrics(run), _metrics(reference)
    assert [r["step"] for r in got] == [r["step"] for r in want]
    for a, b in zip(got, want):
        assert a["dev_loss"] == b["dev_loss"] and a["train_loss"] == b["train_loss"] and a["lr"] == b["lr"]
    runs = json.loads((run / "manifest.json").read_text())["runs"]
    assert [r["resumed_from_step"] for r in runs] == [None, killed_step]
    assert runs[-1]["outcome"]["reason"] == "completed"

    # resuming a finished run does nothing and says so
    again = train(TrainOptions(data_dir=data, run_dir=run, resume=True, quiet=True), log=lambda _: None)
    assert again.reason == "completed" and again.step == total_steps
