"""How a run ended and how good its selected model is, read from the run's files: what ``parse``, ``models`` and
``report`` say about a run before using it, so an interrupted or undertrained run is never taken without a word.

The ending is the last (re)start's ``outcome`` in ``manifest.json`` (a start without one was killed, or is still
training); the selected model's dev scores are its evaluation in ``metrics.jsonl``; right-branching's on the same
dev data are the manifest's ``baselines``, recorded when training starts.  A run made before they were recorded
has them measured here, when its dev files are still where the manifest says and unchanged (else nothing is said).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from depinduce.checksum import sha256_file
from depinduce.data.files import try_read_json
from depinduce.data.run_files import read_manifest, read_metrics
from depinduce.display import printable, shell_command
from depinduce.errors import DepinduceError
from depinduce.io import read_sentences
from depinduce.io.filenames import DEV_CONLLU, DEV_TREES, MANIFEST_FILE, METRICS_FILE
from depinduce.io.outputs import RUN_FORMAT

if TYPE_CHECKING:
    from depinduce.training.evaluation import DevTreebank

BASELINE = "right-branching"  # the baseline every run's dev scores are compared with (:func:`baseline_metrics`)

# Dev metrics a baseline has too, in the order one is picked for the comparison when the run selected its model
# by another (dev_ppl, train_loss; dev_las, which right-branching's "dep" labels cannot score).
COMPARABLE = ("dev_uda", "dev_dda", "dev_uf1", "dev_uf1_corpus")
FINISHED = ("completed", "early_stop")


@dataclass(frozen=True)
class RunOutcome:
    """One run's ending and scores (None where its files do not say)."""

    path: Path
    model: str | None  # the backend trained
    reason: str | None  # completed | early_stop | max_time | max_tokens | signal; None: no outcome recorded
    step: int | None  # where it ended (for a run without an outcome: its last evaluation)
    signal: str | None = None  # SIGINT, SIGTERM
    select: str | None = None  # the metric the model was selected by
    selected: float | None = None  # the selected model's value of it
    metric: str | None = None  # the metric compared with right-branching (select, when it can be)
    score: float | None = None  # the selected model's value of ``metric``
    baseline: float | None = None  # right-branching's value of ``metric`` on the same dev data

    @property
    def finished(self) -> bool:
        """Ended as training meant to: all epochs, or early stopping."""
        return self.reason in FINISHED

    @property
    def below_baseline(self) -> bool:
        return self.score is not None and self.baseline is not None and self.score < self.baseline

    def ending(self) -> str:
        """How the run ended, e.g. ``interrupted (SIGINT) at step 26``."""
        at = f" at step {self.step}" if self.step is not None else ""
        if self.reason is None:
            last = f"; last evaluated at step {self.step}" if self.step is not None else ""
            return f"not finished (killed, or still training){last}"
        return {
            "completed": f"finished{at} (all epochs)",
            "early_stop": f"finished{at} (early stop)",
            "max_time": f"stopped by its time budget{at}",
            "max_tokens": f"stopped by its token budget{at}",
            "signal": f"interrupted ({self.signal or 'signal'}){at}",
        }.get(self.reason, f"ended ({self.reason}){at}")

    def scores(self) -> str:
        """The selected model's dev score beside right-branching's, e.g. ``selected dev_uda 13.3 (right-branching
        30.3)``, or ``selected dev_ppl 210.4, dev_uda 45.1 (right-branching 30.3)``."""
        if self.select is None or self.selected is None:
            return "no dev evaluation recorded"
        text = f"selected {self.select} {_number(self.select, self.selected)}"
        if self.metric is not None and self.score is not None and self.metric != self.select:
            text += f", {self.metric} {_number(self.metric, self.score)}"
        if self.baseline is not None:
            text += f" ({BASELINE} {_number(self.metric or '', self.baseline)})"
        return text

    def summary(self) -> str:
        """``ENDING; SCORES``: one line's worth about the run."""
        return f"{self.ending()}; {self.scores()}"

    def as_dict(self) -> dict[str, Any]:
        """The fields as JSON takes them, with the texts ``ending`` and ``scores``."""
        return {"path": str(self.path), "model": self.model, "reason": self.reason, "step": self.step,
                "signal": self.signal, "ending": self.ending(), "select": self.select, "selected": self.selected,
                "metric": self.metric, "score": self.score, BASELINE: self.baseline,
                "below_baseline": self.below_baseline, "scores": self.scores()}

    def warning(self, alternative: str = "") -> str | None:
        """One line when the selected model scores below right-branching on the same dev data, with what to do
        (``alternative``: a further remedy the caller offers, e.g. another model)."""
        if not self.below_baseline:
            return None
        assert self.metric is not None and self.score is not None and self.baseline is not None
        resume = shell_command("depinduce", "train", "--resume", "--out", self.path)  # pasted: quoted
        if self.finished:
            remedy = "train longer (more epochs, the recipe's full budget) or with another seed"
        elif self.reason == "max_tokens":
            remedy = f"continue it: `{resume} --max-tokens N` with a larger N"
        elif self.reason == "max_time":
            remedy = (f"continue it: `{resume}` (another --max-time budget of the same length, or give --max-time "
                      "MINUTES)")
        else:
            remedy = f"continue it: `{resume}`"
        return (f"warning: {printable(self.path)}: the selected model's {self.metric} {_number(self.metric, self.score)} is "
                f"below {BASELINE}'s {_number(self.metric, self.baseline)} on the same dev data; {remedy}"
                f"{alternative}")


