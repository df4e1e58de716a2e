"""Scaling out on existing engines (issue 48), each as README's "Scaling out" says, on CPU with gloo:

``torchrun … -m depinduce train --seeds`` (one process group for all seeds, one status line per run), a killed
rank ending the others, two "nodes" (two torchrun launches on 127.0.0.1) equal to two ranks on one, Ctrl-C during
``--seeds``, ``--seeds … --jobs K`` (each seed bit-identical to its run alone; Ctrl-C stops all), and README's
SLURM array script with ``report`` over its folder (a seed found twice counted once, different stop points
noted)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from training_support import REPO, make_data, subprocess_env, tiny_plugin  # noqa: F401

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch built without distributed")

SETS = ["--set", "batch_tokens=150", "--set", "lr=5e-3"]
LONG = ["--set", "epochs=100000", "--set", "checkpoint_every=1"]  # runs until stopped


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _torchrun(*launch: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", *launch, "-m", "depinduce", "train"]


def _train(*args: str) -> list[str]:
    return [sys.executable, "-m", "depinduce", "train", *args]


def _digest(run: Path) -> dict[str, torch.Tensor]:
    return torch.load(run / "model.pt", map_location="cpu", weights_only=True)


def _same_weights(a: Path, b: Path) -> bool:
    left, right = _digest(a), _digest(b)
    return left.keys() == right.keys() and all(torch.equal(left[k], right[k]) for k in left)


def _wait_for(condition, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.2)


def _evaluated(run: Path) -> bool:
    metrics = run / "metrics.jsonl"
    return metrics.is_file() and metrics.stat().st_size > 0


def _outcome(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())["runs"][-1].get("outcome", {})


def _rank_pid(out: Path, rank: int) -> int | None:
    """The pid of the training process of ``rank`` writing to ``out`` (read from /proc)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(out).encode() in cmdline and f"RANK={rank}".encode() in environ and b"-u" in cmdline:
            return int(entry.name)
    return None


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return make_data(tmp_path / "data", n_train=150, n_dev=20, gold_dev=False)


