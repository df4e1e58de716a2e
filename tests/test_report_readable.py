"""What a researcher reads in ``depinduce report`` must be right and readable: files named relative to the
current folder (or by their ``--label``) in every format, the label kept in the wide layout of one test file,
LaTeX notes typeset as lists that compile (``--`` and backticks kept as written), and a plotted mean that never
averages fewer seeds where one stopped early."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import shutil
import statistics
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_support import ok
from training_support import make_data, register_plugin

TRAIN = ["--model", "tiny-mlm", "--threads", "1", "--quiet", "--set", "epochs=3", "--set", "batch_tokens=200",
         "--set", "lr=1e-2", "--set", "select=dev_uda"]
FORMATS = ("table", "markdown", "latex", "csv", "json")


def _invoke(*args: str) -> str:
    return ok(list(args))


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder holding ``data`` (with test.conllu, .trees, .txt) and ``runs`` (seeds 0 and 1, three epochs),
    trained once for the module with the test-only ``tiny-mlm`` plugin registered."""
    import torch

    root = tmp_path_factory.mktemp("readable")
    site = root / "site"
    register_plugin(site)
    before = torch.get_num_threads()
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(site))
        torch.set_num_threads(1)
        data = make_data(root / "data", n_train=150, n_dev=25)
        extra = make_data(root / "extra", n_train=5, n_dev=30, seed=7)
        for suffix in ("conllu", "trees", "txt"):
            shutil.copy(extra / f"dev.{suffix}", data / f"test.{suffix}")
        _invoke("train", "--data", str(data), "--out", str(root / "runs"), "--seeds", "0,1", *TRAIN)
        _invoke("report", str(root / "runs"), "--format", "json")  # the scores cached once for every test
        try:
            yield root
        finally:
            torch.set_num_threads(before)


