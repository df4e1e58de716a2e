"""``train --seeds`` and ``depinduce report``: several seeds trained, scored through parse + eval (cached in each
run), grouped by configuration and summarised; learning curves; paper figures only for the papers' data."""

from __future__ import annotations

import csv
import io
import json
import shutil
import statistics
from pathlib import Path

import pytest
import torch
import yaml
from click.testing import CliRunner

from depinduce.cli.main import cli
from depinduce.api.reporting import build_report
from depinduce.api.reporting.papers import paper_figures
from training_support import make_data, one_thread, tiny_plugin  # noqa: F401 (fixtures)

pytestmark = pytest.mark.lower_bounds  # rich's tables and tqdm, quickly (scripts/check_lower_bounds.py)

TRAIN = ["--model", "tiny-mlm", "--threads", "1", "--quiet", "--set", "epochs=2", "--set", "batch_tokens=200",
         "--set", "lr=1e-2", "--set", "select=dev_uda"]
METRICS = ("dda", "uda", "uf1_sentence", "uf1_corpus", "perplexity")


def _invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def _data(root: Path) -> Path:
    """A tiny data folder with a test split: test.conllu, test.trees (gold trees) and test.txt (model view)."""
    data = make_data(root / "data", n_train=150, n_dev=25)
    extra = make_data(root / "extra", n_train=5, n_dev=30, seed=7)
    for suffix in ("conllu", "trees", "txt"):
        shutil.copy(extra / f"dev.{suffix}", data / f"test.{suffix}")
    return data


def _independent_scores(run: Path, data: Path, tmp: Path) -> dict[str, float]:
    """One run's test scores through the command line's parse, eval and perplexity, one file at a time."""
    pred = tmp / f"{run.name}.conllu"
    pred.write_text(_invoke("parse", "--model", str(run), "--input-format", "conllu", "--quiet",
                            str(data / "test.conllu")))
    dependency = json.loads(_invoke("eval", "--gold", str(data / "test.conllu"), "--pred", str(pred), "--json"))
    trees = tmp / f"{run.name}.trees"
    trees.write_text(_invoke("parse", "--model", str(run), "--input-format", "conllu", "--format", "brackets",
                             "--quiet", str(data / "test.conllu")))
    constituency = json.loads(_invoke("eval", "--gold", str(data / "test.trees"), "--pred", str(trees), "--json"))
    ppl = json.loads(_invoke("perplexity", "--model", str(run), "--json", "--quiet", str(data / "test.txt")))
    return {"dda": dependency["metrics"]["dda"], "uda": dependency["metrics"]["uda"],
            "uf1_sentence": constituency["metrics"]["uf1_sentence"],
            "uf1_corpus": constituency["metrics"]["uf1_corpus"], "perplexity": ppl["perplexity"]}


@pytest.fixture
def two_seeds(tmp_path: Path, tiny_plugin: Path, one_thread) -> tuple[Path, Path]:
    data = _data(tmp_path)
    runs = tmp_path / "runs"
    _invoke("train", "--data", str(data), "--out", str(runs), "--seeds", "0,1", *TRAIN)
    return data, runs


