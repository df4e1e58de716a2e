"""Where a dependency parser's head mass goes, snapshot by snapshot: the "hub collapse" of masked-LM parsers.

For each weight file (a run's ``model.pt``, or copies of ``last.pt``'s ``model`` saved during training, e.g. with
``--set checkpoint_every=25``), the parser's head distribution p(head | word) over the sentences of a model-view
text file (``dev.txt``: punctuation already removed) is summarised:

- ``entropy``: mean entropy of a word's head distribution, divided by log(n) (1 = uniform over the n candidates);
- ``hub``: per sentence, the share of all head mass that the single most-chosen word receives (a tree's busiest
  word receives ~ its dependents / n; 1 would be every word on one head), averaged over sentences;
- ``in-degree``: per sentence, the largest number of words whose most probable head is the same word, over n;
- ``adjacent``: mean mass on the two neighbours, and of it ``left`` (the previous word) and ``right`` (the next):
  a parser whose mass sits on one side decodes to a left- or right-branching chain; ``self``: mean mass in the
  root column (UDGN: p[i, i]);
- ``first``/``last``: mean mass on the sentence's first/last word; ``hub types``: the words most often the hub.

    python scripts/hub_collapse.py --run RUN_DIR --text data/ptb-brown/dev.txt SNAPSHOT.pt... [--sentences 300]
"""

from __future__ import annotations

import argparse
import math
from collections import Counter
from pathlib import Path

import torch

from depinduce.models.neural import pad_batch
from depinduce.models.registry import load_model
from depinduce.training.batching import read_corpus


def weights(path: Path) -> tuple[dict[str, torch.Tensor], str]:
    state = torch.load(path, weights_only=True, map_location="cpu")
    if "model" in state and isinstance(state["model"], dict):  # a last.pt, or a snapshot of one
        progress = state.get("progress", {})
        label = f"step {state.get('step', progress.get('step', '?'))}"
        tokens = state.get("tokens_seen", progress.get("tokens_seen"))
        if tokens is not None:
            label += f" ({tokens / 1e6:.2f}M tokens)"
        return state["model"], label
    return state, path.name


@torch.no_grad()
def summarise(model, rows: list[list[int]], vocab) -> dict[str, float | str]:
    totals: Counter[str] = Counter()
    hubs: Counter[str] = Counter()
    n_words = n_sents = 0
    for start in range(0, len(rows), 32):
        batch = rows[start : start + 32]
        tokens, mask = pad_batch(batch, vocab.pad_index)
        for row, scores in zip(batch, model.score_tensors(tokens, mask)):
            n = len(row)
            if n < 3:
                continue
            p = scores.heads[1:, :].float().exp()  # (n, n+1): column 0 = root/self, 1..n = words
            p = p / p.sum(-1, keepdim=True)
            words = p[:, 1:]
            entropy = -(p.clamp_min(1e-12).log() * p).sum(-1) / math.log(n)
            received = words.sum(0)
            hub = int(received.argmax())
            idx = torch.arange(n)
            totals["entropy"] += float(entropy.sum())
            totals["self"] += float(p[:, 0].sum())
            totals["left"] += float(words[idx[1:], idx[1:] - 1].sum())
            totals["right"] += float(words[idx[:-1], idx[:-1] + 1].sum())
            totals["first"] += float(words[1:, 0].sum())
            totals["last"] += float(words[:-1, -1].sum())
            totals["hub"] += float(received[hub]) / n
            totals["in-degree"] += float(torch.bincount(words.argmax(-1), minlength=n).max()) / n
            hubs[vocab.itos[row[hub]]] += 1
            n_words += n
            n_sents += 1
    shares = ("entropy", "self", "left", "right", "first", "last")
    out: dict[str, float | str] = {k: totals[k] / n_words for k in shares}
    out["adjacent"] = (totals["left"] + totals["right"]) / n_words
    out["hub"] = totals["hub"] / n_sents
    out["in-degree"] = totals["in-degree"] / n_sents
    out["hub types"] = ", ".join(f"{w} {c / n_sents:.0%}" for w, c in hubs.most_common(3))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, type=Path, help="the run directory (config.yaml, vocab.json)")
    parser.add_argument("--text", required=True, type=Path, help="model-view sentences, e.g. DATA/dev.txt")
    parser.add_argument("--sentences", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("snapshots", nargs="+", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model(str(args.run))
    model.eval()
    rows = read_corpus(args.text, model.vocab)[: args.sentences]
    columns = ("entropy", "hub", "in-degree", "adjacent", "left", "right", "self", "first", "last")
    print("| snapshot | " + " | ".join(columns) + " | hub types |")
    print("|---" * (len(columns) + 2) + "|")
    for path in args.snapshots:
        state, label = weights(path)
        model.load_state_dict(state)
        stats = summarise(model, rows, model.vocab)
        print(f"| {label} | " + " | ".join(f"{stats[c]:.3f}" for c in columns) + f" | {stats['hub types']} |")


if __name__ == "__main__":
    main()
