"""Time ``evaluate`` + rendering on >= 100k scored tokens and print tokens/s (target: under 2 s for 100k).

Gold is the NLTK PTB sample (dependency_treebank heads and treebank trees, traces pruned so both cover the same
words), replicated until enough tokens are scored; synthetic labels (the gold tag, with a ``:sub`` subtype on
the gold side) exercise the LAS path.  Predictions are right-branching over the full token sequence, so
punctuation removal, re-attachment, alignment, every metric and the length buckets all run.  Without the NLTK
data (or with ``--synthetic``) random sentences of the same shape are used.

    NLTK_DATA=../shared/nltk_data python scripts/bench_eval.py [--tokens 100000] [--synthetic]
"""

from __future__ import annotations

import argparse
import io
import os
import random
import time
from pathlib import Path

from nltk import Tree
from rich.console import Console

from depinduce.data.punct import is_punct_tag
from depinduce.structures.sentence import Sentence
from depinduce.metrics import evaluate, render_table
from depinduce.structures.spans import binary_tree_from_distances

SHARED_NLTK = Path(__file__).resolve().parents[2] / "shared" / "nltk_data"


def prune_traces(tree: Tree) -> Tree | None:
    """The tree without ``-NONE-`` leaves and the constituents they leave empty (None when nothing is left)."""
    if len(tree) == 1 and isinstance(tree[0], str):
        return None if tree.label() == "-NONE-" else tree
    children = [c for c in (prune_traces(child) for child in tree) if c is not None]
    return Tree(tree.label(), children) if children else None


def nltk_sample() -> list[Sentence]:
    """The PTB sample as gold sentences carrying tags, heads, labels and a trace-free tree."""
    if "NLTK_DATA" not in os.environ and SHARED_NLTK.exists():
        import nltk

        nltk.data.path.insert(0, str(SHARED_NLTK))
    from nltk.corpus import dependency_treebank, treebank

    gold = []
    for fileid in treebank.fileids():
        graphs = dependency_treebank.parsed_sents(fileid.replace(".mrg", ".dp"))
        for tree, graph in zip(treebank.parsed_sents(fileid), graphs):
            nodes = [graph.nodes[i] for i in range(1, len(graph.nodes))]
            tags = [node["tag"] for node in nodes]
            gold.append(
                Sentence(
                    words=[node["word"] for node in nodes],
                    xpos=tags,
                    heads=[node["head"] for node in nodes],
                    deprels=[f"{tag}:sub" for tag in tags],
                    tree=prune_traces(tree),
                )
            )
    return gold


def synthetic_sample(count: int = 4000, seed: int = 0) -> list[Sentence]:
    """Random sentences (about 10% punctuation) with random projective-ish trees and right-branching gold trees."""
    rng = random.Random(seed)
    gold = []
    for _ in range(count):
        n = rng.randint(1, 50)
        tags = [rng.choice([",", "."] if rng.random() < 0.1 else ["NN", "VB", "DT", "JJ"]) for _ in range(n)]
        words = [f"w{rng.randint(0, 999)}" if not is_punct_tag(t) else t for t in tags]
        heads = [0] + [rng.randint(1, i) for i in range(1, n)]
        tree = Tree("S", [Tree(t, [w]) for t, w in zip(tags, words)])
        gold.append(Sentence(words=words, xpos=tags, heads=heads, deprels=[f"{t}:sub" for t in tags], tree=tree))
    return gold


def right_branching(gold: Sentence) -> Sentence:
    """Right-branching heads and binary tree over the full token sequence (punctuation included)."""
    n = len(gold.words)
    heads = [i + 2 for i in range(n - 1)] + [0]
    tree = binary_tree_from_distances(gold.words, [float(n - i) for i in range(n - 1)])
    return Sentence(words=gold.words, heads=heads, deprels=list(gold.xpos or []), tree=tree)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=100_000, help="scored tokens to reach (default 100000)")
    parser.add_argument("--synthetic", action="store_true", help="use random sentences instead of the NLTK sample")
    args = parser.parse_args()

    try:
        base = synthetic_sample() if args.synthetic else nltk_sample()
        source = "synthetic" if args.synthetic else "NLTK PTB sample"
    except LookupError:
        base, source = synthetic_sample(), "synthetic (NLTK data not found)"
    scored_per_copy = sum(1 for s in base for t in (s.xpos or []) if not is_punct_tag(t))
    copies = -(-args.tokens // scored_per_copy)
    gold = base * copies
    pred = [right_branching(s) for s in base] * copies

    start = time.perf_counter()
    result = evaluate(gold, pred)
    evaluated = time.perf_counter()
    render_table(result, Console(file=io.StringIO(), width=120), by_length=True)
    result.to_json()
    rendered = time.perf_counter()

    tokens = result.overall.tokens
    total = rendered - start
    print(f"data: {source}, {copies} copies, {len(gold)} sentences, {tokens} scored tokens")
    print(f"evaluate: {evaluated - start:.3f} s   render + JSON: {rendered - evaluated:.3f} s   total: {total:.3f} s")
    print(f"throughput: {tokens / total:,.0f} scored tokens/s (target: 100,000 tokens in < 2 s)")
    print(f"check: DDA {result.overall.dependency.dda:.1f}  UF1 sent. {result.overall.constituency.sentence_f1:.1f}")


if __name__ == "__main__":
    main()