def test_report_means_and_sds_match_per_seed_parse_and_eval(two_seeds: tuple[Path, Path], tmp_path: Path) -> None:
    data, runs = two_seeds
    assert sorted(p.name for p in runs.iterdir() if not p.name.startswith(".")) == ["seed-0", "seed-1"]
    seeds = [runs / "seed-0", runs / "seed-1"]
    assert [json.loads((r / "manifest.json").read_text())["seed"] for r in seeds] == [0, 1]
    per_seed = [_independent_scores(run, data, tmp_path) for run in seeds]
    assert per_seed[0] != per_seed[1]  # two seeds, two models: the sd measures something

    document = json.loads(_invoke("report", str(runs), "--format", "json"))
    [group] = document["groups"]
    assert group["n"] == 2 and group["model"] == "tiny-mlm"
    assert "seed" not in group["recipe"]["train"]
    for metric in METRICS:
        values = [scores[metric] for scores in per_seed]
        stat = group["metrics"][metric]
        assert stat["n"] == 2
        assert stat["mean"] == pytest.approx(statistics.fmean(values), rel=1e-9)
        assert stat["sd"] == pytest.approx(statistics.stdev(values), rel=1e-9)  # sample sd (n - 1)
        assert stat["min"] == pytest.approx(min(values)) and stat["max"] == pytest.approx(max(values))
        assert [r["scores"][metric] for r in group["runs"]] == pytest.approx(values, rel=1e-9)
    assert group["metrics"]["las"] is None  # an unsupervised model's labels measure nothing
    assert any("sample standard deviation" in note for note in document["notes"])
    assert any("DDA (= UAS)" in line for line in document["protocol"])

    # every text format shows the same numbers (2 decimals), the protocol under the table; CSV at full precision
    expected = [f"{group['metrics'][m]['mean']:.2f} ± {group['metrics'][m]['sd']:.2f}" for m in METRICS]
    table = _invoke("report", str(runs))
    markdown = _invoke("report", str(runs), "--format", "markdown")
    latex = _invoke("report", str(runs), "--format", "latex")
    for cell in expected:
        assert cell in table and cell in markdown
        assert cell.replace("±", r"$\pm$") in latex
    for text in (table, markdown, latex):
        assert "DDA (= UAS)" in text and "sample standard deviation" in text
    assert markdown.startswith("| group |") and r"\begin{tabular}" in latex
    rows = list(csv.DictReader(io.StringIO(_invoke("report", str(runs), "--format", "csv"))))
    assert [row["metric"] for row in rows] == list(METRICS)
    for row in rows:
        stat = group["metrics"][row["metric"]]
        assert float(row["mean"]) == stat["mean"] and float(row["sd"]) == stat["sd"] and row["n"] == "2"


def test_seeds_in_one_process_equal_scheduler_launched_runs(two_seeds: tuple[Path, Path], tmp_path: Path) -> None:
    data, runs = two_seeds
    alone = tmp_path / "array" / "seed-1"  # as one task of a SLURM array would make it
    _invoke("train", "--data", str(data), "--out", str(alone), "--seed", "1", *TRAIN)
    ours = torch.load(runs / "seed-1" / "model.pt", weights_only=True)
    theirs = torch.load(alone / "model.pt", weights_only=True)
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    # a folder of scheduler-made runs reads like a --seeds parent: one group with the same numbers
    shutil.copytree(runs / "seed-0", tmp_path / "array" / "seed-0")
    both = [json.loads(_invoke("report", str(folder), "--format", "json"))["groups"][0]["metrics"]
            for folder in (runs, tmp_path / "array")]
    assert both[0] == both[1]
    # resuming skips finished runs, starts a missing seed with its siblings' settings, and writes nothing else
    result = CliRunner().invoke(cli, ["train", "--out", str(runs), "--seeds", "3", "--resume", "--data", str(data),
                                      "--threads", "1"])
    assert result.exit_code == 0, result.output
    assert result.stderr.count("already finished; skipped") == 2
    assert sorted(p.name for p in runs.iterdir() if not p.name.startswith(".")) == ["seed-0", "seed-1", "seed-2"]
    configs = [yaml.safe_load((runs / f"seed-{k}" / "config.yaml").read_text()) for k in (0, 2)]
    assert configs[1]["train"].pop("seed") == 2 and configs[0]["train"].pop("seed") == 0
    assert configs[0] == configs[1]
    # the Python API: the list of run directories, one per seed
    import depinduce

    made = depinduce.train("tiny-mlm", data, runs, seeds=[3], threads=1, quiet=True, epochs=1, batch_tokens=200)
    assert made == [runs / "seed-3"] and json.loads((runs / "seed-3" / "manifest.json").read_text())["seed"] == 3