def _number(metric: str, value: float) -> str:
    """Percentages to one decimal (as people quote them), losses and perplexities to four figures."""
    return f"{value:.4g}" if metric in ("dev_ppl", "dev_loss", "train_loss") else f"{value:.1f}"


def _records(path: Path) -> list[dict[str, Any]]:
    """metrics.jsonl's evaluations (learning-curve points, train.log_every lines and a line cut off by a kill
    left out)."""
    return [record for record in read_metrics(path) if not record.get("curve") and not record.get("train_log")]


def _number_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def run_outcome(run_dir: str | Path, *, measure: bool = True) -> RunOutcome | None:
    """How the run in ``run_dir`` ended and scores, or None when it is no training run (no run manifest: the
    bundled model, a hand-made folder).  ``measure``: measure right-branching's dev scores when the run has none
    recorded (a run from before they were; parsing the dev set costs seconds), else leave them out.  A run whose
    manifest or metrics are damaged is an :class:`InputError` naming the file and the field."""
    path = Path(run_dir)
    raw = try_read_json(path / MANIFEST_FILE)
    if not isinstance(raw, dict) or raw.get("format") != RUN_FORMAT:
        return None
    manifest = read_manifest(path / MANIFEST_FILE)
    starts = manifest.get("runs") or [{}]
    last = starts[-1] if isinstance(starts[-1], dict) else {}
    outcome = last.get("outcome") if "finished" in last and isinstance(last.get("outcome"), dict) else {}
    records = _records(path / METRICS_FILE)
    chosen = next((r for r in reversed(records) if r.get("best")), None)
    select = outcome.get("select") or (chosen or {}).get("select")
    step = outcome.get("step") if outcome else (records[-1].get("step") if records else None)
    selected = _number_or_none(chosen.get(select)) if chosen and isinstance(select, str) else None
    metric = score = baseline = None
    if chosen is not None:
        metric = select if select in COMPARABLE and selected is not None else \
            next((m for m in COMPARABLE if _number_or_none(chosen.get(m)) is not None), None)
        score = _number_or_none(chosen.get(metric)) if metric else None
    if metric is not None:
        recorded = (manifest.get("baselines") or {}).get(BASELINE)
        if isinstance(recorded, dict):
            baseline = _number_or_none(recorded.get(metric))
        elif measure:
            baseline = _measured_baseline(manifest, metric)
    model = manifest.get("model")
    return RunOutcome(path=path, model=model if isinstance(model, str) else None, reason=outcome.get("reason"),
                      step=step if isinstance(step, int) else None, signal=outcome.get("signal"),
                      select=select if isinstance(select, str) else None, selected=selected, metric=metric,
                      score=score, baseline=baseline)


