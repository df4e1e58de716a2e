"""Runs that say how good they are (issue 44): ``parse``, ``models`` and ``report`` say how a run ended (finished,
stopped by a budget, interrupted at step N) and its selected dev score beside right-branching's on the same dev
data, and warn in one line when it is below; ``--device cuda`` without CUDA is one line; ``models`` fits 80
columns without cutting a name."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from depinduce.cli.main import cli
from depinduce.errors import ResourceError
from depinduce.training.engine import TrainOptions, train
from depinduce.training.outcome import run_outcome
from training_support import make_data, one_thread, tiny_plugin  # noqa: F401 (fixtures)

FAST = ("batch_tokens=100", "select=dev_uda")
BASELINE = "right-branching"


def _quiet(_: str) -> None:
    pass


def _manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def _set_baseline(run: Path, value: float | None) -> None:
    """Put right-branching's recorded dev_uda at ``value`` (None: as a run from before it was recorded)."""
    manifest = _manifest(run)
    if value is None:
        del manifest["baselines"]
    else:
        manifest["baselines"][BASELINE]["dev_uda"] = value
    (run / "manifest.json").write_text(json.dumps(manifest))


@pytest.fixture
def three_runs(tmp_path: Path, tiny_plugin: Path, one_thread) -> dict[str, Path]:
    """Under tmp_path/runs: a finished run, one stopped by its token budget, one interrupted by SIGTERM (the
    newest, so the one ``parse`` takes without ``--model``)."""
    data = make_data(tmp_path / "data", n_train=80, n_dev=20)
    runs = tmp_path / "runs"
    made = {"finished": runs / "finished", "budget": runs / "budget", "interrupted": runs / "interrupted"}
    train(TrainOptions(data_dir=data, run_dir=made["finished"], model="tiny-mlm", quiet=True,
                       overrides=("epochs=1", *FAST)), log=_quiet)
    train(TrainOptions(data_dir=data, run_dir=made["budget"], model="tiny-mlm", quiet=True, max_tokens=250,
                       overrides=("epochs=5", "eval_every=2", *FAST)), log=_quiet)
    result = train(TrainOptions(data_dir=data, run_dir=made["interrupted"], model="tiny-mlm", quiet=True,
                                overrides=("epochs=50", "eval_every=3", "signal_at=8", *FAST)), log=_quiet)
    assert result.reason == "signal"
    return made


def test_the_manifest_records_the_ending_and_right_branchings_dev_scores(three_runs: dict[str, Path],
                                                                        tmp_path: Path) -> None:
    interrupted = _manifest(three_runs["interrupted"])
    assert interrupted["runs"][-1]["outcome"]["signal"] == "SIGTERM"
    recorded = interrupted["baselines"][BASELINE]
    # the same number `parse --model right-branching` + `eval` gives on the dev file
    dev = tmp_path / "data" / "dev.conllu"
    runner = CliRunner()
    parsed = runner.invoke(cli, ["parse", "--model", BASELINE, "--input-format", "conllu", "--quiet", str(dev)])
    (tmp_path / "rb.conllu").write_text(parsed.stdout)
    scored = runner.invoke(cli, ["eval", "--gold", str(dev), "--pred", str(tmp_path / "rb.conllu"), "--json"])
    metrics = json.loads(scored.stdout)["metrics"]
    assert recorded["dev_uda"] == pytest.approx(metrics["uda"]) and recorded["dev_dda"] == pytest.approx(metrics["dda"])
    assert set(recorded) >= {"dev_uda", "dev_dda", "dev_uf1"}


def test_each_ending_is_described(three_runs: dict[str, Path]) -> None:
    finished, budget, interrupted = (run_outcome(three_runs[k]) for k in ("finished", "budget", "interrupted"))
    assert finished.reason == "completed" and finished.finished
    assert finished.ending() == f"finished at step {finished.step} (all epochs)"
    assert budget.reason == "max_tokens" and not budget.finished
    assert budget.ending() == f"stopped by its token budget at step {budget.step}"
    assert interrupted.ending() == f"interrupted (SIGTERM) at step {interrupted.step}" and interrupted.step > 0
    records = [json.loads(line) for line in (three_runs["interrupted"] / "metrics.jsonl").read_text().splitlines()]
    best = [r for r in records if r.get("best")][-1]
    baseline = _manifest(three_runs["interrupted"])["baselines"][BASELINE]["dev_uda"]
    assert interrupted.scores() == f"selected dev_uda {best['dev_uda']:.1f} ({BASELINE} {baseline:.1f})"


