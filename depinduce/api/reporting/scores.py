"""Test scores of a run's selected model (``model.pt``), measured once and cached in the run directory.

The scores are those of ``depinduce parse`` + ``depinduce eval`` because they are measured by the same code, the
Python API's :meth:`~depinduce.api.parser.Parser.parse_file` and :func:`~depinduce.api.scoring.evaluate`:

- DDA, UDA (and LAS for backends that predict labels): ``TEST`` (a CoNLL-U file with gold heads) parsed with
  ``--input-format conllu`` and scored against itself — for backends that give dependencies;
- UF1 (sentence- and corpus-level): ``TEST`` parsed with ``--format brackets`` and scored against the gold trees
  of ``TEST``'s sibling with the same stem and the suffix ``.trees`` (``data/ptb/test.trees`` beside
  ``test.conllu``, which ``preprocess ptb`` writes), when there is one;
- perplexity: ``depinduce perplexity`` on the sibling ``.txt`` (the model's view of the same sentences), for
  backends trained as language models (masked or next-word).

``RUN_DIR/scores.json`` keeps them, keyed by the sha256 of everything they depend on: the test file, its
``.trees`` and ``.txt`` siblings, ``model.pt``, the model's name in ``config.yaml``, the decoder, the evaluation
protocol's text and the depinduce version; a change in any of them measures again.  Each entry carries those
inputs and a sha256 of itself, and is used only when it fits its schema (percentages from 0 to 100), its inputs
are today's and its digest matches: an edited or damaged entry is measured again, with a warning, never printed.
The file is replaced atomically, so a report killed mid-write leaves the previous one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from depinduce.checksum import sha256_file
from depinduce.data.files import try_read_json
from depinduce.data.run_files import PERCENT
from depinduce.data.schemas import ANY, Opt, Range, Record, problem
from depinduce.api.reporting.runs import Run
from depinduce.io.filenames import MODEL_FILE, SCORES_FILE
from depinduce.version import __version__

CACHE_FORMAT = "depinduce-scores"
METRICS = ("dda", "uda", "las", "uf1_sentence", "uf1_corpus", "perplexity")
PERPLEXITY_OBJECTIVES = ("mlm", "lm", "likelihood")  # the objectives `depinduce perplexity` measures


@dataclass
class Scores:
    """One run's scores on one test file (None: not measured for this model or this data)."""

    test: Path
    metrics: dict[str, float | None]
    protocol: list[str] = field(default_factory=list)
    gold_trees: str | None = None
    text: str | None = None
    cached: bool = False
    note: str | None = None  # why a cached entry was measured again (edited, damaged), or is not kept


def siblings(test: Path) -> tuple[Path | None, Path | None]:
    """The gold trees (``STEM.trees``) and the model-view text (``STEM.txt``) beside ``test``, when present."""
    trees, text = test.with_suffix(".trees"), test.with_suffix(".txt")
    return (trees if trees.is_file() else None), (text if text.is_file() else None)


INPUTS = {"test_sha256": str, "trees_sha256": Opt(str), "text_sha256": Opt(str), "model_sha256": str,
          "model": str, "decoder": str, "protocol_sha256": str, "depinduce": str}
ENTRY = {**INPUTS, "test": str, "gold_trees": Opt(str), "text": Opt(str), "protocol": [str], "digest": str,
         "metrics": Record({name: Opt(Range(1.0) if name == "perplexity" else PERCENT) for name in METRICS},
                           rest=ANY)}


def _protocol_sha256() -> str:
    """A checksum of the evaluation protocol's text: a changed rule (punctuation, roots) measures again."""
    from depinduce.metrics import protocol

    texts = {name: value for name, value in vars(protocol).items()
             if name.isupper() and isinstance(value, (str, dict, tuple))}
    return hashlib.sha256(json.dumps(texts, sort_keys=True, default=list).encode()).hexdigest()