# The dev figures the last line of a training run names, with their labels, in the order people quote them.
LAST_LINE_METRICS = (("dev_dda", "DDA"), ("dev_uda", "UDA"), ("dev_uf1", "UF1"))


def dev_comparison(run_dir: str | Path) -> str | None:
    """The selected model's dev figures beside right-branching's on the same dev data, as the one line a training
    run ends with, e.g. ``dev (selected model, step 1200): DDA 33.1 UDA 52.4 UF1 38.0 · right-branching: DDA 29.6
    UDA 49.5 UF1 40.5 · above right-branching in DDA, UDA``; None when the run has no parsing figures on dev.
    Test data are never read: a run is chosen and judged on dev alone."""
    path = Path(run_dir)
    records = _records(path / METRICS_FILE)
    chosen = next((r for r in reversed(records) if r.get("best")), None)
    if chosen is None:
        return None
    ours = {name: _number_or_none(chosen.get(key)) for key, name in LAST_LINE_METRICS}
    ours = {name: value for name, value in ours.items() if value is not None}
    if not ours:
        return None
    recorded = (read_manifest(path / MANIFEST_FILE).get("baselines") or {}).get(BASELINE) or {}
    theirs = {name: _number_or_none(recorded.get(key)) for key, name in LAST_LINE_METRICS if name in ours}
    line = f"dev (selected model, step {chosen.get('step')}): " + " ".join(f"{n} {v:.1f}" for n, v in ours.items())
    if all(value is not None for value in theirs.values()):
        line += f" · {BASELINE}: " + " ".join(f"{n} {v:.1f}" for n, v in theirs.items())
        above = [n for n, v in ours.items() if v > theirs[n]]
        line += f" · above {BASELINE} in {', '.join(above)}" if above else f" · below {BASELINE} in every one"
    return line


def baseline_metrics(dev: DevTreebank) -> dict[str, float | None]:
    """Right-branching's scores on ``dev``, measured exactly as a model's dev scores are: the bar a trained model
    must clear, stored beside the run's scores (``manifest.json`` ``baselines``) so ``parse`` can warn below it.
    The parse pipeline is imported here, not at the top: reading a run's outcome needs no torch."""
    from depinduce.models.registry import backend_class
    from depinduce.training.evaluation import parsing_metrics

    backend = backend_class(BASELINE).load(None)
    return parsing_metrics(backend, dev, decoder=backend.default_decoder)


def _measured_baseline(manifest: dict[str, Any], metric: str) -> float | None:
    """Right-branching's ``metric`` on the run's dev data, when its data folder still holds the dev file the run
    was trained with (the manifest's checksum); else None."""
    data = manifest.get("data") or {}
    folder, files = data.get("dir"), data.get("files") or {}
    name = DEV_TREES if metric.startswith("dev_uf1") else DEV_CONLLU
    recorded = files.get(name) if isinstance(files, dict) else None
    if not isinstance(folder, str) or not isinstance(recorded, dict):
        return None
    dev_file = Path(folder) / name
    try:
        if not dev_file.is_file() or sha256_file(dev_file) != recorded.get("sha256"):
            return None
    except OSError:
        return None
    from depinduce.training.evaluation import DevTreebank  # torch: only for old runs

    try:
        sentences = read_sentences(dev_file, fmt="brackets" if name == DEV_TREES else "conllu")
        dev = DevTreebank(trees=sentences) if name == DEV_TREES else DevTreebank(dependencies=sentences)
        return _number_or_none(baseline_metrics(dev).get(metric))
    except DepinduceError:  # a dev file this version cannot read: say nothing rather than fail the command
        return None
