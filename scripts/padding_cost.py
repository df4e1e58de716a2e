"""What static shapes cost in padding: one epoch of the engine's length-bucketed batches, exact and on the ladder
of ``training/shapes.py`` (prints a table; not a test).

The engine's batches hold at most ``batch_tokens`` padded tokens of sentences of nearly equal length
(``training/batching.py``); a compiled step pads each to a static shape (rows and length rounded up on the
ladder 1, 2, 3, 4, 6, 8, 12, …) so that its graphs are reused.  This counts, per corpus and batch size, the real
tokens, the tokens of the exact batches (rows × longest sentence) and of the padded ones (rows and length
rounded up; ``length only``: PRPN's, whose BatchNorm keeps its rows), and the distinct static shapes an epoch
takes (each one a compilation).  A step's work grows with the tokens it computes, so "static / exact" is about
what a padded step costs beside an exact one on a device that is not bound by its host.

    python scripts/padding_cost.py                                  # NLTK's PTB sample and Brown (NLTK_DATA)
    python scripts/padding_cost.py --text data/ptb/train.txt --batch-tokens 4096
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from depinduce.training.batching import epoch_order  # noqa: E402
from depinduce.training.shapes import static_shape  # noqa: E402


def corpus_lengths(name: str) -> list[int]:
    """Sentence lengths of ``name``: ``ptb-sample`` or ``brown`` (from NLTK's data), or a text file, one
    tokenised sentence a line."""
    if name in ("ptb-sample", "brown"):
        from nltk.corpus import brown, treebank

        return [len(sentence) for sentence in (treebank if name == "ptb-sample" else brown).sents()]
    with open(name, encoding="utf-8") as handle:
        return [len(line.split()) for line in handle if line.strip()]


def padding_row(name: str, lengths: list[int], batch_tokens: int) -> dict[str, object]:
    batches = [[lengths[i] for i in batch] for batch in epoch_order(lengths, batch_tokens, seed=0, epoch=0)]
    real = sum(sum(batch) for batch in batches)
    exact = sum(len(batch) * max(batch) for batch in batches)
    shapes = [static_shape(len(batch), max(batch)) for batch in batches]
    padded = sum(rows * length for rows, length in shapes)
    length_only = sum(len(batch) * length for batch, (_, length) in zip(batches, shapes))
    return {"corpus": name, "batch_tokens": batch_tokens, "batches": len(batches), "real": real, "exact": exact,
            "static": padded, "static / exact": padded / exact, "length only / exact": length_only / exact,
            "shapes": len(set(shapes))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--text", nargs="+", default=["ptb-sample", "brown"],
                        help="corpora: ptb-sample, brown (NLTK) or text files (default: both NLTK corpora)")
    parser.add_argument("--batch-tokens", type=int, nargs="+", default=[4096, 16384])
    args = parser.parse_args()
    print("| corpus | batch tokens | batches | real tokens | exact batches | static shapes | static / exact "
          "| length only / exact | shapes |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for name in args.text:
        lengths = corpus_lengths(name)
        for batch_tokens in args.batch_tokens:
            row = padding_row(name, lengths, batch_tokens)
            print(f"| {row['corpus']} | {batch_tokens:,} | {row['batches']:,} | {row['real']:,} | {row['exact']:,} "
                  f"| {row['static']:,} | {row['static / exact']:.2f}× | {row['length only / exact']:.2f}× "
                  f"| {row['shapes']} |")


if __name__ == "__main__":
    main()
