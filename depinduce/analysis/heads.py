"""Which attention heads model which dependency relations: the UDGN paper's Table 3 analysis (section 4.3).

Every gold dependency edge (child i → parent j, root edges excluded: no message crosses them) is one data
point.  For each head k of each layer, A^k is that head's controller probability â for the edge (in the
child → parent direction by default: the share of the information flowing from i to j that head k carries);
for each label l, Y^l is 1 when the edge has label l, else 0.  The Pearson correlation ρ(A^k, Y^l) over all
edges says how selectively a head serves a relation.

Gold trees are read as ``eval`` reads them: punctuation (by the file's rule) is hidden from the model exactly as
``parse`` hides it, a word whose gold head was punctuation is re-attached to its nearest kept ancestor, and a
label is compared on its universal part (``nsubj:pass`` → ``nsubj``).
"""

from __future__ import annotations

import csv
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from depinduce.data.punct import sentence_punct_mask
from depinduce.structures.sentence import Sentence
from depinduce.display import csv_cell
from depinduce.errors import ResourceError, UsageError
from depinduce.io.outputs import atomic_file, check_new_file, written_file
from depinduce.metrics.dependency import universal_label
from depinduce.structures.dependency import reattach

Direction = Literal["child-to-parent", "parent-to-child"]
DIRECTIONS: tuple[str, ...] = ("child-to-parent", "parent-to-child")


@dataclass(frozen=True)
class Edge:
    """One gold edge over the punctuation-free words (0-based positions)."""

    child: int
    parent: int
    label: str


def visible_edges(sentence: Sentence) -> tuple[list[str], list[Edge]]:
    """The words the model sees and the gold word-to-word edges among them."""
    if sentence.heads is None or sentence.deprels is None:
        raise UsageError(f"sentence {sentence.sent_id}: no gold heads and labels to analyse")
    keep = [not hidden for hidden in sentence_punct_mask(sentence)]
    words = [w for w, k in zip(sentence.words, keep) if k]
    heads = reattach(sentence.heads, keep)
    labels = [universal_label(label) for label, k in zip(sentence.deprels, keep) if k]
    edges = [Edge(child, head - 1, label) for child, (head, label) in enumerate(zip(heads, labels)) if head != 0]
    return words, edges


@dataclass
class HeadLabelCorrelation:
    """Pearson correlations of every (layer, head) with every analysed label."""

    labels: list[str]  # most frequent first
    counts: list[int]  # edges per label
    heads: list[tuple[int, int]]  # (layer, head), 1-based
    matrix: torch.Tensor  # (labels, heads) float64; NaN where a head's probability is constant
    edges: int
    direction: str

    def best(self, row: int) -> tuple[tuple[int, int], float] | None:
        """The most positively correlated head of a label, or None when no correlation is defined."""
        values = self.matrix[row]
        if torch.isnan(values).all():
            return None
        column = int(torch.nan_to_num(values, nan=-math.inf).argmax())
        return self.heads[column], float(values[column])

    def write_csv(self, path: Path, *, force: bool = False) -> None:
        """The full matrix as CSV (labels made formula-safe), written by the output policy."""
        with written_file(path, force) as handle:
            writer = csv.writer(handle)
            writer.writerow(["label", "edges"] + [head_name(h) for h in self.heads])
            for label, count, row in zip(self.labels, self.counts, self.matrix.tolist()):
                writer.writerow([csv_cell(label), count] + ["nan" if math.isnan(v) else f"{v:.6f}" for v in row])


def head_name(head: tuple[int, int]) -> str:
    return f"L{head[0]}.H{head[1]}"


def pearson_columns(features: torch.Tensor, indicator: torch.Tensor) -> torch.Tensor:
    """ρ between each column of ``features`` (N, C) and ``indicator`` (N,), float64; NaN for a constant column
    (or a constant indicator), where the coefficient is undefined."""
    x = features.double() - features.double().mean(dim=0)
    y = indicator.double() - indicator.double().mean()
    denominator = x.norm(dim=0) * y.norm()
    rho = (x * y[:, None]).sum(dim=0) / denominator
    return torch.where(denominator > 0, rho, torch.full_like(rho, math.nan))


