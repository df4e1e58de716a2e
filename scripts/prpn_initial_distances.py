"""How spread PRPN's syntactic distances are before training, under each initialisation (``init: authors`` and
``init: depinduce``), and how much the reading network's gates already select.

An untrained PRPN (the CPU recipe's network, seeds 0..K−1) reads the sentences of a model-view text file
(``dev.txt``) in training mode, as in its first step; printed per initialisation and seed: the standard deviation
and the range of the distances d_t over all words, and the mean gate of the five nearest memory slots (1 = every
slot open, the attention then ignores the distances).  The hard gate α(a, b) = clamp(1 + (a − b)/r, 0, 1) only
separates distances that differ by a fair part of the resolution r (0.1), so distances that start nearly equal
give the language model nearly nothing to learn from at first (README, "Structure within 2.5 M tokens").

    python scripts/prpn_initial_distances.py --data data/ptb-brown [--sentences 200] [--seeds 3]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from depinduce.data.vocab import Vocab
from depinduce.models.neural import pad_batch
from depinduce.models.prpn import PRPN
from depinduce.models.prpn.config import PRPNConfig
from depinduce.models.prpn.parsing import stick_breaking_gates
from depinduce.training.batching import read_corpus
from depinduce.training.config import load_recipe

RECIPE = Path(__file__).resolve().parents[1] / "depinduce" / "recipes" / "prpn-ptb-cpu.yaml"


@torch.no_grad()
def spread(model: PRPN, tokens: torch.Tensor, mask: torch.Tensor) -> tuple[float, float, float]:
    """(std, range) of the distances over real words and the mean gate of the five nearest slots."""
    batch = tokens.shape[0]
    inputs = torch.cat([tokens.new_full((batch, 1), model.boundary_index), tokens], dim=1)
    rows = torch.cat([mask.new_ones(batch, 1), mask], dim=1)
    distance, _ = model.parser(model.embedding(inputs), rows)
    config = model.config
    previous = distance.new_full((batch, config.n_slots), float("inf"))
    gates = stick_breaking_gates(distance, distance, previous, resolution=config.resolution,
                                 hard=config.gate == "hard")
    words = distance[rows]
    return float(words.std()), float(words.max() - words.min()), float(gates[rows][:, :5].mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="a preprocessed folder (vocab.json, dev.txt)")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    vocab = Vocab.load(args.data / "vocab.json")
    rows = read_corpus(args.data / "dev.txt", vocab)[: args.sentences]
    tokens, mask = pad_batch(rows, vocab.pad_index)
    network = dict(load_recipe(RECIPE)["model_config"])
    print(f"{len(rows)} sentences of {args.data / 'dev.txt'}; the network of {RECIPE.name}")
    print(f"{'init':<10} {'seed':>4} {'std(d)':>7} {'range(d)':>8} {'gate, 5 nearest':>15}")
    for init in ("authors", "depinduce"):
        for seed in range(args.seeds):
            torch.manual_seed(seed)
            model = PRPN(PRPNConfig(**{**network, "init": init}), vocab).train()
            std, width, gate = spread(model, tokens, mask)
            print(f"{init:<10} {seed:>4} {std:>7.3f} {width:>8.3f} {gate:>15.2f}")


if __name__ == "__main__":
    main()