def test_every_format_names_files_relative_to_the_current_folder(trained: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    runs, test = str(trained / "runs"), str(trained / "data" / "test.conllu")  # given as absolute paths
    monkeypatch.chdir(trained)
    for fmt in FORMATS:
        for labels in ([], ["--test", test]):
            out = _invoke("report", runs, *labels, "--format", fmt)
            assert str(trained) not in out, (fmt, out)
    table = _invoke("report", runs)
    assert "(STEM.trees): data/test.trees" in table and "(STEM.txt): data/test.txt" in table
    assert "- run runs/seed-0: " in table and "- run runs/seed-1: " in table
    assert r"data/\allowbreak{}test.trees" in _invoke("report", runs, "--format", "latex")
    rows = list(csv.DictReader(io.StringIO(_invoke("report", runs, "--format", "csv"))))
    assert {row["test"] for row in rows} == {"data/test.conllu"} and {row["test_label"] for row in rows} == {"test"}
    [group] = json.loads(_invoke("report", runs, "--format", "json"))["groups"]
    assert group["test"] == "data/test.conllu"
    assert [run["path"] for run in group["runs"]] == ["runs/seed-0", "runs/seed-1"]
    # from a sibling folder the path climbs out of it; a --label names the siblings in the notes instead
    (trained / "elsewhere").mkdir(exist_ok=True)
    monkeypatch.chdir(trained / "elsewhere")
    rows = list(csv.DictReader(io.StringIO(_invoke("report", runs, "--format", "csv"))))
    assert {row["test"] for row in rows} == {"../data/test.conllu"}
    labelled = _invoke("report", runs, "--test", test, "--label", "WSJ 23")
    assert "(STEM.trees): WSJ 23" in labelled and "(STEM.txt): WSJ 23" in labelled
    assert "test.trees" not in labelled and str(trained) not in labelled


def test_the_wide_layout_keeps_the_label_of_a_single_test_file(trained: Path) -> None:
    runs, test = str(trained / "runs"), str(trained / "data" / "test.conllu")
    for fmt, header, row, first in (("table", 0, 2, ["model", "test", "n"]),
                                    ("markdown", 0, 2, ["model", "test", "n"]),
                                    ("latex", 3, 5, ["Model", "Test", "$n$"])):
        lines = _invoke("report", runs, "--test", test, "--label", "WSJ 23", "--layout", "wide", "--format", fmt,
                        "--no-notes").splitlines()
        assert re.split(r"\s*[|&]\s*|\s{2,}", lines[header].strip("| "))[:3] == first, lines
        assert "WSJ 23" in lines[row], (fmt, lines)
    # unlabelled, one file: the column is left out (the stem "test" would say nothing)
    plain = _invoke("report", runs, "--test", test, "--layout", "wide").splitlines()
    assert plain[0].split()[:2] == ["model", "n"]


def _notes_in(document: dict) -> int:
    return len(document["protocol"]) + len(document["notes"])


def test_latex_notes_are_lists_with_code_in_typewriter_and_hyphens_kept(trained: Path) -> None:
    runs = str(trained / "runs")
    document = json.loads(_invoke("report", runs, "--format", "json"))
    latex = _invoke("report", runs, "--format", "latex")
    body = latex.split(r"\end{tabular}}", 1)[1]
    assert body.count(r"\begin{itemize}") == body.count(r"\end{itemize}") == 3  # dependency, UF1, notes
    assert body.count(r"\item ") == _notes_in(document)  # one item a line, none run together
    assert r"\texttt{depinduce parse}" in body and "-{}-decoder" in body
    assert "--" not in body.replace("-{}-", "")  # no en dash where the text has two hyphens
    assert "`" not in body and "''" not in body  # PTB's `` and '' typeset as themselves, not as quotes
    assert r"\textasciigrave{}\textasciigrave{} \textquotesingle{}\textquotesingle{}" in body

    from depinduce.api.reporting.render import latex_escape, latex_note

    assert latex_note("`--seeds`") == r"\texttt{-{}-seeds}"
    assert latex_note("unless --decoder, as `depinduce parse` + `depinduce eval`") == (
        r"unless -{}-decoder, as \texttt{depinduce parse} + \texttt{depinduce eval}")
    assert latex_note("removes `` '' and a lone ` (a/b)") == (
        r"removes \textasciigrave{}\textasciigrave{} \textquotesingle{}\textquotesingle{} and a lone "
        r"\textasciigrave{} (a/\allowbreak{}b)")
    assert latex_escape("n − 1, a–b, x---y") == "n $-$ 1, a--b, x-{}-{}-y"


def _compile(latex: str, folder: Path) -> str:
    """``latex`` in a one-column article of 455 pt text width, through pdflatex; the log (asserted clean)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "table.tex").write_text(latex)
    (folder / "doc.tex").write_text(
        "\\documentclass{article}\n\\IfFileExists{booktabs.sty}{\\usepackage{booktabs}}"
        "{\\newcommand\\toprule{\\hline}\\newcommand\\midrule{\\hline}\\newcommand\\bottomrule{\\hline}}\n"
        "\\setlength{\\textwidth}{455pt}\n\\begin{document}\n\\input{table.tex}\n\\end{document}\n")
    done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"], cwd=folder,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:]
    log = (folder / "doc.log").read_text(errors="replace")
    overfull = [line for line in log.splitlines() if line.startswith("Overfull \\hbox")]
    assert overfull == [], overfull  # neither the table nor a note runs past the text width
    return log


def test_every_latex_form_compiles_under_pdflatex(trained: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed (apt-get install texlive-latex-base texlive-latex-recommended): "
                    "the LaTeX forms are checked for ASCII and balanced braces only")
    from depinduce.api.reporting import papers

    data, runs = trained / "data", str(trained / "runs")
    # the paper's rows and their source note too: a published figure for the test model on this data
    figure = papers.PaperFigure(36.2, 0.1, "A paper, Table 9 (UAS)", conversion="penn2malt")
    monkeypatch.setitem(papers.PAPER_FIGURES, ("tiny-mlm", "ptb-wsj-test"), {"dda": figure})
    manifest = {"command": "ptb", "source": {"kind": "ldc", "head_rules": "penn2malt", "missing_sections": []}}
    monkeypatch.chdir(trained)
    two_files = ["--test", str(data / "test.conllu"), "--label", "WSJ 23", "--test", str(data / "dev.conllu"),
                 "--label", "dev"]
    one_labelled = ["--test", str(data / "test.conllu"), "--label", "WSJ 23"]
    forms = 0
    try:
        (data / "manifest.json").write_text(json.dumps(manifest))
        for layout in ("long", "wide"):
            for notes in ("--notes", "--no-notes"):
                for tests in ([], one_labelled, two_files):
                    latex = _invoke("report", runs, "--format", "latex", "--layout", layout, notes, *tests)
                    assert latex.isascii() and "(paper)" in latex
                    _compile(latex, tmp_path / f"form-{forms}")
                    forms += 1
    finally:
        (data / "manifest.json").unlink()
    assert forms == 12
    if shutil.which("pdftotext") is not None:  # what a reader sees: two hyphens, not an en dash
        shown = subprocess.run(["pdftotext", str(tmp_path / "form-0" / "doc.pdf"), "-"], capture_output=True,
                               text=True, timeout=60, check=True).stdout
        assert "--decoder" in shown and "depinduce parse" in shown and "\u2013decoder" not in shown


def _truncated(trained: Path, tmp_path: Path, keep: int) -> Path:
    """A copy of the runs whose seed 1 recorded only its first ``keep`` evaluations (it stopped early)."""
    runs = tmp_path / "runs"
    shutil.copytree(trained / "runs", runs)
    metrics = runs / "seed-1" / "metrics.jsonl"
    metrics.write_text("".join(metrics.read_text().splitlines(keepends=True)[:keep]))
    return runs


def test_the_plotted_mean_covers_only_steps_every_seed_reached(trained: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from depinduce.api.reporting import build_report
    from depinduce.api.reporting.plot import curve

    runs = _truncated(trained, tmp_path, keep=2)
    report = build_report([runs], warn=lambda line: None)
    [(label, members)] = report.curve_groups()
    curves = [curve(run, "dev_ppl")[:3] for run in members]
    [(steps0, _, values0), (steps1, _, values1)] = curves
    assert len(steps0) == 3 and len(steps1) == 2 and steps0[:2] == steps1  # seed 1 stopped one evaluation early
    # the figure as drawn (kept from plt.close): its thick line is the mean over both seeds, never seed 0 alone
    figures = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda figure=None: (figures.append(figure), close(figure)))
    report.plot(tmp_path / "curves.svg", metric="dev_ppl")
    [axes] = figures[0].axes
    [thick] = [line for line in axes.get_lines() if line.get_linewidth() == 2.0]
    assert list(thick.get_xdata()) == steps1  # not steps0: at the last step the line would jump to seed 0 alone
    assert list(thick.get_ydata()) == pytest.approx([statistics.fmean(pair) for pair in zip(values0, values1)])
    assert thick.get_label() == f"{label} (n=2; mean to step {steps1[-1]:g}, where the shortest seed ends)"
    assert "only where every seed has a point" in axes.get_title()
    text = (tmp_path / "curves.svg").read_text()
    assert "where the shortest seed ends" in text and "only where every seed has a point" in text

    from depinduce.api.reporting.plot import legend, mean_curve

    xs, means, sds = mean_curve(curves, "step")
    assert xs == steps1 and sds == pytest.approx([statistics.stdev(pair) for pair in zip(values0, values1)])
    # against minutes (or tokens): a grid from the later start to the earlier end, each point both seeds' mean
    early, late = ([0.0, 1.0, 2.0], [0.0, 1.0, 2.0], [10.0, 20.0, 30.0]), ([3.0, 4.0], [0.5, 1.5], [40.0, 40.0])
    xs, means, sds = mean_curve([early, late], "minutes")
    assert len(xs) == 200 and xs[0] == 0.5 and xs[-1] == 1.5  # not 0 to 2: there one seed alone
    assert means[0] == pytest.approx(27.5) and means[-1] == pytest.approx(32.5) and sds[-1] > 0
    assert all(math.isfinite(m) for m in means)
    # no span every seed covers (the first seed's warm-up, say): no mean, and the legend says why
    first, apart = ([0.0, 1.0], [0.0, 0.5], [1.0, 2.0]), ([0.0, 1.0], [2.0, 3.0], [1.0, 2.0])
    assert mean_curve([first, apart], "minutes") == ([], [], [])
    assert "no mean" in legend("x", [first, apart], "minutes")