def correlate(features: torch.Tensor, labels: Sequence[str], heads: list[tuple[int, int]], *, top: int | None,
              direction: str) -> HeadLabelCorrelation:
    """Correlations of every feature column (one per head) with each of the ``top`` most frequent labels."""
    if features.size(0) == 0:
        raise UsageError("no gold word-to-word edges to analyse")
    frequency = Counter(labels).most_common(top)
    rows = [
        pearson_columns(features, torch.tensor([label == name for label in labels], dtype=torch.float64))
        for name, _ in frequency
    ]
    return HeadLabelCorrelation(
        labels=[name for name, _ in frequency], counts=[count for _, count in frequency], heads=heads,
        matrix=torch.stack(rows), edges=features.size(0), direction=direction,
    )


def edge_features(model: Any, sentences: Sequence[Sentence], *, direction: str, batch_size: int = 32,
                  progress: Any = None) -> tuple[torch.Tensor, list[str], list[tuple[int, int]]]:
    """(edges, layers × heads) controller probabilities of every gold edge, the edges' labels, and the
    (layer, head) of each column.  ``model`` must offer ``controller_probabilities(tokens, mask)``
    ((B, layers, heads, T, T), [b, l, k, i, j] = head k carrying word j to word i)."""
    from depinduce.models.neural import pad_batch

    if direction not in DIRECTIONS:
        raise UsageError(f"direction must be one of {', '.join(DIRECTIONS)}, not {direction!r}")
    views = [visible_edges(s) for s in sentences]
    order = sorted((k for k, (words, edges) in enumerate(views) if words and edges), key=lambda k: len(views[k][0]))
    features: list[torch.Tensor] = []
    labels: list[str] = []
    heads: list[tuple[int, int]] = []
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        tokens, mask = pad_batch([model.vocab.encode(views[k][0]) for k in chunk], model.vocab.pad_index)
        with torch.inference_mode():
            probs = model.controller_probabilities(tokens.to(model.device), mask.to(model.device)).float().cpu()
        n_layers, n_heads = probs.shape[1], probs.shape[2]
        heads = [(layer + 1, head + 1) for layer in range(n_layers) for head in range(n_heads)]
        for row, k in enumerate(chunk):
            edges = views[k][1]
            child = torch.tensor([e.child for e in edges])
            parent = torch.tensor([e.parent for e in edges])
            # child → parent: the parent receives from the child, i.e. [receiver = parent, sender = child]
            receiver, sender = (parent, child) if direction == "child-to-parent" else (child, parent)
            features.append(probs[row][:, :, receiver, sender].permute(2, 0, 1).reshape(len(edges), -1))
            labels.extend(e.label for e in edges)
        if progress is not None:
            progress(len(chunk))
    if not features:
        raise UsageError("no gold word-to-word edges to analyse (every sentence is empty or a single word)")
    return torch.cat(features), labels, heads


def save_heatmap(result: HeadLabelCorrelation, path: Path, *, force: bool = False) -> None:
    """A labels × heads heat map of the correlations (PNG, SVG or PDF by the file's suffix), as the paper's
    appendix A.2 draws them: labels from the most frequent down, heads grouped by layer."""
    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise UsageError(f"{path}: --plot writes .png, .svg or .pdf files")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ResourceError("--plot needs matplotlib: pip install 'depinduce[plot]'") from None
    n_labels, n_heads = result.matrix.shape
    figure, axes = plt.subplots(figsize=(max(6.0, 0.28 * n_heads + 2.0), max(3.0, 0.3 * n_labels + 1.5)))
    image = axes.imshow(result.matrix.numpy(), cmap="RdBu_r", vmin=-1.0, vmax=1.0, aspect="auto",
                        interpolation="nearest")
    axes.set_yticks(range(n_labels), [f"{label} ({count})" for label, count in zip(result.labels, result.counts)])
    axes.set_xticks(range(n_heads), [head_name(h) for h in result.heads], rotation=90, fontsize=7)
    axes.set_title(f"Pearson correlation of head probability and gold label ({result.direction}, "
                   f"{result.edges:,} edges)", fontsize=9)
    figure.colorbar(image, ax=axes, fraction=0.04)
    figure.tight_layout()
    try:
        with atomic_file(check_new_file(path, force), "wb") as stream:  # a picture: bytes, not text
            figure.savefig(stream, format=path.suffix.lower()[1:])
    finally:
        plt.close(figure)