def test_parse_says_how_the_run_ended_and_warns_below_right_branching(three_runs: dict[str, Path],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    run = three_runs["interrupted"]
    outcome = run_outcome(run)
    monkeypatch.chdir(run.parent.parent)
    relative = Path("runs") / "interrupted"
    _set_baseline(run, 99.5)
    result = CliRunner().invoke(cli, ["parse", "--quiet", "-"], input="the dog saw a cat\n")
    assert result.exit_code == 0, result.output
    # without --model the newest finished run is still taken (an interrupted run is a clean stop that kept its
    # best model); what is new is that parse says how it ended and how good it is
    assert result.stderr.splitlines() == [
        f"parse: using {relative} (the most recently finished run under runs/)",
        f"parse: {relative}: interrupted (SIGTERM) at step {outcome.step}; selected dev_uda {outcome.score:.1f} "
        f"({BASELINE} 99.5)",
        f"warning: {relative}: the selected model's dev_uda {outcome.score:.1f} is below {BASELINE}'s 99.5 on the "
        f"same dev data; continue it: `depinduce train --resume --out {relative}`, or parse with --model default "
        "(the bundled model)",
    ]
    assert result.stdout.startswith("1\tthe\t")  # it parsed

    _set_baseline(run, 0.0)  # above right-branching: no warning
    named = CliRunner().invoke(cli, ["parse", "--quiet", "--model", str(relative), "-"], input="the dog saw a cat\n")
    assert named.exit_code == 0 and named.stderr.splitlines() == [
        f"parse: {relative}: interrupted (SIGTERM) at step {outcome.step}; selected dev_uda {outcome.score:.1f} "
        f"({BASELINE} 0.0)"]


def test_a_run_that_did_not_record_the_baseline_gets_it_measured_from_its_unchanged_dev_data(
        three_runs: dict[str, Path], tmp_path: Path) -> None:
    run = three_runs["finished"]
    recorded = run_outcome(run).baseline
    _set_baseline(run, None)
    assert run_outcome(run).baseline == pytest.approx(recorded)
    assert run_outcome(run, measure=False).baseline is None
    (tmp_path / "data" / "dev.conllu").write_text((tmp_path / "data" / "dev.conllu").read_text() + "\n")
    assert run_outcome(run).baseline is None  # not the run's dev data any more: nothing is said


def test_budget_and_finished_runs_advise_what_fits_them(three_runs: dict[str, Path]) -> None:
    for name in ("finished", "budget"):
        _set_baseline(three_runs[name], 99.5)
    finished, budget = run_outcome(three_runs["finished"]), run_outcome(three_runs["budget"])
    assert finished.warning().endswith("on the same dev data; train longer (more epochs, the recipe's full budget) "
                                       "or with another seed")
    assert budget.warning().endswith(f"continue it: `depinduce train --resume --out {three_runs['budget']} "
                                     "--max-tokens N` with a larger N")


def test_models_lists_the_runs_and_report_notes_their_endings(three_runs: dict[str, Path],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from depinduce.api.reporting import build_report

    monkeypatch.chdir(three_runs["finished"].parent.parent)
    listed = CliRunner().invoke(cli, ["models", "--json"])
    assert listed.exit_code == 0, listed.output
    runs = {Path(row["path"]).name: row for row in json.loads(listed.stdout)["runs"]}
    assert set(runs) == {"finished", "budget", "interrupted"}
    assert runs["interrupted"]["parse_default"] and not runs["finished"]["parse_default"]
    assert runs["budget"]["reason"] == "max_tokens" and runs["interrupted"]["signal"] == "SIGTERM"
    assert runs["finished"][BASELINE] == _manifest(three_runs["finished"])["baselines"][BASELINE]["dev_uda"]

    for name, value in (("finished", 0.0), ("budget", 99.5), ("interrupted", 0.0)):
        _set_baseline(three_runs[name], value)
    warnings: list[str] = []
    report = build_report([three_runs["finished"].parent], warn=warnings.append)
    endings = [note for note in report.notes if note.startswith("run ")]
    assert len(endings) == 3 and any("interrupted (SIGTERM) at step" in note for note in endings)
    below = [w for w in warnings if w.startswith("warning: ") and "below right-branching" in w]
    assert len(below) == 1 and str(three_runs["budget"]) in below[0]


def test_models_fits_80_columns_without_cutting_a_name(tmp_path: Path) -> None:
    env = dict(os.environ, TTY_COMPATIBLE="1", COLUMNS="80", NO_COLOR="1")
    shown = subprocess.run([sys.executable, "-m", "depinduce", "models"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    text = re.sub(r"\x1b\[[0-9;]*m", "", shown.stdout)  # styles (bold) without colour
    listed = subprocess.run([sys.executable, "-m", "depinduce", "models", "--json"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    backends = json.loads(listed.stdout)["backends"]
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    words = set(text.split())
    for row in backends:
        assert row["name"] in words
        assert set(row["own_decoders"]) <= words


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda_is_one_line_for_parse_train_and_the_api(tmp_path: Path) -> None:
    import depinduce

    expected = (f"--device cuda: CUDA is not available on this machine (torch {torch.__version__} was built "
                "without CUDA)") if torch.version.cuda is None else "--device cuda: CUDA is not available"
    for args in (["parse", "--model", BASELINE, "--device", "cuda", "-"], ["parse", "--model", "default", "--device",
                                                                            "cuda", "-"],
                 ["train", "--model", "structformer", "--device", "cuda", "--data", str(tmp_path)]):
        result = CliRunner().invoke(cli, args, input="the dog\n")
        assert result.exit_code == 2 and result.stdout == "", (args, result.output)
        assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(expected), result.stderr
    # the same line in Python's words: the parameter, not the option
    with pytest.raises(ResourceError, match=re.escape(expected.replace("--device cuda:", "device='cuda':"))):
        depinduce.load(BASELINE, device="cuda")