def _digest(entry: dict[str, Any]) -> str:
    body = {key: value for key, value in entry.items() if key != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def cache_key(run: Run, test: Path, decoder: str) -> tuple[str, dict[str, Any]]:
    """The cache key (sha256 of the inputs below) and the inputs themselves, stored beside the scores."""
    trees, text = siblings(test)
    inputs = {
        "test_sha256": sha256_file(test),
        "trees_sha256": sha256_file(trees) if trees else None,
        "text_sha256": sha256_file(text) if text else None,
        "model_sha256": sha256_file(run.path / MODEL_FILE),
        "model": run.model,
        "decoder": decoder,
        "protocol_sha256": _protocol_sha256(),
        "depinduce": __version__,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest(), inputs


def _read_cache(path: Path) -> dict[str, Any]:
    """The cache's entries; an unreadable or foreign file counts as empty (it is rewritten)."""
    data = try_read_json(path)
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT or not isinstance(data.get("entries"), dict):
        return {}
    return data["entries"]


def _unusable(entry: Any, inputs: dict[str, Any]) -> str | None:
    """Why a cached entry may not be served for ``inputs`` (None: it may)."""
    wrong = problem(entry, ENTRY)
    if wrong is not None:
        return wrong
    changed = sorted(key for key, value in inputs.items() if entry.get(key) != value)
    if changed:
        return f"computed from another {', '.join(changed)}"
    if entry["digest"] != _digest(entry):
        return "edited since it was measured (its digest does not match)"
    return None


def _write_cache(path: Path, entries: dict[str, Any]) -> str | None:
    """Keep the entries; a cache that cannot be written (a read-only run folder, a link in its place) costs a
    measurement next time, never the report: the warning saying so, or None."""
    from depinduce.errors import DepinduceError
    from depinduce.io.outputs import atomic_write_text

    try:
        atomic_write_text(path, json.dumps({"format": CACHE_FORMAT, "entries": entries}, indent=2) + "\n")
    except DepinduceError as exc:
        return f"warning: the scores are not kept, so they are measured again next time ({exc})"
    return None


def measure(run: Run, test: Path, *, decoder: str, device: str = "cpu") -> tuple[dict[str, float | None], list[str]]:
    """Parse ``test`` with the run's model and score it, as ``parse`` + ``eval`` (+ ``perplexity``) would."""
    from depinduce.api.parser import load
    from depinduce.api.scoring import evaluate

    trees, text = siblings(test)
    parser = load(run.path, device=device)
    caps = parser.backend.capabilities
    metrics: dict[str, float | None] = dict.fromkeys(METRICS)
    protocol: list[str] = []
    if caps.dependency:
        parsed = list(parser.parse_file(test, input_format="conllu", decoder=decoder, fmt="conllu"))
        result = evaluate(test, parsed)
        scored = result.metrics
        metrics.update(dda=scored["dda"], uda=scored["uda"])
        if caps.supervised:  # the others write root/dep labels: LAS would measure nothing
            metrics["las"] = scored["las"]
        protocol.extend(result.protocol)
    if trees is not None and (caps.constituency or caps.dependency):
        parsed = list(parser.parse_file(test, input_format="conllu", decoder=decoder, fmt="brackets"))
        result = evaluate(trees, parsed)
        metrics.update(uf1_sentence=result.metrics["uf1_sentence"], uf1_corpus=result.metrics["uf1_corpus"])
        # the UF1 evaluation's own lines say so, so the report can print them together (render.split_protocol)
        protocol.extend(line if line.startswith("UF1") else f"UF1 evaluation: {line}" for line in result.protocol
                        if line not in protocol)
    if text is not None and caps.objective in PERPLEXITY_OBJECTIVES:
        from depinduce.training.perplexity import measure as perplexity

        metrics["perplexity"] = perplexity(run.path, text, device=device, progress=False).perplexity
    return metrics, protocol


Measure = Callable[..., tuple[dict[str, float | None], list[str]]]


def score_run(run: Run, test: Path, *, decoder: str | None = None, device: str = "cpu",
              measure_with: Measure | None = None) -> Scores:
    """The run's scores on ``test``: from ``scores.json`` when they are there for these inputs, else measured
    (:func:`measure`) and added to it."""
    decoder = decoder or run.decoder
    key, inputs = cache_key(run, test, decoder)
    cache = run.path / SCORES_FILE
    entries = _read_cache(cache)
    trees, text = siblings(test)
    entry = entries.get(key)
    note = None
    if entry is not None:
        why = _unusable(entry, inputs)
        if why is None:
            return Scores(test, {m: entry["metrics"].get(m) for m in METRICS}, list(entry["protocol"]),
                          entry["gold_trees"], entry["text"], cached=True)
        note = f"warning: {cache}: the cached scores for {test} are not used ({why}); measured again"
    metrics, protocol = (measure_with or measure)(run, test, decoder=decoder, device=device)
    entries[key] = {"test": str(test.resolve()), "gold_trees": str(trees.resolve()) if trees else None,
                    "text": str(text.resolve()) if text else None, **inputs, "metrics": metrics,
                    "protocol": protocol}
    entries[key]["digest"] = _digest(entries[key])
    unkept = _write_cache(cache, entries)
    note = "\n".join(line for line in (note, unkept) if line) or None
    return Scores(test, metrics, protocol, entries[key]["gold_trees"], entries[key]["text"], note=note)
