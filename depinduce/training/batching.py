"""Sentences → length-bucketed batches under a token budget, in a shuffled order that a seed and the epoch fix.

Sorting by length keeps padding low (a batch holds sentences of nearly equal length); the budget counts padded
tokens (sentences × longest sentence), which is what memory and time scale with.  Within one length, sentences are
shuffled before the stable sort, so batch composition changes from epoch to epoch; the order of the batches is
shuffled too.  The whole order follows from ``(seed, epoch)`` alone, so every distributed rank computes the same
order without communicating, and a resumed run can check it continues the order it was in.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from depinduce.data.vocab import Vocab
from depinduce.errors import InputError, RecipeError
from depinduce.io.lines import display_name, read_text
from depinduce.models.neural import pad_batch


def read_corpus(path: Path, vocab: Vocab) -> list[list[int]]:
    """Index rows of a model-view file (``train.txt``/``dev.txt``: one normalised sentence per line; ``-`` =
    standard input).

    The words were normalised by ``preprocess`` already, so they are looked up as they are; blank lines are
    skipped.
    """
    text = read_text(path)  # "-" = stdin; one reader, so errors read as everywhere else
    rows = [vocab.encode(line.split(), normalize=False) for line in text.split("\n") if line.strip()]
    if not rows:
        raise InputError(display_name(path), None, "no sentences")
    return rows


def length_batches(indices: Sequence[int], lengths: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Greedy batches of ``indices`` taken in the given order (expected: ascending length), each batch's padded
    size ``len(batch) * max(length)`` at most ``batch_tokens`` (a single longer sentence is a batch of its own)."""
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in indices:
        n = lengths[i]
        if current and (len(current) + 1) * max(longest, n) > batch_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, n)
    if current:
        batches.append(current)
    return batches


def epoch_order(lengths: Sequence[int], batch_tokens: int, *, seed: int, epoch: int,
                max_length: int | None = None) -> list[list[int]]:
    """The batches of one training epoch, in order; sentences over ``max_length`` words are left out."""
    rng = random.Random(f"depinduce-batches:{seed}:{epoch}")
    indices = [i for i, n in enumerate(lengths) if n > 0 and (max_length is None or n <= max_length)]
    rng.shuffle(indices)
    indices.sort(key=lengths.__getitem__)  # stable: equal lengths keep their shuffled order
    batches = length_batches(indices, lengths, batch_tokens)
    rng.shuffle(batches)
    return batches


def curriculum_length(max_length: int | None, start: int | None, step: int, epoch: int) -> int | None:
    """The longest training sentence of ``epoch`` (0-based) under a length curriculum that starts at ``start``
    words and adds ``step`` each epoch, never above ``max_length``; no curriculum (``start`` None): max_length."""
    if start is None:
        return max_length
    cap = start + step * epoch
    return cap if max_length is None else min(cap, max_length)


def eval_order(lengths: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Deterministic batches for evaluation: every non-empty sentence, by length."""
    indices = sorted((i for i, n in enumerate(lengths) if n > 0), key=lambda i: (lengths[i], i))
    return length_batches(indices, lengths, batch_tokens)


def steps_per_epoch(n_batches: int, world_size: int) -> int:
    """Optimiser steps in an epoch of ``n_batches`` when each of ``world_size`` ranks takes one batch per step.

    The last ``n_batches % world_size`` batches of an epoch are left out so that every rank takes the same
    number of steps (DDP requires it); the batch order changes every epoch, so no sentence is always skipped.
    """
    return n_batches // world_size


def rank_batch(order: Sequence[Sequence[int]], step: int, rank: int, world_size: int) -> Sequence[int]:
    """The batch rank ``rank`` takes at ``step`` of the epoch: consecutive batches go to consecutive ranks."""
    return order[step * world_size + rank]


def shard(items: Sequence[Sequence[int]], rank: int, world_size: int) -> list[Sequence[int]]:
    """Round-robin share of evaluation batches for one rank (ranks may get different counts; results are summed)."""
    return list(items[rank::world_size])


@dataclass
class Batch:
    """Padded index tensors of one batch and which rows of the corpus they are."""

    tokens: torch.Tensor  # (B, T) long
    mask: torch.Tensor  # (B, T) bool, true at real words
    rows: list[int]

    @property
    def n_tokens(self) -> int:
        return int(self.mask.sum())


def collate(corpus: Sequence[Sequence[int]], rows: Sequence[int], pad_index: int) -> Batch:
    tokens, mask = pad_batch([corpus[i] for i in rows], pad_index)
    return Batch(tokens, mask, list(rows))


def order_to_tensors(order: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch order as (flat row indices, batch offsets): plain tensors, so it fits a ``weights_only`` checkpoint."""
    flat = torch.tensor([i for batch in order for i in batch], dtype=torch.long)
    offsets = torch.tensor([0] + [len(b) for b in order], dtype=torch.long).cumsum(0)
    return flat, offsets


def order_from_tensors(flat: torch.Tensor, offsets: torch.Tensor) -> list[list[int]]:
    values, bounds = flat.tolist(), offsets.tolist()
    return [values[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


class TokenStream:
    """Sentences as continuous text: each followed by the boundary, in file order, laid out as ``n_streams``
    rows of equal length (this rank's contiguous share of the text when training on several ranks)."""

    def __init__(self, rows: Sequence[Sequence[int]], boundary_index: int, n_streams: int, bptt: int, *,
                 rank: int = 0, world_size: int = 1) -> None:
        flat = [i for row in rows for i in (*row, boundary_index)]
        share = len(flat) // world_size
        mine = flat[rank * share : (rank + 1) * share]
        length = len(mine) // n_streams
        if length < 2:
            raise RecipeError(f"{len(flat):,} tokens of text are too few for {n_streams} streams per rank x "
                              f"{world_size} rank(s); lower batch_tokens or raise bptt")
        self.data = torch.tensor(mine[: length * n_streams], dtype=torch.long).view(n_streams, length)
        self.bptt = bptt

    @property
    def n_chunks(self) -> int:
        """Chunks per pass: each predicts up to ``bptt`` next tokens per stream."""
        return -(-(self.data.shape[1] - 1) // self.bptt)

    def chunk(self, k: int) -> dict[str, torch.Tensor]:
        start = k * self.bptt
        piece = self.data[:, start : min(start + self.bptt, self.data.shape[1] - 1) + 1]
        return {"tokens": piece[:, :-1], "targets": piece[:, 1:]}
