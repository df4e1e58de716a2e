"""Published figures a report shows beside ours, marked as the paper's.

A figure is shown only where our run measured the same thing on the same data: the model, the corpus and split
(identified from the data folder's ``manifest.json``, never from a folder name), and for dependency figures the
constituency-to-dependency conversion.  Everything else is left out, and the report says why in a note.

Sources are the papers' text in ``../shared/papers``; each figure cites its table.  Not listed, deliberately:

- PRPN (Shen et al., 2018): WSJ10 UF1 70.02 (Table 5) is on every WSJ section's sentences of at most 10 words
  (7,422), while a depinduce ``wsj10`` file holds sections 02-23 only; its perplexity 61.98 (Table 2) is on
  Mikolov's PTB language-model data, not a depinduce data folder.
- Probabilistic Transformer (Wu & Tu, 2023): the figures of its Table 1 are missing from the paper's text.
- RNGTr (Mohammadshahi & Henderson, 2021): UD v2.3 with BERT and the CoNLL 2018 scorer (punctuation scored), and
  Stanford dependencies for the PTB (Table 3); a data folder records neither a UD version nor that conversion.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depinduce.data.files import try_read_json
from depinduce.io.filenames import MANIFEST_FILE, TEST_CONLLU


@dataclass(frozen=True)
class PaperFigure:
    """One published number: mean, the standard deviation over seeds where the paper gives one, and its source."""

    value: float
    sd: float | None
    source: str
    conversion: str | None = None  # dependency figures: the head rules their gold dependencies correspond to

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "sd": self.sd, "source": self.source, "conversion": self.conversion}


_SF = "Shen et al. 2021 (StructFormer)"
_UDGN = "Shen et al. 2022 (UDGN)"

# (model, dataset) -> metric -> figure.  Dataset "ptb-wsj-test": the full WSJ of an LDC tree, test = section 23,
# punctuation removed from the model's view and from scoring (the papers' protocol).
PAPER_FIGURES: dict[tuple[str, str], dict[str, PaperFigure]] = {
    ("structformer", "ptb-wsj-test"): {
        # Table 4 (parent+dep) = Table 5 (mask rate 0.3): the "Conll" dependency columns, the conversion of the
        # CoNLL shared tasks (Penn2Malt head rules), not the "Stanford" ones (UAS 46.2, UUAS 61.6)
        "dda": PaperFigure(36.2, 0.1, f"{_SF}, Table 4 (CoNLL UAS)", conversion="penn2malt"),
        "uda": PaperFigure(56.3, 0.2, f"{_SF}, Table 4 (CoNLL UUAS)", conversion="penn2malt"),
        "uf1_sentence": PaperFigure(54.0, 0.3, f"{_SF}, Table 2a / Table 4"),  # sentence-level F1 (Shen et al.)
        "perplexity": PaperFigure(60.9, 1.0, f"{_SF}, Table 4 (MLM PPL)"),  # Table 1: 60.94
    },
    ("udgn", "ptb-wsj-test"): {
        # Table 2 / Table 4 (Chu-Liu decoding, --decoder udgn-tree): Stanford dependencies (the paper compares
        # them with StructFormer's Stanford figures), so never shown beside a Penn2Malt or Collins conversion
        "dda": PaperFigure(49.9, 1.6, f"{_UDGN}, Table 2 / Table 4 (Chu-Liu DDA)", conversion="stanford"),
        "uda": PaperFigure(61.8, 0.9, f"{_UDGN}, Table 2 / Table 4 (Chu-Liu UDA)", conversion="stanford"),
        "perplexity": PaperFigure(59.3, 0.5, f"{_UDGN}, Table 1 / Table 4 (MLM PPL)"),
    },
}


@dataclass(frozen=True)
class PaperMatch:
    """The figures that apply to one group, and notes on those that do not."""

    figures: dict[str, PaperFigure]
    notes: tuple[str, ...] = ()


def _data_manifest(data_dir: Path | None) -> dict[str, Any] | None:
    if data_dir is None:
        return None
    manifest = try_read_json(data_dir / MANIFEST_FILE)
    return manifest if isinstance(manifest, dict) else None


def identify_dataset(data_dir: Path | None, test: Path) -> tuple[str | None, str | None, str | None]:
    """(dataset key, head rules, why there is none) for a run's data folder and the test file it is scored on."""
    manifest = _data_manifest(data_dir)
    if manifest is None or manifest.get("command") != "ptb":
        return None, None, None  # not PTB data: no paper figure is known, nothing to explain
    source = manifest.get("source") or {}
    if source.get("kind") != "ldc":
        return None, None, (f"{data_dir} is NLTK's 10% sample of the PTB, not the full WSJ (sections 02-21, test "
                            "section 23) the papers trained and tested on: no paper figure is shown")
    if source.get("missing_sections"):
        return None, None, (f"{data_dir} lacks WSJ section(s) {', '.join(source['missing_sections'])}: no paper "
                            "figure is shown")
    if (manifest.get("options") or {}).get("keep_punct"):
        return None, None, f"{data_dir} keeps punctuation in the model's view, unlike the papers: no paper figure"
    assert data_dir is not None
    if test.resolve() != (data_dir / TEST_CONLLU).resolve():
        return None, None, None  # another file: the papers report section 23 only
    return "ptb-wsj-test", source.get("head_rules"), None


def paper_figures(model: str, data_dir: Path | None, test: Path) -> PaperMatch:
    """The published figures for ``model`` trained on ``data_dir`` and scored on ``test``."""
    dataset, head_rules, why = identify_dataset(data_dir, test)
    if dataset is None:
        known = any(name == model for name, _ in PAPER_FIGURES)
        return PaperMatch({}, (why,) if why and known else ())
    figures: dict[str, PaperFigure] = {}
    notes: list[str] = []
    for metric, figure in PAPER_FIGURES.get((model, dataset), {}).items():
        if figure.conversion is not None and figure.conversion != head_rules:
            notes.append(f"{model}: the paper's {metric.upper()} {figure.value:g} ({figure.source}) uses "
                         f"{figure.conversion} dependencies, this data {head_rules}: not shown")
            continue
        figures[metric] = figure
    if "perplexity" in figures:
        notes.append(f"{model}: the paper's perplexity is over its vocabulary (PTB words seen at least 5 times, "
                     "punctuation removed); compare it with a data folder made with --min-freq 5")
    return PaperMatch(figures, tuple(notes))