@pytest.mark.slow
def test_seeds_under_torchrun_share_one_process_group(tmp_path: Path, data: Path, tiny_plugin: Path) -> None:
    out = tmp_path / "runs"
    result = subprocess.run(
        _torchrun("--standalone", "--nproc_per_node", "2") + ["--model", "tiny-mlm", "--data", str(data), "--out",
                                                               str(out), "--device", "cpu", "--threads", "1",
                                                               "--seeds", "0,1", "--set", "epochs=2", *SETS],
        env=subprocess_env(tiny_plugin), capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    for seed in (0, 1):
        assert _outcome(out / f"seed-{seed}")["reason"] == "completed"
        assert json.loads((out / f"seed-{seed}" / "manifest.json").read_text())["runs"][-1]["world_size"] == 2
        # rank 0 alone says what each run does
        assert result.stderr.count(f"seed {seed} ({seed + 1} of 2)") == 1
    assert result.stderr.count("training tiny-mlm") == 2


@pytest.mark.slow
def test_a_killed_rank_ends_the_others(tmp_path: Path, data: Path, tiny_plugin: Path) -> None:
    """One node: torchrun ends the other ranks at once.  Two "nodes": the surviving node's rank notices the
    closed connection and ends with one line instead of a traceback."""
    out = tmp_path / "one-node"
    launch = subprocess.Popen(
        _torchrun("--standalone", "--nproc_per_node", "2") + ["--model", "tiny-mlm", "--data", str(data), "--out",
                                                               str(out), "--device", "cpu", "--threads", "1",
                                                               "--quiet", *SETS, *LONG],
        env=subprocess_env(tiny_plugin), stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: _evaluated(out))
    os.kill(_rank_pid(out, 1) or 0, signal.SIGKILL)
    started = time.monotonic()
    _, stderr = launch.communicate(timeout=60)
    assert launch.returncode != 0 and time.monotonic() - started < 30
    assert "depinduce/" not in stderr  # no traceback through the package's code

    out = tmp_path / "two-nodes"
    nodes = [subprocess.Popen(
        _torchrun("--nnodes", "2", "--nproc_per_node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                  f"127.0.0.1:{port}", "--rdzv-id", "kill")
        + ["--model", "tiny-mlm", "--data", str(data), "--out", str(out), "--device", "cpu", "--threads", "1",
           "--quiet", *SETS, *LONG],
        env=subprocess_env(tiny_plugin), stderr=subprocess.PIPE, text=True) for port in [_free_port()] * 2]
    _wait_for(lambda: _evaluated(out))
    os.kill(_rank_pid(out, 1) or 0, signal.SIGKILL)
    errors = [node.communicate(timeout=90)[1] for node in nodes]
    assert all(node.returncode != 0 for node in nodes)
    lost = [line for text in errors for line in text.splitlines() if "lost the other ranks" in line]
    assert len(lost) == 1 and re.match(r"(\[rank0\]: )?rank 0: lost the other ranks \(", lost[0]), errors
    assert not any('depinduce/' in text and "Traceback" in text for text in errors), errors


@pytest.mark.slow
def test_two_nodes_train_as_two_ranks_on_one(tmp_path: Path, data: Path, tiny_plugin: Path) -> None:
    train = ["--model", "tiny-mlm", "--data", str(data), "--device", "cpu", "--threads", "1", "--quiet",
             "--set", "epochs=2", "--set", "seed=3", *SETS]
    env = subprocess_env(tiny_plugin)
    one = subprocess.run(_torchrun("--standalone", "--nproc_per_node", "2") + train + ["--out", str(tmp_path / "a")],
                         env=env, capture_output=True, text=True, timeout=240)
    if one.returncode != 0 and "terminate called without an active exception" in one.stderr:
        # a rank aborted inside torch's C++ (gloo) on a loaded machine: seen once in CI, not reproduced since;
        # run it once more from scratch so the comparison below still runs (a second abort fails the test)
        shutil.rmtree(tmp_path / "a", ignore_errors=True)
        one = subprocess.run(_torchrun("--standalone", "--nproc_per_node", "2") + train
                             + ["--out", str(tmp_path / "a")], env=env, capture_output=True, text=True, timeout=240)
    assert one.returncode == 0, one.stderr[-3000:]
    port = _free_port()
    nodes = [subprocess.Popen(
        _torchrun("--nnodes", "2", "--nproc_per_node", "1", "--node-rank", str(rank), "--rdzv-backend", "c10d",
                  "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "two") + train + ["--out", str(tmp_path / "b")],
        env=env, stderr=subprocess.PIPE, text=True) for rank in (0, 1)]
    for node in nodes:
        _, stderr = node.communicate(timeout=240)
        assert node.returncode == 0, stderr[-3000:]
    assert _same_weights(tmp_path / "a", tmp_path / "b")
    a, b = (json.loads((tmp_path / name / "metrics.jsonl").read_text().splitlines()[-1]) for name in "ab")
    assert (a["step"], a["tokens_seen"], a["dev_loss"]) == (b["step"], b["tokens_seen"], b["dev_loss"])


@pytest.mark.slow
def test_ctrl_c_stops_seeds_at_the_first(tmp_path: Path, data: Path, tiny_plugin: Path) -> None:
    out = tmp_path / "runs"
    process = subprocess.Popen(_train("--model", "tiny-mlm", "--data", str(data), "--out", str(out), "--device", "cpu",
                                      "--threads", "1", "--seeds", "0,1", *SETS, *LONG),
                               env=subprocess_env(tiny_plugin), stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: _evaluated(out / "seed-0"))
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr[-2000:]  # stopped, not finished: 128 + SIGINT, as a shell says
    assert _outcome(out / "seed-0")["reason"] == "signal" and not (out / "seed-1").exists()
    assert f"seed 1 not started; continue all with `depinduce train --resume --out {out} --seeds 0,1`" in stderr


@pytest.mark.slow
def test_jobs_run_seeds_at_once_each_as_alone(tmp_path: Path, data: Path, tiny_plugin: Path) -> None:
    env = subprocess_env(tiny_plugin)
    common = ["--model", "tiny-mlm", "--data", str(data), "--device", "cpu", "--threads", "1", "--set", "epochs=3",
              *SETS]
    together = subprocess.run(_train(*common, "--out", str(tmp_path / "runs"), "--seeds", "0,1", "--jobs", "2"),
                              env=env, capture_output=True, text=True, timeout=240)
    assert together.returncode == 0, together.stderr[-3000:]
    alone = subprocess.run(_train(*common, "--out", str(tmp_path / "alone"), "--seed", "1", "--quiet"), env=env,
                           capture_output=True, text=True, timeout=240)
    assert alone.returncode == 0, alone.stderr[-3000:]
    assert _same_weights(tmp_path / "runs" / "seed-1", tmp_path / "alone")
    timeless = [{k: v for k, v in json.loads(line).items() if not k.endswith("_s")}
                for line in (tmp_path / "alone" / "metrics.jsonl").read_text().splitlines()]
    assert timeless == [{k: v for k, v in json.loads(line).items() if not k.endswith("_s")}
                        for line in (tmp_path / "runs" / "seed-1" / "metrics.jsonl").read_text().splitlines()]
    lines = together.stderr.splitlines()
    assert any(line.startswith("seed 0: ") for line in lines) and any(line.startswith("seed 1: ") for line in lines)
    assert re.search(r"seeds 0, 1: together [\d,]+ training tokens/s", together.stderr)
    # complete lines only: the seeds' progress came as plain lines, which this process read and did not print
    assert "\r" not in together.stderr and "%|" not in together.stderr and "progress: " not in together.stderr


def test_jobs_read_each_seeds_progress_lines(tmp_path: Path) -> None:
    """A seed's stderr is a pipe: its progress lines become its part of the status line (tokens/s added up),
    every other complete line is printed prefixed ``seed S:``."""
    from depinduce.api import seed_jobs

    shown: list[str] = []
    display = seed_jobs._Display(quiet=False)
    display.line = shown.append  # type: ignore[method-assign]
    jobs = []
    for seed, speed in ((0, "1,200"), (1, "800")):
        reader, writer = os.pipe()
        os.write(writer, (f"training tiny-mlm on cpu\nprogress: epoch 2/3 | 45% | step 11/24 | 00:09 left | loss 8.1 | "
                          f"lr 3.00e-04 | {speed} tok/s | 1230 tokens seen\n").encode())
        os.close(writer)
        job = seed_jobs._Job(seed, tmp_path, seed, None, reader)  # type: ignore[arg-type]
        while job.open:
            seed_jobs._read(job, display)
        os.close(reader)
        jobs.append(job)
    assert shown == ["seed 0: training tiny-mlm on cpu", "seed 1: training tiny-mlm on cpu"]
    assert [seed_jobs.compact(job.progress) for job in jobs] == ["epoch 2/3 45% 1,200 tok/s", "epoch 2/3 45% 800 tok/s"]
    assert sum(seed_jobs.speed_of(job.progress) for job in jobs) == 2000.0


@pytest.mark.slow
def test_ctrl_c_stops_every_job(tmp_path: Path, data: Path, tiny_plugin: Path) -> None:
    out = tmp_path / "runs"
    process = subprocess.Popen(_train("--model", "tiny-mlm", "--data", str(data), "--out", str(out), "--device", "cpu",
                                      "--threads", "1", "--seeds", "0,1,2", "--jobs", "2", *SETS, *LONG),
                               env=subprocess_env(tiny_plugin), stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: _evaluated(out / "seed-0") and _evaluated(out / "seed-1"))
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr[-2000:]
    assert _outcome(out / "seed-0")["reason"] == _outcome(out / "seed-1")["reason"] == "signal"
    assert not (out / "seed-2").exists()
    assert "seeds 0, 1 stopped cleanly (checkpointed), seed 2 not started; continue all with " \
           f"`depinduce train --resume --out {out} --seeds 0,1,2`" in stderr


def _docs_block(heading: str) -> str:
    """The first ``` block after ``heading`` in README.md or, once the section has moved there, docs/."""
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        if heading in text:
            return text[text.index(heading):].split("```")[1].split("\n", 1)[1]
    raise AssertionError(f"no page of the documentation holds {heading!r}")


@pytest.mark.slow
def test_documented_slurm_array_script_and_report(tmp_path: Path, tiny_plugin: Path) -> None:
    data = make_data(tmp_path / "data", n_train=150, n_dev=20)
    shutil.copy(data / "dev.conllu", data / "test.conllu")
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text("model: tiny-mlm\ntrain: {epochs: 2, batch_tokens: 150, lr: 0.005, select: dev_uda}\n")
    script = tmp_path / "seeds.sbatch"
    script.write_text(_docs_block("**SLURM array job.**"))
    out = tmp_path / "runs"
    env = subprocess_env(tiny_plugin, RECIPE=str(recipe), DATA=str(data), OUT=str(out), SLURM_CPUS_PER_TASK="1",
                         PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    for task in ("0", "1"):  # what `sbatch --array=0-1` runs, one task after another
        result = subprocess.run(["bash", str(script)], env=dict(env, SLURM_ARRAY_TASK_ID=task), capture_output=True,
                                text=True, timeout=240)
        assert result.returncode == 0, result.stderr[-3000:]
    # the same folder twice (a copy): each (configuration, seed) is counted once, with a warning
    shutil.copytree(out, tmp_path / "copy")
    report = subprocess.run([sys.executable, "-m", "depinduce", "report", str(out), str(tmp_path / "copy"),
                             "--format", "json"], env=env, capture_output=True, text=True, timeout=240)
    assert report.returncode == 0, report.stderr[-3000:]
    assert report.stderr.count("of the same configuration as") == 2 and "counted once" in report.stderr
    document = json.loads(report.stdout)
    assert [group["n"] for group in document["groups"]] == [2]
    assert [run["seed"] for run in document["groups"][0]["runs"]] == [0, 1]
    assert not any("stopped at different points" in note for note in document["notes"])
    # a requeued task resumes its run; a run that ended elsewhere is noted
    result = subprocess.run(["bash", str(script)], env=dict(env, SLURM_ARRAY_TASK_ID="1"), capture_output=True,
                            text=True, timeout=240)
    assert result.returncode == 0 and "resuming" in result.stderr, result.stderr[-3000:]
    manifest = json.loads((out / "seed-1" / "manifest.json").read_text())
    manifest["runs"][-1]["outcome"].update(reason="max_time", step=3)
    (out / "seed-1" / "manifest.json").write_text(json.dumps(manifest))
    report = subprocess.run([sys.executable, "-m", "depinduce", "report", str(out), "--format", "json"], env=env,
                            capture_output=True, text=True, timeout=240)
    notes = [note for note in json.loads(report.stdout)["notes"] if "stopped at different points" in note]
    assert len(notes) == 1 and "seed 0: completed at step" in notes[0] and "seed 1: max_time at step 3" in notes[0]


def test_seed_ranges_and_refusals(tmp_path: Path, data: Path, tiny_plugin: Path) -> None:
    from click.testing import CliRunner

    from depinduce.api.training import seed_list
    from depinduce.cli.main import cli

    assert seed_list("0-3") == [0, 1, 2, 3] and seed_list("0-1,5") == [0, 1, 5] and seed_list("3") == [0, 1, 2]
    assert seed_list("2-2") == [2]
    common = ["train", "--model", "tiny-mlm", "--data", str(data), "--out", str(tmp_path / "r")]
    for args, said in ((["--jobs", "2"], "--jobs runs several seeds at once"),
                       (["--seeds", "3-1"], "the range 3-1 runs backwards"),
                       (["--seeds", "0-2,1"], "a seed is repeated")):
        result = CliRunner().invoke(cli, common + args)
        assert result.exit_code == 2 and said in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert not (tmp_path / "r").exists()
