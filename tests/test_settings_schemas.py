"""Nothing lost, nothing trusted blindly: every file depinduce reads back is checked against its schema (one line
naming the file and the field), a damaged run is skipped with a warning where others remain, a resume continues
the run that was started (data folder, budgets, seeds), cached scores are served only for what they were computed
from, non-finite numbers are refused, a broken plugin distribution takes nothing down, and a run stopped by
SIGTERM exits non-zero."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from click.testing import CliRunner

from depinduce.cli.main import cli
from depinduce.data.run_files import read_card
from depinduce.errors import InputError, ModelError
from depinduce.models.bundled import bundled_dir
from depinduce.training.engine import TrainOptions, train
from training_support import depinduce_command, make_data, one_thread, subprocess_env, tiny_plugin  # noqa: F401

FAST = ("epochs=1", "batch_tokens=100", "select=dev_uda")


def _quiet(_: str) -> None:
    pass


def _train(data: Path, run: Path, *settings: str, **options) -> Path:
    train(TrainOptions(data_dir=data, run_dir=run, model="tiny-mlm", quiet=True, threads=1,
                       overrides=(*FAST, *settings), **options), log=_quiet)
    return run


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return make_data(tmp_path / "data", n_train=60, n_dev=12)


@pytest.fixture
def run(tmp_path: Path, data: Path, tiny_plugin: Path, one_thread) -> Path:
    return _train(data, tmp_path / "runs" / "run")


def _edit_json(path: Path, edit) -> None:
    value = json.loads(path.read_text())
    edit(value)
    path.write_text(json.dumps(value))


def _one_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


EDITS = {
    "manifest runs": ("manifest.json", lambda m: m.update(runs=5), "field 'runs' must be a list, not 5"),
    "manifest data": ("manifest.json", lambda m: m.update(data="x"), "field 'data' must be a mapping, not 'x'"),
    "manifest outcome": ("manifest.json", lambda m: m["runs"][-1]["outcome"].update(step="abc"),
                         "field 'runs[0].outcome.step' must be an integer, not 'abc'"),
    "vocab normalization": ("vocab.json", lambda v: v.update(normalization="x"),
                            "field 'normalization' must be a mapping, not 'x'"),
    "vocab min_freq": ("vocab.json", lambda v: v.update(min_freq="abc"),
                       "field 'min_freq' must be an integer, not 'abc'"),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_a_wrong_type_in_a_run_file_is_one_line_naming_the_file_and_the_field(run: Path, case: str) -> None:
    name, edit, problem = EDITS[case]
    _edit_json(run / name, edit)
    line = _one_line(CliRunner().invoke(cli, ["parse", "--model", str(run), "-"], input="the dog\n"))
    assert line == f"{run / name}: {problem}"


def test_wrong_types_in_config_and_metrics_are_one_line_too(run: Path) -> None:
    config = yaml.safe_load((run / "config.yaml").read_text())
    (run / "config.yaml").write_text(yaml.safe_dump({**config, "model": 5}))
    line = _one_line(CliRunner().invoke(cli, ["parse", "--model", str(run), "-"], input="the dog\n"))
    assert line == f"{run / 'config.yaml'}: field 'model' must be a string, not 5"
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    records = (run / "metrics.jsonl").read_text().splitlines()
    records[0] = json.dumps({**json.loads(records[0]), "step": "abc"})
    (run / "metrics.jsonl").write_text("\n".join(records) + "\n")
    line = _one_line(CliRunner().invoke(cli, ["parse", "--model", str(run), "-"], input="the dog\n"))
    assert line == f"{run / 'metrics.jsonl'}:1: field 'step' must be an integer, not 'abc'"
    result = CliRunner().invoke(cli, ["report", str(run), "--plot", str(run.parent / "c.png")])
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert f"warning: skipped {run / 'metrics.jsonl'}:1: field 'step' must be an integer" in result.stderr


def test_the_model_card_is_checked(tmp_path: Path) -> None:
    card = json.loads((bundled_dir() / "card.json").read_text())
    assert read_card(bundled_dir() / "card.json")["backend"] == card["backend"]
    card["results"][0]["model"]["dda"] = "high"
    (tmp_path / "card.json").write_text(json.dumps(card))
    with pytest.raises(InputError, match=r"field 'results\[0\]\.model\.dda' must be a number from 0 to 100"):
        read_card(tmp_path / "card.json")


def test_a_run_with_a_broken_manifest_is_skipped_with_a_warning(tmp_path: Path, data: Path, run: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    broken = _train(data, tmp_path / "runs" / "broken")  # the newest: parse would take it
    _edit_json(broken / "manifest.json", lambda m: m.update(runs=5))
    monkeypatch.chdir(tmp_path)
    parsed = CliRunner().invoke(cli, ["parse", "-"], input="the dog\n")
    assert parsed.exit_code == 0, parsed.output
    assert f"warning: skipped runs/broken: {Path('runs/broken/manifest.json')}: field 'runs' must be a list" \
        in parsed.stderr
    assert "parse: using runs/run (the most recently finished run under runs/)" in parsed.stderr
    listed = CliRunner().invoke(cli, ["models", "--json"])
    assert listed.exit_code == 0, listed.output
    assert [Path(r["path"]).name for r in json.loads(listed.stdout)["runs"]] == ["run"]
    assert "warning: skipped runs/broken" in listed.stderr
    reported = CliRunner().invoke(cli, ["report", "runs", "--test", str(data / "dev.conllu"), "--format", "json"])
    assert reported.exit_code == 0, reported.output
    assert "warning: skipped runs/broken/manifest.json: field 'runs' must be a list" in reported.stderr


# ------------------------------------------------------------------------------------------------ resume


def test_a_resume_without_the_token_budget_keeps_the_recorded_one(tmp_path: Path, data: Path, tiny_plugin: Path,
                                                                  one_thread) -> None:
    out = _train(data, tmp_path / "budget", "epochs=5", max_tokens=250)
    first = json.loads((out / "manifest.json").read_text())
    assert first["settings"]["max_tokens"] == 250 and first["runs"][-1]["outcome"]["reason"] == "max_tokens"
    again = train(TrainOptions(run_dir=out, resume=True, quiet=True, threads=1), log=_quiet)
    assert again.reason == "max_tokens" and again.step == first["runs"][-1]["outcome"]["step"]
    more = train(TrainOptions(run_dir=out, resume=True, quiet=True, threads=1, max_tokens=500), log=_quiet)
    assert more.step > again.step  # a budget given again replaces the recorded one ...
    assert json.loads((out / "manifest.json").read_text())["settings"]["max_tokens"] == 500  # ... and is kept


def test_a_seed_never_started_resumes_on_its_siblings_data_and_budget(tmp_path: Path, data: Path,
                                                                     tiny_plugin: Path, monkeypatch) -> None:
    import depinduce

    out = tmp_path / "out"
    depinduce.train("tiny-mlm", data, out, seeds=[0, 1], threads=1, quiet=True, max_tokens=150, epochs=3,
                    batch_tokens=100)
    for name in os.listdir(out / "seed-1"):  # as if seed 0 had been stopped before seed 1 started
        (out / "seed-1" / name).unlink()
    (out / "seed-1").rmdir()
    monkeypatch.chdir(tmp_path)  # no data/ptb here: the old code started seed 1 on it
    result = CliRunner().invoke(cli, ["train", "--out", str(out), "--resume", "--threads", "1"])  # no --seeds
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "seed-1" / "manifest.json").read_text())
    assert manifest["data"]["dir"] == str(data.resolve()) and manifest["seed"] == 1
    assert manifest["settings"] == {"max_tokens": 150, "max_time": None, "seeds": [0, 1]}
    assert manifest["runs"][-1]["outcome"]["reason"] == "max_tokens"


@pytest.mark.slow
def test_a_run_stopped_by_sigterm_exits_143_and_is_recorded_as_interrupted(tmp_path: Path, data: Path,
                                                                          tiny_plugin: Path) -> None:
    out = tmp_path / "run"
    process = subprocess.Popen(depinduce_command("train", "--model", "tiny-mlm", "--data", str(data), "--out",
                                                 str(out), "--threads", "1", "--set", "epochs=50", "--set",
                                                 "sleep=0.05", "--set", "batch_tokens=100"),
                               env=subprocess_env(tiny_plugin), stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (out / "manifest.json").is_file() and time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read()
        time.sleep(0.05)
    time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 143, stderr[-2000:]
    outcome = json.loads((out / "manifest.json").read_text())["runs"][-1]["outcome"]
    assert outcome["reason"] == "signal" and outcome["signal"] == "SIGTERM"


# ------------------------------------------------------------------------------------------------ scores


def test_cached_scores_are_measured_again_when_edited_or_renamed(run: Path, data: Path) -> None:
    from depinduce.api.reporting import build_report

    calls: list[Path] = []

    def measure(run_, test, **_):  # type: ignore[no-untyped-def]
        calls.append(run_.path)
        return {"dda": 40.0, "uda": 50.0}, ["protocol"]

    def dda(warnings: list[str]) -> float:
        report = build_report([run], [data / "dev.conllu"], warn=warnings.append, measure_with=measure)
        return report.groups[0].runs[0][1].metrics["dda"]

    assert dda([]) == 40.0 and dda([]) == 40.0 and len(calls) == 1  # measured once, then cached
    cache = run / "scores.json"
    for value in (-5, True, 99.9):  # out of range, not a number, a plausible number typed in
        _edit_json(cache, lambda c: next(iter(c["entries"].values()))["metrics"].update(dda=value))
        warnings: list[str] = []
        assert dda(warnings) == 40.0
        assert any(w.startswith(f"warning: {cache}: the cached scores for") for w in warnings), warnings
    assert len(calls) == 4
    config = yaml.safe_load((run / "config.yaml").read_text())
    (run / "config.yaml").write_text(yaml.safe_dump({**config, "model": "renamed"}))
    dda([])
    assert len(calls) == 5  # the cached scores were computed for another model name


# ------------------------------------------------------------------------------------------------ numbers


def test_non_finite_weights_are_refused_in_one_line(run: Path) -> None:
    state = torch.load(run / "model.pt", weights_only=True)
    state = {name: torch.full_like(t, float("nan")) if t.is_floating_point() else t for name, t in state.items()}
    torch.save(state, run / "model.pt")
    for fmt in ("conllu", "brackets"):
        line = _one_line(CliRunner().invoke(cli, ["parse", "--model", str(run), "--format", fmt, "-"],
                                            input="the dog\n"))
        assert line.startswith(f"{run / 'model.pt'}: model 'tiny-mlm' has non-finite weights (NaN or infinity")


def test_non_finite_scores_reaching_a_decoder_name_the_sentence(run: Path) -> None:
    import depinduce
    from depinduce.io import read_sentences

    parser = depinduce.load(run)
    with torch.no_grad():
        for parameter in parser.backend.parameters():
            parameter.fill_(float("nan"))
    (run.parent / "in.txt").write_text("the dog\n")
    for fmt in ("conllu", "brackets"):
        with pytest.raises(ModelError, match=r"in\.txt:1: sentence 1: model 'tiny-mlm' gave non-finite"):
            list(parser.parse_file(run.parent / "in.txt", fmt=fmt, progress=False))
    assert read_sentences  # the pipeline, not a decoder's ValueError


# ------------------------------------------------------------------------------------------------ plugins


def test_a_malformed_entry_points_txt_takes_nothing_down(tmp_path: Path) -> None:
    dist = tmp_path / "site" / "broken-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("x = y\n[depinduce.models]\nbad\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    listed = subprocess.run([sys.executable, "-m", "depinduce", "models", "--json"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert "right-branching" in {row["name"] for row in json.loads(listed.stdout)["backends"]}
    assert f"warning: {dist}: unreadable entry points" in listed.stderr
    parsed = subprocess.run([sys.executable, "-m", "depinduce", "parse", "--model", "right-branching", "-"],
                            cwd=tmp_path, env=env, input="the dog\n", capture_output=True, text=True, timeout=120)
    assert parsed.returncode == 0 and parsed.stdout.splitlines()[0].startswith("1\tthe\t"), parsed.stderr


# ------------------------------------------------------------------------------------------------ devices


@pytest.mark.skipif(torch.cuda.device_count() > 7, reason="needs a machine without an eighth GPU")
@pytest.mark.parametrize("device", ["meta", "bogus", "cuda:7"])
def test_every_command_checks_its_device_in_one_line(run: Path, data: Path, device: str) -> None:
    import depinduce

    (run.parent / "in.txt").write_text("the dog\n")
    cached = CliRunner().invoke(cli, ["report", str(run), "--test", str(data / "dev.conllu")])
    assert cached.exit_code == 0, cached.output  # scores cached: a report with them still checks --device
    commands = [["parse", "--model", "right-branching", str(run.parent / "in.txt")],
                ["parse", "--model", str(run), str(run.parent / "in.txt")],
                ["perplexity", "--model", str(run), str(data / "dev.txt")],
                ["analyze", "heads", "--model", str(run), "--gold", str(data / "dev.conllu")],
                ["report", str(run), "--test", str(data / "dev.conllu")]]
    for args in commands:
        line = _one_line(CliRunner().invoke(cli, [*args, "--device", device]))
        assert line.startswith(f"--device {device}" if device.startswith("cuda") else "--device must be"), args
    with pytest.raises(depinduce.DepinduceError, match="device"):  # the API names its argument, not the option
        depinduce.load(run, device=device)