def test_scores_are_cached_and_remeasured_when_the_test_file_changes(two_seeds: tuple[Path, Path],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    data, runs = two_seeds
    first = build_report([runs])
    assert all((runs / name / "scores.json").is_file() for name in ("seed-0", "seed-1"))
    calls: list[Path] = []
    import depinduce.api.reporting.scores as scores

    real = scores.measure

    def counting(run, test, **options):  # type: ignore[no-untyped-def]
        calls.append(run.path)
        return real(run, test, **options)

    monkeypatch.setattr(scores, "measure", counting)
    again = build_report([runs])
    assert calls == [] and all(s.cached for g in again.groups for _, s in g.runs)
    assert again.as_dict()["groups"][0]["metrics"] == first.as_dict()["groups"][0]["metrics"]
    # one sentence fewer in the test file: a new checksum, measured again (and the old entry kept beside it)
    text = (data / "test.conllu").read_text()
    (data / "test.conllu").write_text(text[:text.rindex("\n\n", 0, len(text) - 2) + 2])
    for sibling in ("test.trees", "test.txt"):  # the same sentences
        lines = (data / sibling).read_text().splitlines(keepends=True)
        (data / sibling).write_text("".join(lines[:-1]))
    changed = build_report([runs])
    assert len(calls) == 2 and not any(s.cached for g in changed.groups for _, s in g.runs)
    entries = json.loads((runs / "seed-0" / "scores.json").read_text())["entries"]
    assert len(entries) == 2
    # a new model.pt (e.g. a resumed run found a better one) is not served the old scores either
    (runs / "seed-0" / "model.pt").write_bytes((runs / "seed-1" / "model.pt").read_bytes())
    build_report([runs])
    assert len(calls) == 3


def test_grouping_splits_recipes_and_skips_unfinished_runs(two_seeds: tuple[Path, Path], tmp_path: Path) -> None:
    data, runs = two_seeds
    other = tmp_path / "other"
    _invoke("train", "--data", str(data), "--out", str(other), "--seeds", "1", *TRAIN, "--set", "lr=5e-3")
    unfinished = tmp_path / "unfinished"
    shutil.copytree(runs / "seed-0", unfinished / "seed-0")
    manifest = json.loads((unfinished / "seed-0" / "manifest.json").read_text())
    del manifest["runs"][-1]["finished"]
    (unfinished / "seed-0" / "manifest.json").write_text(json.dumps(manifest))
    result = CliRunner().invoke(cli, ["report", str(runs), str(other), str(unfinished), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert "warning: skipped" in result.stderr and "not finished" in result.stderr
    groups = json.loads(result.stdout)["groups"]
    assert [g["n"] for g in groups] == [2, 1]
    assert groups[0]["label"] == "tiny-mlm (lr=0.01)" and groups[1]["label"] == "tiny-mlm (lr=0.005)"
    assert groups[1]["metrics"]["dda"]["sd"] is None  # n = 1: no sd
    table = _invoke("report", str(runs), str(other))
    lone = next(line for line in table.splitlines() if line.startswith("tiny-mlm (lr=0.005)") and " DDA " in line)
    assert "± –" not in table and "±" not in lone.split(" DDA ")[1].split()[1]  # a single run: its value alone


def test_plot_writes_learning_curves(two_seeds: tuple[Path, Path], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    _, runs = two_seeds
    records = [json.loads(line) for line in (runs / "seed-0" / "metrics.jsonl").read_text().splitlines()]
    assert all(r["wall_s"] >= r["train_s"] > 0 for r in records)  # wall-clock time is recorded
    assert [r["wall_s"] for r in records] == sorted(r["wall_s"] for r in records)
    target = tmp_path / "curves.png"
    result = CliRunner().invoke(cli, ["report", str(runs), "--plot", str(target), "--metric", "dev_ppl"])
    assert result.exit_code == 0, result.output
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "dev_ppl" in result.stderr
    bad = CliRunner().invoke(cli, ["report", str(runs), "--plot", str(tmp_path / "c.png"), "--metric", "dev_nope"])
    assert bad.exit_code == 2 and "dev_nope" in bad.output and "dev_uda" in bad.output


def test_hostile_inputs(tmp_path: Path, tiny_plugin: Path) -> None:
    plain = tmp_path / "plain"
    (plain / "sub").mkdir(parents=True)
    for args, expected in (
        (["report", str(plain)], "not a run directory"),
        (["report", str(tmp_path / "absent")], "no such folder"),
        (["train", "--model", "tiny-mlm", "--out", str(tmp_path / "r"), "--seeds", "2", "--seed", "1"],
         "--seeds and --seed"),
        (["train", "--model", "tiny-mlm", "--out", str(tmp_path / "r"), "--seeds", "a,b"], "--seeds"),
        (["train", "--model", "tiny-mlm", "--out", str(tmp_path / "r"), "--seeds", "1,1"], "repeated"),
        (["train", "--out", str(tmp_path / "r"), "--seeds", "2", "--resume"], "nothing to resume"),
        (["train", "--out", str(tmp_path / "r"), "--seeds", "2", "--resume", "--set", "lr=1"], "cannot change"),
    ):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, (args, result.output)
        assert expected in result.output and "Traceback" not in result.output
    assert not (tmp_path / "r").exists()


def test_paper_figures_only_for_the_papers_data(tmp_path: Path) -> None:
    def data_dir(name: str, kind: str, head_rules: str = "penn2malt") -> Path:
        folder = tmp_path / name
        folder.mkdir()
        manifest = {"command": "ptb", "source": {"kind": kind, "head_rules": head_rules, "missing_sections": []},
                    "options": {"keep_punct": False}}
        (folder / "manifest.json").write_text(json.dumps(manifest))
        return folder

    ldc = data_dir("ldc", "ldc")
    match = paper_figures("structformer", ldc, ldc / "test.conllu")
    assert match.figures["dda"].value == 36.2 and match.figures["uf1_sentence"].value == 54.0
    assert "Table 4" in match.figures["dda"].source
    assert paper_figures("structformer", ldc, ldc / "wsj10.conllu").figures == {}  # not section 23
    collins = data_dir("collins", "ldc", "collins")
    other_rules = paper_figures("structformer", collins, collins / "test.conllu")
    assert "dda" not in other_rules.figures and "uf1_sentence" in other_rules.figures
    assert any("penn2malt dependencies" in note for note in other_rules.notes)
    udgn = paper_figures("udgn", ldc, ldc / "test.conllu")  # Stanford dependencies: only its perplexity
    assert set(udgn.figures) == {"perplexity"} and any("stanford" in note for note in udgn.notes)
    sample = data_dir("sample", "nltk-sample")
    nothing = paper_figures("structformer", sample, sample / "test.conllu")
    assert nothing.figures == {} and "NLTK's 10% sample" in nothing.notes[0]


def test_the_papers_figure_stands_beside_ours_marked_as_the_papers(two_seeds: tuple[Path, Path],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from depinduce.api.reporting import papers

    data, runs = two_seeds
    figure = papers.PaperFigure(36.2, 0.1, "A paper, Table 9 (UAS)", conversion="penn2malt")
    monkeypatch.setitem(papers.PAPER_FIGURES, ("tiny-mlm", "ptb-wsj-test"), {"dda": figure})
    manifest = {"command": "ptb", "source": {"kind": "nltk-sample", "head_rules": "penn2malt"}}
    (data / "manifest.json").write_text(json.dumps(manifest))
    table = _invoke("report", str(runs))
    assert "(paper)" not in table and "NLTK's 10% sample" in table  # the sample is not the paper's data
    manifest["source"] = {"kind": "ldc", "head_rules": "penn2malt", "missing_sections": []}
    (data / "manifest.json").write_text(json.dumps(manifest))
    table = _invoke("report", str(runs))
    dda = next(line for line in table.splitlines() if " DDA " in line)
    assert "36.20 ± 0.10 (paper)" in dda and "A paper, Table 9 (UAS)" in table
    [group] = json.loads(_invoke("report", str(runs), "--format", "json"))["groups"]
    assert group["paper"]["dda"]["value"] == 36.2 and group["paper"]["dda"]["source"] == figure.source


def _table_lines(text: str) -> list[str]:
    return text.split("\n\n", 1)[0].splitlines()


def test_wide_layout_short_labels_and_notes_grouped_by_protocol(two_seeds: tuple[Path, Path]) -> None:
    data, runs = two_seeds
    [group] = json.loads(_invoke("report", str(runs), "--format", "json"))["groups"]
    wide = _invoke("report", str(runs), "--layout", "wide")
    header, _, row, *_ = _table_lines(wide)
    assert header.split()[:4] == ["model", "n", "DDA", "UDA"] and "perplexity" in header
    for metric in METRICS:  # models x metrics: one row holds every metric's mean ± sd
        stat = group["metrics"][metric]
        assert f"{stat['mean']:.2f} ± {stat['sd']:.2f}" in row
    # the test file is named by its stem, or by --label; never by its absolute path
    long_table = _table_lines(_invoke("report", str(runs)))
    assert all(line.split()[1] == "test" for line in long_table[2:]) and str(data) not in "\n".join(long_table)
    labelled = _invoke("report", str(runs), "--test", str(data / "test.conllu"), "--label", "WSJ23",
                       "--test", str(data / "dev.conllu"), "--label", "dev", "--layout", "wide")
    assert [line.split()[1] for line in _table_lines(labelled)[2:]] == ["WSJ23", "dev"]
    bad = CliRunner().invoke(cli, ["report", str(runs), "--test", str(data / "test.conllu"), "--label", "a",
                                   "--label", "b"])
    assert bad.exit_code == 2 and "--label" in bad.output and "Traceback" not in bad.output
    # a single run shows its value, not "± –"
    single = _table_lines(_invoke("report", str(runs / "seed-0"), "--layout", "wide"))
    assert "±" not in single[2] and "–" not in single[2]
    # the protocol grouped: every dependency line together, then every UF1 line
    blocks = {part.split("\n", 1)[0]: part for part in wide.split("\n\n")[1:]}
    dependency, uf1 = blocks["Dependency protocol (DDA, UDA, LAS):"], blocks["UF1 protocol (constituency):"]
    assert "DDA (= UAS)" in dependency and "UF1" not in dependency
    assert "UF1 sentence-level" in uf1 and "UF1 evaluation: " in uf1 and "DDA (= UAS)" not in uf1
    assert list(blocks)[:2] == ["Dependency protocol (DDA, UDA, LAS):", "UF1 protocol (constituency):"]
    assert "sample standard deviation" in blocks["Notes:"]
    bare = _invoke("report", str(runs), "--layout", "wide", "--no-notes", "--format", "markdown")
    assert bare.count("\n") == 3 and "protocol" not in bare


def test_latex_is_ascii_with_balanced_braces(two_seeds: tuple[Path, Path]) -> None:
    """(pdflatex compiles every LaTeX form within a paper's text width: test_report_readable.py.)"""
    import re

    _, runs = two_seeds
    for layout in ("long", "wide"):
        latex = _invoke("report", str(runs), "--format", "latex", "--layout", layout)
        assert latex.isascii() and r"$\cap$" in latex  # UDA's "∩" typeset, not passed to pdflatex raw
        unescaped = re.sub(r"\\[{}]", "", latex)
        depth = 0
        for ch in unescaped:
            depth += {"{": 1, "}": -1}.get(ch, 0)
            assert depth >= 0
        assert depth == 0
        assert str(runs.parent / "data") not in latex  # no absolute path, in the table or the notes


def test_plot_titles_axes_in_words_embeds_truetype_and_defaults_to_a_dev_metric(two_seeds: tuple[Path, Path],
                                                                                 tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    _, runs = two_seeds
    svg = tmp_path / "curves.svg"
    result = CliRunner().invoke(cli, ["report", str(runs), "--plot", str(svg), "--x", "tokens"])
    assert result.exit_code == 0, result.output
    text = svg.read_text()
    assert "dev UDA (%)" in text and "training tokens seen" in text and "dev_uda" not in text
    pdf = tmp_path / "curves.pdf"
    assert CliRunner().invoke(cli, ["report", str(runs), "--plot", str(pdf), "--x", "minutes"]).exit_code == 0
    assert b"/CIDFontType2" in pdf.read_bytes() and b"/Type3" not in pdf.read_bytes()  # TrueType, not Type 3
    # runs that selected by training loss (another backend's scale) are still plotted on a dev metric
    for seed in ("seed-0", "seed-1"):
        path = runs / seed / "metrics.jsonl"
        records = [json.loads(line) for line in path.read_text().splitlines()]
        path.write_text("".join(json.dumps({**r, "select": "train_loss"}) + "\n" for r in records))
    assert build_report([runs]).plot(tmp_path / "c.png") == "dev_uda"
