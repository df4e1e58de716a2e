"""Fidelity check: depinduce's network against its authors' code, weights copied across, float64 end to end.

For one backend, each draw builds both implementations at a small size from one seed, copies the authors'
freshly initialised weights into depinduce's network (a fixed map per backend: names, transposes, the order of
concatenated blocks), runs one random float64 batch through both, in eval mode and in train mode, and records
the largest absolute difference at each stage the two compute: the parser's distributions, the hidden states,
the output logits, the loss and every parameter's gradient.  depinduce runs with the authors' switches on (the
paper recipe's values).  Train mode runs at dropout 0 and checks the training-time code paths (depinduce's fused
CPU kernels, recomputation).  A third run at the paper's dropout routes both sides' dropout through one mask
source (``SharedMasks``, ``routed_dropout``): each mask is drawn in the authors' layout and laid out as
depinduce's (StructFormer's time-major layers, UDGN's head-last controller weights, depinduce's last layer at the
masked positions only), both sides must draw the same masks in the same order, and every stage is compared
again — so a dropout removed, added or moved fails the check.  It runs for the Probabilistic Transformer (every
dropped tensor compared too), StructFormer and UDGN (whose parser LSTM, which draws its inter-layer masks inside
torch's kernel, is stepped one layer at a time on their side with the dropout ``nn.LSTM`` documents between
layers).  Not for PRPN (their layers step per word where depinduce runs one layer after another) nor RNGTr (their
MLP shares one mask over all positions: README, a difference without a switch).  ``Adapter.variants`` adds runs
of paths the default settings do not reach: the Probabilistic Transformer's ROOT encoder and ``loss_chunks``, and
RNGTr's refinement loop (per-pass updates, the first graph from MST, the decode pass) beside their trainer and
evaluation loop.
Then each backend's own decoders, the authors' decoding conventions, are run beside the authors' decoders on
random inputs; where the trees differ, both are scored under the authors' objective: equal scores count as
ties, scores apart by float64 round-off only (1e-12 relative) as round-off, anything else as a failure; a
decoder that claims the authors' tie rule (UDGN's) fails on tied trees that rule tells apart.

The authors' code is imported from the checkout given with ``--authors`` (never copied into this repository):

    python scripts/check_authors.py --model udgn --authors /tmp/UDGN                     # yikangshen/UDGN
    # google-research/google-research: the folder that holds structformer/ (its decoders need tree_utils.py
    # and data_ptb.py there, and nltk)
    python scripts/check_authors.py --model structformer --authors /tmp/google-research
    # whyNLP/Probabilistic-Transformer (their encoder imports opt_einsum, their decoders supar:
    # pip install opt_einsum supar)
    python scripts/check_authors.py --model probformer --authors /tmp/Probabilistic-Transformer
    # idiap/g2g-transformer (their BERT graph model imports transformers: pip install transformers)
    python scripts/check_authors.py --model rngtr --authors /tmp/g2g-transformer
    python scripts/check_authors.py --model prpn --authors /tmp/PRPN                     # yikangshen/PRPN

``--route device`` runs depinduce's side on the route a CUDA device takes (torch's own ops and dropout, the masked
and whole-batch forms a GPU step uses; ``depinduce.models.layers.kernels.device_route``), on the CPU.

Prints, per mode, the largest difference per stage over ``--draws`` draws, then the decoders' agreement, and exits
with status 1 when a stage differs by more than ``--tolerance`` (1e-12) or a decoder differs on an untied input.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import math
import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import torch

from depinduce.data.vocab import Vocab
from depinduce.models.layers.kernels import device_route

F64 = torch.float64
PAD, MASK = Vocab.pad_index, Vocab.mask_index
FIRST_WORD = 3  # indices below are <pad>, <unk>, <mask>
VOCAB = Vocab([f"w{i}" for i in range(40)])
VOCAB_SIZE = len(VOCAB)

Transform = Callable[..., torch.Tensor]  # their tensor(s), in the order named, → our layout


def same(x: torch.Tensor) -> torch.Tensor:
    return x


def transposed(x: torch.Tensor) -> torch.Tensor:
    return x.t()


def stacked(*xs: torch.Tensor) -> torch.Tensor:
    """Several of their maps as one of ours (a fused projection), rows in the order named."""
    return torch.cat(xs, dim=0)


def halves_swapped(x: torch.Tensor) -> torch.Tensor:
    """[a; b] → [b; a] along the first axis (a projection whose two halves the implementations order apart)."""
    first, second = x.chunk(2, dim=0)
    return torch.cat([second, first], dim=0)


@dataclass(frozen=True)
class Reparametrised:
    """A map whose gradients go across differently from its weights: depinduce's parameter is a function of
    theirs (a rescaling, a sum of two of theirs), so the chain rule gives its gradient another form."""

    weight: Transform
    gradient: Transform

    def __call__(self, *xs: torch.Tensor) -> torch.Tensor:
        return self.weight(*xs)


# ------------------------------------------------------------------------------------------ shared machinery


@dataclass
class Pair:
    """Both networks and the map from the authors' parameters to depinduce's: (ours, theirs — one name or a
    tuple of names, their → our layout).  The same map carries their gradients across, so gradients are
    compared parameter by parameter."""

    ours: torch.nn.Module
    theirs: torch.nn.Module
    weights: list[tuple[str, str | tuple[str, ...], Transform]]
    masks: SharedMasks | None = None  # set for the train-mode run with shared dropout masks

    def theirs_as_ours(self, their: str | tuple[str, ...], transform: Transform, grad: bool = False) -> torch.Tensor:
        params = dict(self.theirs.named_parameters())
        tensors = []
        for name in (their,) if isinstance(their, str) else their:
            value = params[name].grad if grad else params[name].detach()
            tensors.append(torch.zeros_like(params[name]) if value is None else value)
        if grad and isinstance(transform, Reparametrised):
            return transform.gradient(*tensors)
        return transform(*tensors)

    def copy_weights(self) -> None:
        """Their weights into ours; every parameter of ours must be mapped (an unmapped one would go unchecked)."""
        ours = dict(self.ours.named_parameters())
        unmapped = set(ours) - {name for name, _, _ in self.weights}
        if unmapped:
            sys.exit(f"depinduce parameters without an authors' counterpart: {', '.join(sorted(unmapped))}")
        with torch.no_grad():
            for mine, their, transform in self.weights:
                value = self.theirs_as_ours(their, transform)
                if value.shape != ours[mine].shape:
                    sys.exit(f"{mine} {tuple(ours[mine].shape)} ← {their} {tuple(value.shape)}: shapes differ")
                ours[mine].copy_(value)

    def gradient_difference(self) -> float:
        ours = dict(self.ours.named_parameters())
        worst = 0.0
        for mine, their, transform in self.weights:
            grad = ours[mine].grad
            grad = torch.zeros_like(ours[mine]) if grad is None else grad
            worst = max(worst, difference(grad, self.theirs_as_ours(their, transform, grad=True)))
        return worst

    def train(self, mode: bool) -> None:
        self.ours.train(mode)
        self.theirs.train(mode)
        self.ours.zero_grad(set_to_none=True)
        self.theirs.zero_grad(set_to_none=True)


def difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest absolute difference; equal infinities (masked scores) count as equal."""
    a, b = a.detach().to(F64), b.detach().to(F64)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}")
    both_inf = torch.isinf(a) & torch.isinf(b) & (a == b)
    return float((a - b).abs().masked_fill(both_inf, 0.0).max()) if a.numel() else 0.0


@dataclass
class StageTable:
    """Largest difference per stage over the draws (stages in first-seen order)."""

    worst: dict[str, float] = field(default_factory=dict)

    def add(self, stage: str, value: float) -> None:
        self.worst[stage] = max(self.worst.get(stage, 0.0), value)

    def print(self, title: str) -> None:
        print(title)
        for stage, value in self.worst.items():
            print(f"  {stage:<34} {value:.2e}")


@dataclass
class DecoderTally:
    """Trees equal; differing but tied under the authors' objective; differing by a score difference within
    float64 round-off (``ROUNDING`` relative: both maximisations add and subtract scores in their own order, so
    neither can tell such trees apart); and differing otherwise (a failure).  A decoder that claims the authors'
    tie rule (``tie_rule`` names it) is given a ``rule`` for :meth:`add`: tied trees that it tells apart (e.g.
    their roots differ, where the rule picks the leftmost best root) are a failure too (``broken``)."""

    ROUNDING = 1e-12

    tie_rule: str = ""
    equal: int = 0
    tied: int = 0
    rounding: int = 0
    differ: int = 0
    broken: int = 0

    def add(self, ours: list[Any], theirs: list[Any], score: Callable[[list[Any]], Any],
            rule: Callable[[list[Any], list[Any]], bool] | None = None) -> None:
        ours_score, their_score = (None, None) if ours == theirs else (score(ours), score(theirs))
        if ours == theirs:
            self.equal += 1
        elif ours_score == their_score:
            if rule is not None and rule(ours, theirs):
                self.broken += 1
            else:
                self.tied += 1
        elif isinstance(ours_score, float) and isinstance(their_score, float) and \
                abs(ours_score - their_score) <= self.ROUNDING * max(1.0, abs(their_score)):
            self.rounding += 1
        else:
            self.differ += 1

    @property
    def total(self) -> int:
        return self.equal + self.tied + self.rounding + self.differ + self.broken

    def line(self) -> str:
        rule = (f"; {self.broken} differ as tied trees that the authors' tie rule ({self.tie_rule}) tells apart"
                if self.tie_rule else "")
        return (f"{self.equal} of {self.total} equal; {self.tied} differ as exactly tied trees; "
                f"{self.rounding} as trees whose scores differ by round-off; {self.differ} differ otherwise{rule}")


def random_lengths(rng: torch.Generator, batch: int, longest: int) -> list[int]:
    """Sentence lengths in [1, longest], the longest always present (so both sides pad to the same width)."""
    lengths = torch.randint(1, longest + 1, (batch,), generator=rng).tolist()
    lengths[0] = longest
    return lengths


def masked_lm_batch(rng: torch.Generator, batch: int = 4, longest: int = 9) -> dict[str, torch.Tensor]:
    """Padded tokens, the real-word mask and the masked positions (30%, at least one)."""
    lengths = random_lengths(rng, batch, longest)
    mask = torch.arange(longest)[None, :] < torch.tensor(lengths)[:, None]
    tokens = torch.randint(FIRST_WORD, VOCAB_SIZE, (batch, longest), generator=rng).masked_fill(~mask, PAD)
    masked = (torch.rand((batch, longest), generator=rng) < 0.3) & mask
    masked[0, 0] = True
    return {"tokens": tokens, "mask": mask, "masked": masked}


def ours_masked_lm_loss(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The engine's masked-LM loss (mean cross-entropy at the masked positions, plus the regulariser)."""
    from depinduce.training.objectives import MaskedLM

    return MaskedLM(0.3).compute(model, **batch).loss


def import_file(name: str, path: Path) -> ModuleType:
    """A module from one file, under ``name`` (the authors' packages import every variant in their __init__)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def need_file(path: Path, what: str) -> None:
    if not path.is_file():
        sys.exit(f"{path}: not found ({what})")


class Adapter(ABC):
    """One backend: build both sides, run one batch stage by stage, and compare the decoders."""

    name: str

    def __init__(self, authors: Path) -> None:
        self.authors = authors

    @abstractmethod
    def build(self, seed: int) -> Pair:
        """Both networks from ``seed`` (the authors' initialisation is the one copied across) and the map."""

    def batch(self, rng: torch.Generator) -> dict[str, torch.Tensor]:
        return masked_lm_batch(rng)

    @abstractmethod
    def stages(self, pair: Pair, batch: dict[str, torch.Tensor]) -> Iterator[tuple[str, Any, Any]]:
        """(stage, ours, theirs) in order; the last is ("loss", our loss, their loss), which is backpropagated."""

    def decoders(self, rng: np.random.Generator, sentences: int) -> dict[str, DecoderTally]:
        """The own decoders' agreement with the authors' (none compared for this backend yet)."""
        return {}

    MODES: tuple[str, ...] = ("eval", "train")  # the runs at dropout 0 (``variants`` may run fewer)
    BACKWARD = True  # the last stage is the loss, backpropagated and its gradients compared
    MASK_DROPOUT = 0.0  # > 0: the backend also runs in train mode at this dropout with shared masks

    def mask_title(self) -> str:
        return f"train mode, dropout {self.MASK_DROPOUT} with the same masks on both sides"

    def variants(self) -> list[tuple[str, Adapter]]:
        """Further runs of the same comparison, each (label, adapter): depinduce switches and authors' variants
        that the default run does not reach (the ROOT encoder, ``loss_chunks``, the refinement loop)."""
        return []

    def built_with_dropout(self, seed: int, dropout: float) -> Pair:
        """Both networks at ``dropout`` (backends with ``MASK_DROPOUT``)."""
        raise NotImplementedError(f"{self.name}: no shared-mask run")

    def share_masks(self, pair: Pair, masks: SharedMasks, batch: dict[str, torch.Tensor]
                    ) -> contextlib.AbstractContextManager[None]:
        """Route both sides' dropout through ``masks`` while the context is open (backends with
        ``MASK_DROPOUT``)."""
        raise NotImplementedError(f"{self.name}: no shared-mask run")

    @staticmethod
    def fresh_pass(pair: Pair) -> Callable[[], None]:
        """What to call before each of depinduce's top-level calls in ``stages``: with shared masks, a new forward
        pass (the masks start over, as the authors' one forward pass does)."""
        masks = pair.masks
        return (lambda: masks.restart("ours")) if masks is not None else (lambda: None)

    def dropped_entries(self, x: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The entries of a dropped tensor that both sides compute alike (backends with ``MASK_DROPOUT``)."""
        return x


@dataclass
class SharedMasks:
    """One dropout for both sides: keep-masks drawn with ``torch.rand`` from torch's default generator, reseeded
    when either side starts a forward pass (``restart``: from a forward pre-hook, or by the adapter before each of
    depinduce's top-level calls), so two implementations that drop the same tensors in the same order draw the
    same masks (and torch's checkpoint, which restores the generator when it recomputes in backward, draws them
    again).  Each mask is drawn in the authors' layout: ``layout`` maps the shape depinduce asks for to the shape
    the authors' side drops and a function that lays such a mask out as depinduce's (their time-major or
    head-last tensors, depinduce's rows-only last layer).  Every draw's shape (in the authors' layout) is kept per
    side and forward pass, so the check sees whether both sides drop the same tensors in the same order; where the
    dropped tensors themselves are at hand (:meth:`dropout`), each call's input and output are kept too."""

    seed: int
    side: str = "ours"
    calls: dict[str, list[list[tuple[torch.Tensor, torch.Tensor]]]] = field(
        default_factory=lambda: {"ours": [], "theirs": []})
    draws: dict[str, list[list[tuple[int, ...]]]] = field(default_factory=lambda: {"ours": [], "theirs": []})
    layout: Callable[[tuple[int, ...]], tuple[tuple[int, ...], Transform]] | None = None

    def restart(self, side: str) -> None:
        torch.manual_seed(self.seed)
        self.side = side
        self.calls[side].append([])
        self.draws[side].append([])

    def keep(self, shape: tuple[int, ...], p: float) -> torch.Tensor:
        """A keep-mask for a tensor of ``shape`` on the current side (probability 1 − p per element)."""
        their_shape, as_ours = tuple(shape), same
        if self.side == "ours" and self.layout is not None:
            their_shape, as_ours = self.layout(tuple(shape))
        if not self.draws[self.side]:
            sys.exit(f"a dropout mask drawn on the {self.side} side before any forward pass started")
        self.draws[self.side][-1].append(their_shape)
        return as_ours(torch.rand(their_shape, dtype=F64) >= p).contiguous()

    def dropout(self, x: torch.Tensor, p: float, training: bool = True, rows: torch.Tensor | None = None
                ) -> torch.Tensor:
        """Inverted dropout; with ``rows`` (depinduce's rows-only layers) the whole (B, T, C) mask is drawn and
        the selected rows taken, as depinduce's own ``apply_dropout`` does."""
        if not training or p == 0.0:
            return x
        shape = x.shape if rows is None else (*rows.shape, x.shape[-1])
        keep = self.keep(tuple(shape), p)
        keep = keep if rows is None else keep[rows].view(x.shape)
        out = x * keep / (1.0 - p)
        self.calls[self.side][-1].append((x.detach(), out.detach()))
        return out

    def functional_dropout(self, x: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
                           ) -> torch.Tensor:
        """``torch.nn.functional.dropout``'s stand-in (the authors' ``nn.Dropout`` modules, depinduce's dropout
        off the CPU's route)."""
        if not training or p == 0.0:
            return x
        out = x * self.keep(tuple(x.shape), p) / (1.0 - p)
        return x.copy_(out) if inplace else out

    def drop_mask(self, shape: torch.Size | tuple[int, ...], p: float, seed: int,
                  rows: torch.Tensor | None = None) -> torch.Tensor:
        """``depinduce.models.layers.dropout.drop_mask``'s stand-in (true = dropped); ``rows`` as there."""
        if rows is not None:
            return ~self.keep((*rows.shape, shape[-1]), p)[rows].view(shape)
        return ~self.keep(tuple(shape), p)

    def stages(self, entries: Callable[[torch.Tensor], torch.Tensor]
               ) -> Iterator[tuple[str, torch.Tensor, torch.Tensor]]:
        """The masks of depinduce's last forward pass (a whole training pass: the loss) against those of the
        authors' first: the same shapes in the same order, or the check stops; then, where the dropped tensors
        were kept, what went in and what came out, at the ``entries`` both compute alike (padding excluded)."""
        ours, theirs = self.draws["ours"][-1], self.draws["theirs"][0]
        if ours != theirs:
            sys.exit(f"the two sides drop different tensors (shapes in the authors' layout, in order): {ours} vs "
                     f"{theirs}")
        yield "dropout masks drawn (count)", torch.tensor(float(len(ours)), dtype=F64), \
            torch.tensor(float(len(theirs)), dtype=F64)
        our_calls, their_calls = self.calls["ours"][-1], self.calls["theirs"][0]
        if not our_calls and not their_calls:
            return
        if [x.shape for x, _ in our_calls] != [x.shape for x, _ in their_calls]:
            sys.exit(f"the two sides drop different tensors: {[tuple(x.shape) for x, _ in our_calls]} vs "
                     f"{[tuple(x.shape) for x, _ in their_calls]}")
        for k, name in enumerate(("inputs", "outputs")):
            yield f"dropout {name} (every call)", torch.cat([entries(call[k]).flatten() for call in our_calls]), \
                torch.cat([entries(call[k]).flatten() for call in their_calls])


@contextlib.contextmanager
def their_masks_restarted(theirs: torch.nn.Module, masks: SharedMasks) -> Iterator[None]:
    """:func:`routed_dropout`, with the authors' side of ``masks`` restarted at each forward pass of ``theirs``
    (their model draws its masks in its own order, from the first again each call)."""
    hook = theirs.register_forward_pre_hook(lambda *_: masks.restart("theirs"))
    try:
        with routed_dropout(masks):
            yield
    finally:
        hook.remove()


@contextlib.contextmanager
def routed_dropout(masks: SharedMasks) -> Iterator[None]:
    """Every dropout of both sides through ``masks`` while open: ``torch.nn.functional.dropout`` (the authors'
    ``nn.Dropout`` modules; depinduce off the CPU's route) and depinduce's CPU masks (``drop_mask`` wherever a
    depinduce module imported it; ``new_seed`` returns 0 instead of drawing from torch's generator, which the
    shared masks use)."""
    from depinduce.models.layers import dropout as own

    originals = (own.drop_mask, own.new_seed)
    replacements = (masks.drop_mask, lambda: 0)
    patched: list[tuple[Any, str, Any]] = [(torch.nn.functional, "dropout", torch.nn.functional.dropout)]
    for module in list(sys.modules.values()):
        if module is None or not getattr(module, "__name__", "").startswith("depinduce"):
            continue
        for name, original in zip(("drop_mask", "new_seed"), originals):
            if getattr(module, name, None) is original:
                patched.append((module, name, original))
    try:
        for module, name, _ in patched:
            setattr(module, name, masks.functional_dropout if name == "dropout"
                    else replacements[("drop_mask", "new_seed").index(name)])
        yield
    finally:
        for module, name, original in patched:
            setattr(module, name, original)


class SharedDropout(torch.nn.Module):
    """An ``nn.Dropout`` stand-in on the authors' side that drops through a :class:`SharedMasks`."""

    def __init__(self, p: float, masks: SharedMasks) -> None:
        super().__init__()
        self.p, self.masks = p, masks

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.masks.dropout(x, self.p, self.training)


def prepared(pair: Pair) -> Pair:
    pair.ours.to(F64)
    pair.theirs.to(F64)
    pair.copy_weights()
    return pair


def run_mode(adapter: Adapter, pair: Pair, batch: dict[str, torch.Tensor], training: bool, table: StageTable,
             masks: SharedMasks | None = None) -> None:
    """Every stage of one forward and backward pass, into ``table``."""
    pair.train(training)
    losses = None
    for stage, ours, theirs in adapter.stages(pair, batch):
        check_float64(stage, ours)
        table.add(stage, difference(ours, theirs))
        if stage == "loss":
            losses = (ours, theirs)
    if not adapter.BACKWARD:
        return
    assert losses is not None, "an adapter's last stage is the loss"
    if masks is not None:
        for stage, ours, theirs in masks.stages(lambda x: adapter.dropped_entries(x, batch)):
            table.add(stage, difference(ours, theirs))
    losses[0].backward()
    losses[1].backward()
    table.add("gradients", pair.gradient_difference())


TITLES = {"eval": "eval mode", "train": "train mode (dropout 0)"}


def run_draw(adapter: Adapter, seed: int, tables: dict[str, StageTable]) -> None:
    for label, variant in [("", adapter), *adapter.variants()]:
        suffix = f" — {label}" if label else ""
        batch = variant.batch(torch.Generator().manual_seed(seed))
        if variant.MODES:
            pair = prepared(variant.build(seed))
            for mode in variant.MODES:
                run_mode(variant, pair, batch, mode == "train", tables.setdefault(TITLES[mode] + suffix, StageTable()))
        if variant.MASK_DROPOUT:
            masks = SharedMasks(seed)
            pair = prepared(variant.built_with_dropout(seed, variant.MASK_DROPOUT))
            pair.masks = masks
            with variant.share_masks(pair, masks, batch):
                run_mode(variant, pair, batch, True, tables.setdefault(variant.mask_title() + suffix, StageTable()),
                         masks)


def check_float64(stage: str, value: torch.Tensor) -> None:
    if value.is_floating_point() and value.dtype != F64:
        sys.exit(f"depinduce's {stage} is {value.dtype} in a float64 model")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, choices=sorted(ADAPTERS))
    parser.add_argument("--authors", required=True, type=Path, help="the authors' checkout")
    parser.add_argument("--draws", type=int, default=5, help="weight and batch draws (default 5)")
    parser.add_argument("--sentences", type=int, default=200, help="random score matrices per decoder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tolerance", type=float, default=1e-12)
    parser.add_argument("--route", choices=("cpu", "device"), default="cpu",
                        help="depinduce's kernels: the CPU's own (default) or the route a CUDA device takes, "
                             "run on the CPU (torch's own ops and dropout, static-shape forms)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    adapter = ADAPTERS[args.model](args.authors.resolve())
    tables: dict[str, StageTable] = {}
    with device_route() if args.route == "device" else contextlib.nullcontext():
        for draw in range(args.draws):
            run_draw(adapter, args.seed + draw, tables)
    print(f"{args.model}: depinduce ({args.route} route) vs the authors' code at {args.authors}, float64, "
          f"{args.draws} draws; largest absolute difference per stage")
    for title, table in tables.items():
        table.print(title)
    tallies = adapter.decoders(np.random.default_rng(args.seed), args.sentences)
    for name, tally in tallies.items():
        print(f"decoder {name}: {tally.line()}")
    worst = max(v for table in tables.values() for v in table.worst.values())
    failed = worst > args.tolerance or any(t.differ or t.broken for t in tallies.values())
    print("FAIL" if failed else "OK", f"(largest difference {worst:.2e}, tolerance {args.tolerance:.0e})")
    return 1 if failed else 0


# ----------------------------------------------------------------------------------------------------- UDGN


class UDGNAdapter(Adapter):
    """yikangshen/UDGN (``models.py``, ``layers.py``; decoders in ``test_phrase_grammar.py``).  Their parser's
    LSTM is ``emb_size`` wide and scales the bilinear scores by emb_size^-½, so depinduce runs with
    ``parser_hidden_size = hidden_size``; their projection's halves are [parent; child], depinduce's [child;
    parent]; their per-relation biases (2, N) are depinduce's (N, 2).

    The shared-mask run (dropout 0.2 in the parser and the DGN, as their ``parser_dropout`` and ``dropout``, and
    attention dropout 0.1) draws every mask in their layout: their controller weights are (B, T, T, heads),
    depinduce's (B, heads, T, T); their last dropout drops the whole (B, T, H) output, depinduce's only the
    masked positions.  Their parser LSTM drops between its layers inside torch's kernel, where no shared mask
    reaches; for this run it steps through its layers one at a time with ``F.dropout`` between them on the padded
    outputs, which is what ``nn.LSTM(dropout=p)`` documents (:func:`layerwise_lstm`)."""

    name = "udgn"
    SIZE = {"hidden_size": 12, "n_layers": 2, "n_heads": 3, "head_size": 5, "parser_layers": 2}
    MASK_DROPOUT = 0.2  # the paper recipe's dropout
    MASK_DROPATT = 0.1  # and its attention dropout

    def mask_title(self) -> str:
        return (f"train mode, dropout {self.MASK_DROPOUT} and attention dropout {self.MASK_DROPATT} with the same "
                "masks on both sides")

    def module(self) -> ModuleType:
        need_file(self.authors / "models.py", "give the yikangshen/UDGN checkout")
        if str(self.authors) not in sys.path:
            sys.path.insert(0, str(self.authors))
        import models  # type: ignore[import-not-found]

        return models

    def build(self, seed: int) -> Pair:
        return self.built_with_dropout(seed, 0.0)

    def built_with_dropout(self, seed: int, dropout: float) -> Pair:
        from depinduce.models.udgn import UDGN, UDGNConfig

        size = self.SIZE
        dropatt = self.MASK_DROPATT if dropout else 0.0
        torch.manual_seed(seed)
        theirs = self.module().UDGN(
            emb_size=size["hidden_size"], head_size=size["head_size"], nlayers=size["n_layers"],
            ntokens=VOCAB_SIZE, nhead=size["n_heads"], dropout=dropout, parser_dropout=dropout, dropatt=dropatt,
            pos_emb=False, pad=PAD, n_parser_layers=size["parser_layers"])
        ours = UDGN(UDGNConfig(**size, parser_hidden_size=size["hidden_size"], dropout=dropout, dropatt=dropatt,
                               graph_floor=1e-6), VOCAB)
        weights: list[tuple[str, str | tuple[str, ...], Transform]] = [
            ("embedding.weight", "emb.weight", same), ("output_bias", "output_layer.bias", same),
            ("final_norm.weight", "norm.weight", same), ("final_norm.bias", "norm.bias", same),
            ("parser.embedding.weight", "parser_emb.weight", same),
            ("parser.project.weight", "parser_ff.weight", halves_swapped),
            ("parser.project.bias", "parser_ff.bias", halves_swapped),
        ]
        weights += [(f"parser.encoder.lstm.{name}", f"parser_layers.{name}", same)
                    for name, _ in theirs.parser_layers.named_parameters()]
        for i in range(size["n_layers"]):
            ours_layer, their_layer = f"layers.{i}.", f"layers.{i}.self_attn."
            weights += [(ours_layer + a, their_layer + b, same) for a, b in (
                ("project.weight", "proj.weight"), ("project.bias", "proj.bias"),
                ("out.weight", "out_proj.weight"), ("out.bias", "out_proj.bias"))]
            weights.append((ours_layer + "direction_bias", their_layer + "rels_bias", transposed))
        return Pair(ours, theirs, weights)

    @contextlib.contextmanager
    def share_masks(self, pair: Pair, masks: SharedMasks, batch: dict[str, torch.Tensor]) -> Iterator[None]:
        width = batch["mask"].shape
        masked = batch["masked"]

        def layout(shape: tuple[int, ...]) -> tuple[tuple[int, ...], Transform]:
            if len(shape) == 4:  # the controller weights: depinduce's (B, heads, T, T), theirs (B, T, T, heads)
                b, n, t, _ = shape
                return (b, t, t, n), lambda keep: keep.permute(0, 3, 1, 2)
            if len(shape) == 2:  # before the output layer: depinduce drops the masked positions only
                return (*width, shape[1]), lambda keep: keep[masked]
            return shape, same

        masks.layout = layout
        lstm = pair.theirs.parser_layers
        lstm.forward = layerwise_lstm(lstm)
        try:
            with their_masks_restarted(pair.theirs, masks):
                yield
        finally:
            del lstm.forward

    def stages(self, pair: Pair, batch: dict[str, torch.Tensor]) -> Iterator[tuple[str, Any, Any]]:
        ours, theirs = pair.ours, pair.theirs
        tokens, mask, masked = batch["tokens"], batch["mask"], batch["masked"]
        inputs = tokens.masked_fill(masked, MASK)
        rows = mask[:, :, None]  # their padding rows hold a distribution over the real words; ours are 0
        fresh = self.fresh_pass(pair)
        states: list[torch.Tensor] = []
        fresh()
        p = ours.head_distribution(inputs, mask)
        fresh()
        graph = ours.graph(inputs, mask)
        hooks = [layer.register_forward_hook(lambda _m, _i, out: states.append(out.detach().clone()))
                 for layer in ours.layers]
        try:
            fresh()
            our_logits = ours.output_logits(ours.encode_masked(inputs, mask, masked))  # one pass, its last mask
        finally:
            for hook in hooks:
                hook.remove()
        pos = torch.arange(tokens.size(1))[None, :]
        their_loss, out = theirs(inputs, tokens.masked_fill(~masked, PAD), pos)
        their_p = out["loghead"].view_as(p).softmax(dim=-1)
        yield "head distribution p", p, their_p * rows
        # their m; they add the 1e-6 inside the log and zero padding keys after the exp
        their_graph = (out["att_mask"] + 1e-6).masked_fill(~mask[:, None, :], 0.0) * rows
        yield "graph weights m (+ floor)", graph * rows, their_graph
        for i, (state, their_state) in enumerate(zip(states, out["all_layers"][1:])):
            yield f"hidden states, layer {i + 1}", state * rows, their_state * rows
        yield "logits (masked positions)", our_logits, theirs.output_layer(out["raw_output"][masked])
        fresh()
        our_loss = ours_masked_lm_loss(ours, batch)
        yield "loss", our_loss, their_loss

    def decoders(self, rng: np.random.Generator, sentences: int) -> dict[str, DecoderTally]:
        """Their ``argmax`` and ``dms`` on p with the diagonal zeroed (float32, as their model's), ours through
        the registered decoders on the log-distribution scores the backend gives (log_softmax, read in float32
        by ``parse``).  A third of the sentences have logits on a grid of three values (or all equal), so rows
        tie and so do whole trees with different roots; for these ours read the logarithm of their float32 p, so
        both decoders see the same numbers and the same ties.  Both decoders claim the authors' tie rules: tied
        trees from ``udgn-argmax`` must still be equal (numpy's first maximum), and tied ``udgn-tree`` trees must
        have the same root (their trials keep the first best root; ties between trees with the same root follow
        each side's Chu-Liu/Edmonds, a documented difference)."""
        from depinduce.models.base import ParseScores
        from depinduce.models.udgn.decoders import AUTHORS_DECODERS

        need_file(self.authors / "test_phrase_grammar.py", "their decoders")
        if str(self.authors) not in sys.path:
            sys.path.insert(0, str(self.authors))
        import test_phrase_grammar as theirs  # type: ignore[import-not-found]

        tallies = {"udgn-argmax": DecoderTally(tie_rule="numpy's first maximum"),
                   "udgn-tree": DecoderTally(tie_rule="the leftmost best root")}
        for _ in range(sentences):
            n = int(rng.integers(1, 11))
            coarse = rng.random() < 1 / 3
            if coarse:
                logits = torch.from_numpy(rng.integers(0, 3, size=(n, n)) * rng.choice([0.0, 1.0, 4.0])).float()
            else:
                logits = torch.from_numpy(rng.normal(size=(n, n)) * rng.choice([1.0, 8.0, 40.0])).float()
            softmax = logits.softmax(dim=-1)
            head = softmax.clone().fill_diagonal_(0.0).numpy()
            log_p = softmax.double().log() if coarse else logits.log_softmax(dim=-1)
            scores = torch.full((n + 1, n + 1), float("-inf"), dtype=log_p.dtype)
            scores[1:, 0] = log_p.diagonal()
            scores[1:, 1:] = log_p.fill_diagonal_(float("-inf"))
            parse_scores = ParseScores(heads=scores)
            weights = np.log(head + 1e-9).astype(np.float64)

            def objective(heads: list[int], weights: np.ndarray = weights) -> float:
                return math.fsum(float(weights[i, h - 1]) for i, h in enumerate(heads) if h != 0)

            their_argmax = [0 if int(j) == i else int(j) + 1 for i, j in enumerate(np.argmax(head, axis=1))]
            their_tree = [0 if int(j) == i else int(j) + 1 for i, j in enumerate(theirs.dms(weights))]
            tallies["udgn-argmax"].add(AUTHORS_DECODERS["udgn-argmax"].decode(parse_scores), their_argmax,
                                       lambda heads, head=head: math.fsum(float(head[i, h - 1]) for i, h in
                                                                          enumerate(heads) if h != 0),
                                       rule=lambda _ours, _theirs: True)
            tallies["udgn-tree"].add(AUTHORS_DECODERS["udgn-tree"].decode(parse_scores), their_tree, objective,
                                     rule=lambda ours, theirs: ours.index(0) != theirs.index(0))
        return tallies


def layerwise_lstm(lstm: torch.nn.LSTM) -> Callable[..., tuple[Any, None]]:
    """A ``forward`` for the authors' bidirectional ``nn.LSTM(num_layers=L, dropout=p)`` on a packed sequence that
    runs it one layer at a time (torch's own one-layer LSTM on its parameters) with
    ``torch.nn.functional.dropout`` on each layer's output but the last — what ``nn.LSTM`` documents its dropout
    to be — so that the masks come from the shared source: on the padded (B, T, 2H) outputs, then packed again.
    Returns (output, None): their code reads only the output."""
    from torch.nn.utils import rnn

    kinds = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")

    def forward(packed: rnn.PackedSequence, hx: Any = None) -> tuple[rnn.PackedSequence, None]:
        x = packed
        batch = int(packed.batch_sizes[0])
        for layer in range(lstm.num_layers):
            if layer > 0:
                padded, lengths = rnn.pad_packed_sequence(x, batch_first=True)
                padded = torch.nn.functional.dropout(padded, lstm.dropout, lstm.training)
                x = rnn.pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False)
            params = [getattr(lstm, f"{kind}_l{layer}{suffix}") for suffix in ("", "_reverse") for kind in kinds]
            zeros = x.data.new_zeros((2, batch, lstm.hidden_size))
            out = torch._VF.lstm(x.data, x.batch_sizes, (zeros, zeros), params, True, 1, 0.0,  # type: ignore[attr-defined]
                                 lstm.training, True)[0]
            x = rnn.PackedSequence(out, x.batch_sizes, x.sorted_indices, x.unsorted_indices)
        return x, None

    return forward


# ----------------------------------------------------------------------------------------------- StructFormer


class StructFormerAdapter(Adapter):
    """google-research/google-research ``structformer/`` (``structformer.py``, ``layers.py``), at their training
    command's settings: relations (head, child), softmax relation weights, no relative bias, a position
    embedding of 500 rows (depinduce: ``max_positions: 500``), feed-forward 4 × hidden, and depinduce's
    ``margin: batch``.  Their q, k and v projections are depinduce's one fused [q; k; v].  Their ``cumsum``
    builds its triangular matrices with torch's default dtype, so their side runs with the default dtype set to
    float64 (the only shim)."""

    name = "structformer"
    SIZE = {"hidden_size": 12, "n_layers": 2, "n_heads": 3, "n_parser_layers": 2, "conv_size": 3}
    MASK_DROPOUT = 0.1  # their run.sh's dropout
    MASK_DROPATT = 0.05  # their default is 0; any rate, so that the attention dropout's place is checked too

    def mask_title(self) -> str:
        return (f"train mode, dropout {self.MASK_DROPOUT} and attention dropout {self.MASK_DROPATT} with the same "
                "masks on both sides")

    def module(self) -> ModuleType:
        root = self.authors.parent if (self.authors / "structformer.py").is_file() else self.authors
        need_file(root / "structformer" / "structformer.py", "give the folder that holds structformer/")
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        from structformer import structformer  # type: ignore[import-not-found]

        return structformer

    def build(self, seed: int) -> Pair:
        return self.built_with_dropout(seed, 0.0)

    def built_with_dropout(self, seed: int, dropout: float) -> Pair:
        from depinduce.models.structformer import StructFormer, StructFormerConfig

        size = self.SIZE
        dropatt = self.MASK_DROPATT if dropout else 0.0
        torch.manual_seed(seed)
        theirs = self.module().StructFormer(
            size["hidden_size"], size["n_layers"], VOCAB_SIZE, size["n_heads"], dropout, dropatt, False, True,
            pad=PAD, n_parser_layers=size["n_parser_layers"], conv_size=size["conv_size"],
            relations=("head", "child"), weight_act="softmax")
        ours = StructFormer(StructFormerConfig(**size, ff_size=4 * size["hidden_size"], dropout=dropout,
                                               dropatt=dropatt, pos_emb=True, max_positions=500, margin="batch"),
                            VOCAB)
        weights: list[tuple[str, str | tuple[str, ...], Transform]] = [
            ("log_sharpness", "_scaler", same), ("relation_logits", "_rel_weight", same),
            ("embedding.weight", "emb.weight", same), ("position.weight", "pos_emb.weight", same),
            ("output_bias", "output_layer.bias", same),
            ("final_norm.weight", "norm.weight", same), ("final_norm.bias", "norm.bias", same),
        ]
        parser = [(f"convs.{i}", f"parser_layers.{i}.0.conv") for i in range(size["n_parser_layers"])]
        parser += [("distance_conv", "distance_ff.0.conv"), ("distance_out", "distance_ff.3"),
                   ("height_proj", "height_ff.0"), ("height_out", "height_ff.3")]
        for mine, their in parser:
            weights += [(f"parser.{mine}.{kind}", f"{their}.{kind}", same) for kind in ("weight", "bias")]
        for i in range(size["n_layers"]):
            ours_layer, their_layer = f"layers.{i}.", f"layers.{i}."
            for kind in ("weight", "bias"):
                weights.append((f"{ours_layer}attention.qkv.{kind}",
                                tuple(f"{their_layer}self_attn.{x}_proj.{kind}" for x in "qkv"), stacked))
                weights += [(ours_layer + a + kind, their_layer + b + kind, same) for a, b in (
                    ("attention.out.", "self_attn.out_proj."), ("attn_norm.", "norm."),
                    ("ff_norm.", "feedforward.0."), ("ff_in.", "feedforward.1."), ("ff_out.", "feedforward.4."))]
        return Pair(ours, theirs, weights)

    @contextlib.contextmanager
    def share_masks(self, pair: Pair, masks: SharedMasks, batch: dict[str, torch.Tensor]) -> Iterator[None]:
        """Their layers run time-major: (T, B, ·) tensors, attention weights (B·heads, T, T); depinduce's are
        (B, T, ·), (heads, B, T, T) (``(heads·B, T, T)`` off the CPU's route), its last layer at the masked
        positions only (the whole mask drawn, its rows taken) and its output dropout on those positions."""
        width, heads = batch["mask"].shape, self.SIZE["n_heads"]
        masked = batch["masked"]
        b, t = width

        def layout(shape: tuple[int, ...]) -> tuple[tuple[int, ...], Transform]:
            if len(shape) == 4:  # attention weights, head-major
                return (b * heads, t, t), lambda keep: keep.view(b, heads, t, t).transpose(0, 1)
            if shape == (heads * b, t, t):  # the same off the CPU's route, flattened
                return shape, lambda keep: keep.view(b, heads, t, t).transpose(0, 1).reshape(shape)
            if len(shape) == 3:
                return (shape[1], shape[0], shape[2]), lambda keep: keep.transpose(0, 1)
            return (*width, shape[1]), lambda keep: keep[masked]  # before the output layer

        masks.layout = layout
        with their_masks_restarted(pair.theirs, masks):
            yield

    def stages(self, pair: Pair, batch: dict[str, torch.Tensor]) -> Iterator[tuple[str, Any, Any]]:
        ours, theirs = pair.ours, pair.theirs
        tokens, mask, masked = batch["tokens"], batch["mask"], batch["masked"]
        inputs = tokens.masked_fill(masked, MASK)
        boundaries = word_boundaries(mask)
        fresh = self.fresh_pass(pair)
        states: list[torch.Tensor] = []
        their_states: list[torch.Tensor] = []
        hooks = [layer.register_forward_hook(lambda _m, _i, out: states.append(out.detach().clone()))
                 for layer in ours.layers]
        hooks += [layer.register_forward_hook(lambda _m, _i, out: their_states.append(out.transpose(0, 1)))
                  for layer in theirs.layers]
        try:
            found = ours.structure(inputs, mask, batch_margin=True)
            fresh()
            ours.encode(inputs, mask)
            pos = torch.arange(tokens.size(1))[None, :]
            with authors_float64():
                their_logits, out = theirs(inputs, pos)
        finally:
            for hook in hooks:
                hook.remove()
        pairs = mask[:, :, None] & mask[:, None, :]
        yield "distances (calibrated)", found.distance[boundaries], out["distance"][boundaries]
        yield "heights", found.height[mask], out["height"][mask]
        yield "parent distribution P", found.parent * pairs, out["head"] * pairs
        for i, (state, their_state) in enumerate(zip(states, their_states)):
            yield f"hidden states, layer {i + 1}", state[mask], their_state[mask]
        their_logits = their_logits.view(*tokens.shape, -1)[masked]
        fresh()
        yield "logits (masked positions)", ours.output_logits(ours.encode_masked(inputs, mask, masked)), their_logits
        their_loss = torch.nn.functional.cross_entropy(their_logits, tokens[masked])
        fresh()
        our_loss = ours_masked_lm_loss(ours, batch)
        yield "loss", our_loss, their_loss

    def decoders(self, rng: np.random.Generator, sentences: int) -> dict[str, DecoderTally]:
        """Their test-time parse (``test_phrase_grammar.py``; needs their ``tree_utils.py`` and ``data_ptb.py``
        beside ``structformer.py``) on random float32 distances, heights and parent distributions: the
        constituency tree is their ``build_tree`` (gap 0), beside depinduce's ``tree_ties: nary`` tree; the
        dependency heads are their rule, which is one expression inside their ``test`` (``argmax(P[i]) + 1``
        unless the word's height is the sentence's greatest, then ROOT), beside ``structformer-argmax`` on the
        scores the backend hands its decoders (log P floored at float32's smallest normal number, the diagonal
        −∞).  Values are drawn on a coarse grid (eighths) for a third of the sentences, so tied distances, heights
        and parent probabilities are common; differing heads are scored by the sum of their parent probabilities.
        Rows whose parent probabilities all lie below float32's smallest normal number (1.2e-38, depinduce's
        floor) count as ties: their trees' scores differ by less than that (README: the one documented case)."""
        from depinduce.models.base import ParseScores
        from depinduce.models.structformer.decoders import OWN_DECODERS
        from depinduce.structures.spans import labelled_spans, nary_tree_from_distances

        self.module()
        root = self.authors.parent if (self.authors / "structformer.py").is_file() else self.authors
        need_file(root / "structformer" / "tree_utils.py", "their tree_utils.py (and data_ptb.py) beside it")
        tree_utils = importlib.import_module("structformer.tree_utils")
        tallies = {"structformer-argmax": DecoderTally(), "tree_ties: nary trees": DecoderTally()}
        for _ in range(sentences):
            n = int(rng.integers(1, 11))
            coarse = rng.random() < 1 / 3
            distance, height = (grid_or_normal(rng, size, coarse) for size in (n - 1, n))
            logits = torch.from_numpy(rng.normal(size=(n, n + 1)) * rng.choice([1.0, 8.0, 40.0])).float()
            logits[:, 1:].fill_diagonal_(float("-inf"))
            probs = logits.softmax(dim=-1)  # column 0: ROOT
            parent = probs[:, 1:].mul(8).round().div(8) if coarse else probs[:, 1:]
            theirs = [int(np.argmax(parent[i].numpy())) + 1 if height[i] < height.max() else 0 for i in range(n)]
            heads = torch.full((n + 1, n + 1), float("-inf"))
            floor = torch.finfo(torch.float32).tiny
            heads[1:, 1:] = parent.clamp_min(floor).log().fill_diagonal_(float("-inf"))
            heads[1:, 0] = probs[:, 0].clamp_min(floor).log()
            scores = ParseScores(heads=heads, heights=torch.from_numpy(height))
            ours = OWN_DECODERS["structformer-argmax"].decode(scores)
            tallies["structformer-argmax"].add(ours, theirs, lambda tree, parent=parent: math.fsum(
                float(parent[i, h - 1]) for i, h in enumerate(tree) if h != 0))
            words = [f"w{i}" for i in range(n)]
            their_tree = tree_utils.build_tree([*distance.tolist(), 1e9], words)
            their_spans = sorted(tree_utils.get_brackets(their_tree)[0] | ({(0, n)} if n > 1 else set()))
            our_spans = sorted({(a, b) for _, a, b in labelled_spans(nary_tree_from_distances(words, distance.tolist()))
                                if b - a > 1})
            tallies["tree_ties: nary trees"].add(our_spans, their_spans, lambda spans: tuple(spans))
        return tallies


def grid_or_normal(rng: np.random.Generator, size: int, coarse: bool) -> np.ndarray:
    """``size`` float32 values: on a grid of four values (ties common), or standard normal."""
    values = rng.integers(0, 4, size=size) / 4 if coarse else rng.normal(size=size)
    return values.astype(np.float32)


def word_boundaries(mask: torch.Tensor) -> torch.Tensor:
    """True at the boundaries between two real words (position i when word i+1 is real)."""
    return torch.nn.functional.pad(mask[:, 1:], (0, 1), value=False)


class authors_float64:
    """torch's default dtype float64 while the authors' code runs: some of it makes constants with the default
    dtype (``torch.ones(...)``), which a float64 model would otherwise meet as float32."""

    def __enter__(self) -> None:
        self.default = torch.get_default_dtype()
        torch.set_default_dtype(F64)

    def __exit__(self, *_: object) -> None:
        torch.set_default_dtype(self.default)


# ------------------------------------------------------------------------------------ Probabilistic Transformer


class ProbFormerAdapter(Adapter):
    """whyNLP/Probabilistic-Transformer: their ``HalfLazyHeadProbEncoder`` (the ``crf-mlm-ptb`` configuration's
    encoder: asynchronous updates, ``uv`` decomposition, distance buckets 1..t and beyond), imported from its
    file alone, between the parts flair supplies to their ``MaskedLanguageModel``: an embedding, an output
    ``nn.Linear``, and their ``_calculate_loss`` (token-summed cross-entropy over the masked words divided by
    their count) plus their trainer's ``ternary_l2 · getTernaryNorm(2)``.  Their U, V are (K, d, R, C),
    depinduce's (K, C, R, d).  Shims: their distance masks are built float32 (``dtype=torch.float``) and are
    converted to float64; their forward runs with the default dtype float64."""

    name = "probformer"
    SIZE = {"d": 10, "n_channels": 3, "n_iter": 3, "rank": 4, "distance_threshold": 2}
    TERNARY_L2 = 5e-4
    MASK_DROPOUT = 0.15  # the paper configuration's rate
    CHUNKS = 2  # loss_chunks in its variant: the batch of 4 in runs of 2, as their trainer's micro-batches of 2

    def __init__(self, authors: Path, *, root: bool = False, chunks: int | None = None) -> None:
        super().__init__(authors)
        self.root, self.chunks = root, chunks
        if chunks is not None:  # a training-time switch (evaluation ignores it): train mode only, dropout 0
            self.MODES, self.MASK_DROPOUT = ("train",), 0.0

    def variants(self) -> list[tuple[str, Adapter]]:
        """The ROOT variant (``root: true`` with its switches at their defaults, beside their
        ``RootedHeadProbEncoder``) and ``loss_chunks`` (beside their trainer's micro-batches)."""
        if self.root or self.chunks is not None:
            return []
        return [("ROOT variant (their RootedHeadProbEncoder)", ProbFormerAdapter(self.authors, root=True)),
                (f"loss_chunks: {self.CHUNKS} (their trainer's micro-batches, losses summed)",
                 ProbFormerAdapter(self.authors, chunks=self.CHUNKS))]

    def build(self, seed: int) -> Pair:
        return self.built_with_dropout(seed, 0.0)

    def built_with_dropout(self, seed: int, dropout: float) -> Pair:
        from torch import nn

        from depinduce.models.probformer import ProbFormer, ProbFormerConfig

        file, encoder = (("rootedHeadCRFEncoder.py", "RootedHeadProbEncoder") if self.root
                         else ("lazyHeadCRFEncoder.py", "HalfLazyHeadProbEncoder"))
        candidates = [self.authors / "src" / "models" / "modules", self.authors]
        path = next((c / file for c in candidates if (c / file).is_file()), candidates[0] / file)
        need_file(path, "give the whyNLP/Probabilistic-Transformer checkout")
        module = import_file(f"authors_{path.stem}", path)
        size = self.SIZE
        torch.manual_seed(seed)
        theirs = nn.Module()
        theirs.embedding = nn.Embedding(VOCAB_SIZE, size["d"])
        nn.init.xavier_uniform_(theirs.embedding.weight)
        theirs.mod = getattr(module, encoder)(
            d_model=size["d"], n_head=size["n_channels"], n_iter=size["n_iter"],
            dists=", ".join(str(n) for n in range(2, size["distance_threshold"] + 2)), async_update=True,
            use_td=f"uv:{size['rank']}", dropout=dropout)
        theirs.mod.distmask = theirs.mod.distmask.to(F64)
        theirs.linear = nn.Linear(size["d"], VOCAB_SIZE)
        ours = ProbFormer(ProbFormerConfig(**size, decomposition="uv", dropout=dropout, ternary_l2=self.TERNARY_L2,
                                           root=self.root), VOCAB)

        def channels_first(x: torch.Tensor) -> torch.Tensor:
            return x.permute(0, 3, 2, 1)

        weights: list[tuple[str, str | tuple[str, ...], Transform]] = [
            ("embedding.weight", "embedding.weight", same), ("output.weight", "linear.weight", same),
            ("output.bias", "linear.bias", same),
            ("mean_field.factors.U", "mod.U", channels_first), ("mean_field.factors.V", "mod.V", channels_first)]
        if self.root:  # their root_ternary (d, d_root, C) is depinduce's full T_root[a, e, c]
            weights.append(("mean_field.root_factor.T", "mod.root_ternary", same))
        return Pair(ours, theirs, weights)

    def their_regulariser(self, theirs: torch.nn.Module) -> torch.Tensor:
        """Their trainer's ``add_norm``: ``ternary_l2`` times each norm it names (with ROOT, the root tensor's
        too: ``root_norm: separate``)."""
        norm = theirs.mod.getTernaryNorm(2)
        if self.root:
            norm = norm + theirs.mod.getRootTernaryNorm(2)
        return self.TERNARY_L2 * norm

    def their_mean_loss(self, theirs: torch.nn.Module, tokens: torch.Tensor, mask: torch.Tensor,
                        masked: torch.Tensor) -> torch.Tensor:
        """Their loss on one (micro-)batch: token-summed cross-entropy over the masked words / their count, plus
        the regulariser."""
        with authors_float64():
            features = theirs.mod(theirs.embedding(tokens.masked_fill(masked, MASK)), mask.to(torch.int32))
        logits = theirs.linear(features)
        summed = sum(torch.nn.functional.cross_entropy(logits[b][masked[b]], tokens[b][masked[b]], reduction="sum")
                     for b in range(len(tokens)))
        return summed / masked.sum() + self.their_regulariser(theirs)

    def stages(self, pair: Pair, batch: dict[str, torch.Tensor]) -> Iterator[tuple[str, Any, Any]]:
        from depinduce.training.objectives import MaskedLM

        ours, theirs = pair.ours, pair.theirs
        tokens, mask, masked = batch["tokens"], batch["mask"], batch["masked"]
        if self.chunks is not None:
            # runs of consecutive sentences, each trimmed to its own longest (their micro-batches are padded alone)
            their_loss = 0.0
            for rows in torch.arange(len(tokens)).split(len(tokens) // self.chunks):
                width = int(mask[rows].sum(dim=1).max())
                their_loss = their_loss + self.their_mean_loss(
                    theirs, tokens[rows, :width], mask[rows, :width], masked[rows, :width])
            yield "loss", MaskedLM(0.3, chunks=self.chunks).compute(ours, **batch).loss, their_loss
            return
        inputs = tokens.masked_fill(masked, MASK)
        found = ours.infer(inputs, mask)
        with authors_float64():
            embedded = theirs.embedding(inputs)
            features = theirs.mod(embedded, mask.to(torch.int32))
            if self.root:  # their encoder hands out the root label's scores instead of the words' when asked
                theirs.mod.output_root = True
                try:
                    their_root = theirs.mod(embedded, mask.to(torch.int32))[:, 0]
                finally:
                    theirs.mod.output_root = False
        # pairs of two different real words (their one-word sentences spread a row's mass over -1e9 entries)
        pairs = (mask[:, :, None] & mask[:, None, :] & ~torch.eye(tokens.size(1), dtype=torch.bool))[:, None]
        if pair.masks is None and not self.root:  # their rooted encoder keeps no Q_h; with masks the dropout
            yield "head marginals Q_h", found.heads * pairs, theirs.mod.q_h * pairs  # stages compare it
        yield "label scores q_z (final)", found.q_z[mask], features[mask]
        if self.root:
            yield "root label scores q_R (final)", found.q_root, their_root
        their_logits = theirs.linear(features)
        yield "logits (masked positions)", ours.output_logits(ours.encode_masked(inputs, mask, masked)), \
            their_logits[masked]
        yield "regulariser", ours.regularizer(), self.their_regulariser(theirs)
        summed = sum(torch.nn.functional.cross_entropy(their_logits[b][masked[b]], tokens[b][masked[b]],
                                                       reduction="sum") for b in range(len(tokens)))
        their_loss = summed / masked.sum() + self.their_regulariser(theirs)
        yield "loss", ours_masked_lm_loss(ours, batch), their_loss

    def decoders(self, rng: np.random.Generator, sentences: int) -> dict[str, DecoderTally]:
        """Their ``HeadRecorder.get_dependency_heads`` (``src/models/modules/recorder.py``: supar's Chu-Liu/Edmonds
        after root reweighting, supar's single-root Eisner, torch's ``max``; needs ``pip install supar``) on random
        float64 head marginals — n × n for their MLM encoder (no ROOT node), n × (n+1) with a ROOT column for a
        rooted one — beside depinduce's ``probformer-*`` decoders on the log-marginals a float64 backend hands
        them.  A third of the sentences have marginals rounded to eighths (ties common); differing trees are
        scored by their objective, the sum of the head probabilities (ROOT's 0 without a ROOT node)."""
        from depinduce.models.base import ParseScores
        from depinduce.models.probformer.decoders import authors_decoders

        recorder = self.recorder_module()
        tallies: dict[str, DecoderTally] = {}
        for _ in range(sentences):
            n = int(rng.integers(1, 11))
            for root_node in (False, True):
                probs = random_marginals(rng, n, root_node)
                theirs = recorder.HeadRecorder(use_root=root_node)
                heads = torch.full((n + 1, n + 1), float("-inf"), dtype=F64)
                heads[1:] = probs.log()
                heads[1:, 1:].fill_diagonal_(float("-inf"))
                ours = authors_decoders(root_node=root_node)
                for algorithm in ("argmax", "nonprojective", "projective"):
                    their_input = probs if root_node else probs[:, 1:]
                    _, their_tree = theirs.get_dependency_heads(their_input.clone(), algorithm)
                    name = f"probformer-{algorithm}" + (" (ROOT node)" if root_node else "")
                    tally = tallies.setdefault(name, DecoderTally())
                    tally.add(ours[f"probformer-{algorithm}"].decode(ParseScores(heads=heads)), their_tree,
                              lambda tree, probs=probs: math.fsum(float(probs[i, h]) for i, h in enumerate(tree)))
        return tallies

    def dropped_entries(self, x: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Q_h (B, C, T, T) at pairs of two different real words (with ROOT, (B, C, T, 1+T): ROOT's column too),
        q_z (B, T, d) at real words (their padding rows hold a uniform Q_h and unmasked label scores; depinduce's
        are 0), the root label's q_R (B, d_root) whole."""
        mask = batch["mask"]
        if x.dim() == 4:
            pairs = mask[:, :, None] & mask[:, None, :] & ~torch.eye(mask.size(1), dtype=torch.bool)
            if x.size(-1) == mask.size(1) + 1:
                pairs = torch.cat([mask[:, :, None], pairs], dim=-1)
            return x[pairs[:, None].expand_as(x)]
        return x if x.dim() == 2 else x[mask]

    @contextlib.contextmanager
    def share_masks(self, pair: Pair, masks: SharedMasks, batch: dict[str, torch.Tensor]) -> Iterator[None]:
        """Their ``dropout_h`` and ``dropout_z`` modules and depinduce's mean-field ``apply_dropout`` drop through
        ``masks``; both drop Q_h, then q_z, at every iteration, in that order (the shapes are checked)."""
        from depinduce.models.probformer import inference

        their_encoder = pair.theirs.mod
        their_encoder.dropout_h = SharedDropout(self.MASK_DROPOUT, masks)
        their_encoder.dropout_z = SharedDropout(self.MASK_DROPOUT, masks)
        hooks = [pair.ours.mean_field.register_forward_pre_hook(lambda *_: masks.restart("ours")),
                 their_encoder.register_forward_pre_hook(lambda *_: masks.restart("theirs"))]
        own_dropout = inference.apply_dropout
        inference.apply_dropout = masks.dropout
        try:
            yield
        finally:
            inference.apply_dropout = own_dropout
            for hook in hooks:
                hook.remove()

    def recorder_module(self) -> ModuleType:
        """Their ``recorder.py`` from its file alone (their package's ``__init__`` imports flair)."""
        candidates = [self.authors / "src" / "models" / "modules", self.authors]
        path = next((c / "recorder.py" for c in candidates if (c / "recorder.py").is_file()),
                    candidates[0] / "recorder.py")
        need_file(path, "give the whyNLP/Probabilistic-Transformer checkout")
        return import_file("authors_head_recorder", path)


def random_marginals(rng: np.random.Generator, n: int, root_node: bool) -> torch.Tensor:
    """(n, n+1) float64 head marginals, column 0 = ROOT (0 without a ROOT node), the diagonal 0; for a third of
    the sentences rounded to eighths (exact in binary, so equal sums are equal in any order): rows and trees
    tie."""
    logits = torch.from_numpy(rng.normal(size=(n, n + 1)) * rng.choice([1.0, 8.0, 40.0]))
    logits[:, 1:].fill_diagonal_(float("-inf"))
    if not root_node:
        logits[:, 0] = float("-inf")
    probs = logits.softmax(dim=-1) if n > 1 or root_node else torch.zeros((1, 2), dtype=F64)
    return probs.mul(8).round().div(8) if rng.random() < 1 / 3 else probs


# ---------------------------------------------------------------------------------------------------- RNGTr


def legacy_transformers() -> None:
    """transformers 2.x's module paths, which their ``graph.py`` imports, on a newer transformers: the BERT
    modules moved under ``models.bert``; the archive maps and docstrings (which their code only hands to
    decorators), ``swish`` and ``load_tf_weights_in_bert`` (never called) went away."""
    if "transformers.modeling_bert" in sys.modules:
        return
    import transformers
    from transformers import activations, modeling_utils, pytorch_utils

    try:
        from transformers.models.bert import modeling_bert
    except ImportError:
        return  # transformers 2.x: the paths are the real ones
    names = {name: value for name, value in vars(modeling_bert).items() if not name.startswith("__")}
    names.update({name: getattr(activations, name) for name in ("gelu_new", "mish", "ACT2FN")})
    names.update(gelu=activations.ACT2FN["gelu"], swish=torch.nn.functional.silu, load_tf_weights_in_bert=None,
                  BERT_PRETRAINED_MODEL_ARCHIVE_MAP={}, BERT_INPUTS_DOCSTRING="", BERT_START_DOCSTRING="")
    modules = {"modeling_bert": names, "configuration_bert": {"BERT_PRETRAINED_CONFIG_ARCHIVE_MAP": {}}}
    for name, attributes in modules.items():
        module = ModuleType(f"transformers.{name}")
        module.__dict__.update(attributes)
        sys.modules[f"transformers.{name}"] = module
        setattr(transformers, name, module)
    if not hasattr(modeling_utils, "prune_linear_layer"):
        modeling_utils.prune_linear_layer = pytorch_utils.prune_linear_layer  # type: ignore[attr-defined]


def register_package(name: str, folder: Path) -> None:
    """``name`` as a package over ``folder`` without running its ``__init__`` (theirs import their whole
    training stack: data loaders, tokenizers, ``from transformers import *``)."""
    if name not in sys.modules:
        package = ModuleType(name)
        package.__path__ = [str(folder)]
        sys.modules[name] = package


def allennlp_checks() -> None:
    """Their ``scalar_mix.py`` (imported by their parser, used only with ``--mix_layers``) imports allennlp's
    ``ConfigurationError``; without allennlp installed, an exception class of that name stands in."""
    try:
        import allennlp.common.checks  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        for name in ("allennlp", "allennlp.common", "allennlp.common.checks"):
            sys.modules[name] = ModuleType(name)
        sys.modules["allennlp.common.checks"].ConfigurationError = type(  # type: ignore[attr-defined]
            "ConfigurationError", (Exception,), {})


def random_tree(rng: torch.Generator, n: int) -> list[int]:
    """Heads 0..n of a random tree over n words (each word attaches to ROOT or a word placed before it in a
    random order), so it has no 2-cycles: the two implementations read those differently."""
    order = (torch.randperm(n, generator=rng) + 1).tolist()
    heads = [0] * (n + 1)
    for k, word in enumerate(order):
        heads[word] = ([0] + order[:k])[int(torch.randint(k + 1, (1,), generator=rng))]
    return heads[1:]


class TheirLayout(torch.nn.Module):
    """Their ``Model``'s loop reads BERT's layout — [CLS], <ROOT>, the words, [SEP] — and addresses <ROOT> as
    position 1; their network runs here, as in the rest of this check, on <ROOT> + the words.  This wraps it: the
    [CLS] row and column are cut off going in (graph included) and [SEP] becomes padding; coming out, [CLS] gets a
    row and column of −∞ arc scores (zero label scores), and a word's own column −∞ as in the graph-less passes'
    comparison (their training loss sees the self-loop; depinduce's masks it: aligned on their side)."""

    MARK = 1  # the id of [CLS] and [SEP] here (<unk>, which no batch of this check holds)

    def __init__(self, parser: torch.nn.Module) -> None:
        super().__init__()
        self.parser = parser

    def forward(self, words: torch.Tensor, tags: torch.Tensor, sign: torch.Tensor | None = None,
                graph_arc: torch.Tensor | None = None, graph_rel: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        marks = words.eq(self.MARK)
        inner_words = words.masked_fill(marks, PAD)[:, 1:]
        inner_tags = tags.masked_fill(marks, 0)[:, 1:]
        if graph_arc is None:
            s_arc, s_rel = self.parser(inner_words, inner_tags)
        else:
            s_arc, s_rel = self.parser(inner_words, inner_tags, sign, graph_arc[:, 1:, 1:], graph_rel)
        batch, width = words.shape
        full_arc = s_arc.new_full((batch, width, width), float("-inf"))
        full_arc[:, 1:, 1:] = s_arc
        full_arc = full_arc.masked_fill(torch.eye(width, dtype=torch.bool), float("-inf"))
        full_rel = s_rel.new_zeros((batch, width, width, s_rel.size(-1)))
        full_rel[:, 1:, 1:] = s_rel
        return full_arc, full_rel


class PassRecorder:
    """Their trainer's optimiser and scheduler in one: at each ``step`` (one per pass) their gradients go beside
    depinduce's of the same pass (recorded before), then both sides take the same plain gradient step on the
    parameters that map one to one (a copy, or rows of a fused projection or of a biaffine), so that later passes
    read weights a pass has changed; the reparametrised ones (relation tables, position and <ROOT> rows) are
    held.  ``zero_grad`` clears their gradients."""

    def __init__(self, pair: Pair, ours: list[dict[str, torch.Tensor]], lr: float, table: StageTable) -> None:
        self.pair, self.ours, self.lr, self.table = pair, ours, lr, table
        self.passes = 0

    def zero_grad(self) -> None:
        self.pair.theirs.zero_grad(set_to_none=True)

    def step(self) -> None:
        k, self.passes = self.passes, self.passes + 1
        if k >= len(self.ours):
            sys.exit(f"their trainer ran pass {k + 1}, depinduce's loop {len(self.ours)} passes")
        worst = 0.0
        theirs = dict(self.pair.theirs.named_parameters())
        for mine, their, transform in self.pair.weights:
            worst = max(worst, difference(self.ours[k][mine], self.pair.theirs_as_ours(their, transform, grad=True)))
        self.table.add(f"gradients, pass {k + 1}", worst)
        with torch.no_grad():
            for name in stepped_parameters(self.pair)[1]:
                if theirs[name].grad is not None:
                    theirs[name] -= self.lr * theirs[name].grad


def stepped_parameters(pair: Pair) -> tuple[set[str], set[str]]:
    """depinduce's and their parameters that a plain gradient step moves alike on both sides: those mapped by a
    copy, by stacking, or by slices of one of theirs that no other transform reads."""
    ours, theirs = set(), set()
    for mine, their, transform in pair.weights:
        names = (their,) if isinstance(their, str) else their
        if transform is same or transform is stacked or mine.startswith(("network.arc.", "network.label.")):
            ours.add(mine)
            theirs.update(names)
    return ours, theirs


class RNGTrAdapter(Adapter):
    """idiap/g2g-transformer: their ``GraphBiaffineParser`` (``parser/parser.py``: a ``BertGraphModel`` with
    labelled graph input, their MLPs and biaffine scorers) as one network for the graph-less pass and the graph
    passes (their ``same_flag``), its BERT built from a small ``BertGraphConfig`` rather than loaded from a folder.
    It reads depinduce's layout, ``<ROOT>`` + words (their sentences add ``[CLS]`` before and ``[SEP]`` after:
    README, "With BERT"): their vocabulary holds depinduce's words, then the UPOS tags (their tags are
    word-embedding rows), then ``<ROOT>``, whose tag, like padding's, is their padding row.

    The map: their token-type row, added at every position, goes into depinduce's position table; their q, k, v
    are depinduce's fused [q; k; v]; depinduce's rK is √d_head × theirs (depinduce scales the relation term with
    q·k); their biaffines' bias row and column are depinduce's bias vector and linear term.  Their LayerNorm ε is
    BERT's 1e-12 (depinduce's ``layer_norm_eps``, taken from the BERT with ``--encoder-path``).  Two
    differences that have no switch are aligned on their side: the "no arc" row of their relation tables, learned
    there, is zeroed (fixed at zero in depinduce); their arc loss sees the self-loop column at −∞ (depinduce masks
    it).  The graphs of the pass comparison are random trees (their argmax graphs drop 2-cycles: depinduce's
    ``graph_cycles: drop``, which the loop variant runs).

    The loop variant (``variants``) runs depinduce's refinement with the authors' switches beside their
    ``Model.train`` and ``Model.evaluate`` on short sentences, so that some converge before the last pass."""

    name = "rngtr"
    SIZE = {"hidden_size": 12, "n_layers": 2, "n_heads": 3, "ff_size": 20, "arc_mlp_size": 7, "label_mlp_size": 5,
            "max_positions": 16}
    UPOS = ["ADJ", "DET", "NOUN", "VERB"]
    LABELS = ["amod", "det", "nsubj", "obj", "root"]
    EPS = 1e-12
    LOOP_T, LOOP_LR = 2, 0.1  # the loop variant: refinement passes after the first, and the per-pass step size

    def __init__(self, authors: Path, *, loop: bool = False) -> None:
        super().__init__(authors)
        self.loop = loop
        if loop:  # one training loop with its own per-pass steps and losses, then parsing: no single backward
            self.MODES, self.BACKWARD = ("train",), False

    def variants(self) -> list[tuple[str, Adapter]]:
        """The refinement loop with the authors' switches (``updates: per_pass``, ``first_graph: mst``,
        ``decode_pass: previous``) beside their trainer and evaluation loop."""
        if self.loop:
            return []
        label = (f"refinement loop: T = {self.LOOP_T}, updates: per_pass, first_graph: mst, decode_pass: previous, "
                 "graph_cycles: drop, beside their Model.train and Model.evaluate")
        return [(label, RNGTrAdapter(self.authors, loop=True))]

    def modules(self) -> tuple[ModuleType, ModuleType]:
        need_file(self.authors / "parser" / "utils" / "graph.py", "give the idiap/g2g-transformer checkout")
        legacy_transformers()
        allennlp_checks()
        register_package("parser", self.authors / "parser")
        register_package("parser.utils", self.authors / "parser" / "utils")
        graph = importlib.import_module("parser.utils.graph")
        if hasattr(graph.BertPreTrainedModel, "post_init"):  # 2.x's init_weights: newer ones need post_init first
            graph.BertGraphModel.init_weights = lambda model: model.apply(model._init_weights)
        return importlib.import_module("parser.parser"), importlib.import_module("parser.model")

    def tags(self) -> Any:
        from depinduce.data.tags import TagVocab

        return TagVocab(self.UPOS, self.LABELS)

    @property
    def root_id(self) -> int:
        """``<ROOT>``'s row in their vocabulary: after depinduce's words and the UPOS tags."""
        return VOCAB_SIZE + self.tags().n_upos

    def build(self, seed: int) -> Pair:
        from depinduce.models.rngtr.backend import RNGTr
        from depinduce.models.rngtr.config import RNGTrConfig

        their_parser, _ = self.modules()
        size, tags = self.SIZE, self.tags()
        torch.manual_seed(seed)
        their_parser.initialize_bertgraph = self.small_bert
        config = SimpleNamespace(mix_layers=False, n_mlp_arc=size["arc_mlp_size"], n_mlp_rel=size["label_mlp_size"],
                                 mlp_dropout=0.0, n_rels=tags.n_labels, pad_index=PAD, unk_index=1, modelpath="",
                                 layernorm_key=False, layernorm_value=False, input_labeled_graph=True,
                                 input_unlabeled_graph=False)
        theirs = their_parser.GraphBiaffineParser(False, config, tags.n_labels, None)
        with torch.no_grad():  # their biaffines start at zero, LayerNorms at 1 and 0, relation tables at BERT's
            for name, p in theirs.named_parameters():  # N(0, 0.02): every path made to carry weight
                if any(part in name for part in ("attn.weight", "LayerNorm", "dp_relation")):
                    p.add_(torch.randn_like(p) * 0.3)
            for layer in theirs.bert.encoder.layer:
                layer.attention.self.dp_relation_k.weight[0] = 0.0
                layer.attention.self.dp_relation_v.weight[0] = 0.0
            if self.loop:  # label 0 stands in for their '<ROOT>' relation, which their MST decoder never gives a
                n = size["label_mlp_size"]  # word and no word carries: pushed down on both sides (the batch's gold
                theirs.rel_attn.weight[0, n, n] -= 30.0  # labels avoid it), neither side picks it
        loop = ({"iterations": self.LOOP_T, "first_graph": "mst", "decode_pass": "previous", "graph_cycles": "drop"}
                if self.loop else {})
        ours = RNGTr(RNGTrConfig(**{"iterations": 0, **size, **loop}, dropout=0.0, mlp_dropout=0.0,
                                 layer_norm_eps=self.EPS, updates="per_pass"), VOCAB, tags)
        return Pair(ours, theirs, self.weight_map(size))

    def small_bert(self, *_: Any) -> torch.nn.Module:
        """Their ``initialize_bertgraph`` without a saved BERT: their config and model classes at our size."""
        graph = importlib.import_module("parser.utils.graph")
        size, tags = self.SIZE, self.tags()
        config = graph.BertGraphConfig(
            vocab_size=self.root_id + 1, hidden_size=size["hidden_size"], num_hidden_layers=size["n_layers"],
            num_attention_heads=size["n_heads"], intermediate_size=size["ff_size"], hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, max_position_embeddings=size["max_positions"],
            layer_norm_eps=self.EPS, is_decoder=False, output_attentions=False)  # (2.x's defaults)
        config.add_graph_par(False, False, True, False, tags.n_labels)
        return graph.BertGraphModel(config)

    def weight_map(self, size: dict[str, int]) -> list[tuple[str, str | tuple[str, ...], Transform]]:
        n_upos, root = self.tags().n_upos, self.root_id
        d = size["hidden_size"] // size["n_heads"]
        emb = "bert.embeddings."

        def upos_rows(w: torch.Tensor) -> torch.Tensor:
            return torch.cat([torch.zeros_like(w[:1]), w[VOCAB_SIZE + 1: VOCAB_SIZE + n_upos]])

        def no_arc_zero(w: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
            return torch.cat([torch.zeros_like(w[:1]), w[1:] * scale])

        weights: list[tuple[str, str | tuple[str, ...], Transform]] = [
            ("network.encoder.words.weight", emb + "word_embeddings.weight", lambda w: w[:VOCAB_SIZE]),
            ("network.encoder.upos.weight", emb + "word_embeddings.weight", upos_rows),
            ("network.encoder.root", emb + "word_embeddings.weight", lambda w: w[root] + w[PAD]),
            ("network.encoder.positions.weight",
             (emb + "position_embeddings.weight", emb + "token_type_embeddings.weight"),
             Reparametrised(lambda pos, kind: pos + kind[0], lambda pos, _kind: pos)),
            ("network.encoder.norm.weight", emb + "LayerNorm.weight", same),
            ("network.encoder.norm.bias", emb + "LayerNorm.bias", same),
        ]
        for i in range(size["n_layers"]):
            ours_layer, their_layer = f"network.encoder.layers.{i}.", f"bert.encoder.layer.{i}."
            for kind in ("weight", "bias"):
                weights.append((f"{ours_layer}attention.qkv.{kind}",
                                tuple(f"{their_layer}attention.self.{x}.{kind}" for x in ("query", "key", "value")),
                                stacked))
                weights += [(ours_layer + a + kind, their_layer + b + kind, same) for a, b in (
                    ("attention.out.", "attention.output.dense."), ("norm1.", "attention.output.LayerNorm."),
                    ("ffn.0.", "intermediate.dense."), ("ffn.2.", "output.dense."), ("norm2.", "output.LayerNorm."))]
            weights += [
                (ours_layer + "attention.rel_k.weight", their_layer + "attention.self.dp_relation_k.weight",
                 Reparametrised(lambda w: no_arc_zero(w, d ** 0.5), lambda g: no_arc_zero(g, d ** -0.5))),
                (ours_layer + "attention.rel_v.weight", their_layer + "attention.self.dp_relation_v.weight",
                 no_arc_zero)]
        for ours_mlp, their_mlp in (("arc.dep", "mlp_arc_d"), ("arc.head", "mlp_arc_h"), ("label.dep", "mlp_rel_d"),
                                    ("label.head", "mlp_rel_h")):
            weights += [(f"network.{ours_mlp}.0.{kind}", f"{their_mlp}.linear.{kind}", same)
                        for kind in ("weight", "bias")]
        n = size["label_mlp_size"]
        weights += [
            ("network.arc.weight", "arc_attn.weight", lambda w: w[0, :-1]),
            ("network.arc.bias", "arc_attn.weight", lambda w: w[0, -1]),
            ("network.label.bilinear", "rel_attn.weight", lambda w: w[:, :n, :n]),
            ("network.label.linear.weight", "rel_attn.weight", lambda w: torch.cat([w[:, :n, n], w[:, n, :n]], dim=1)),
            ("network.label.linear.bias", "rel_attn.weight", lambda w: w[:, n, n]),
        ]
        return weights

    def batch(self, rng: torch.Generator) -> dict[str, torch.Tensor]:
        """Words, UPOS, gold heads and labels, and a random labelled tree as the graph the graph pass reads."""
        tags = self.tags()
        lengths = random_lengths(rng, 8, 5) if self.loop else random_lengths(rng, 4, 9)  # the loop: short
        # sentences, so that some converge (their graph stops changing) before the last pass
        longest = max(lengths)
        mask = torch.arange(longest)[None, :] < torch.tensor(lengths)[:, None]
        tokens = torch.randint(FIRST_WORD, VOCAB_SIZE, mask.shape, generator=rng).masked_fill(~mask, PAD)
        upos = torch.randint(1, tags.n_upos, mask.shape, generator=rng).masked_fill(~mask, 0)
        graph = torch.zeros(mask.shape, dtype=torch.long)
        heads = torch.zeros(mask.shape, dtype=torch.long)
        for b, n in enumerate(lengths):
            graph[b, :n] = torch.tensor(random_tree(rng, n))
            gold = torch.randint(0, n, (n,), generator=rng) + 1  # any word but itself, or ROOT
            heads[b, :n] = torch.where(gold > torch.arange(1, n + 1), gold, gold - 1)
        labels = torch.randint(1 if self.loop else 0, tags.n_labels, mask.shape, generator=rng).masked_fill(~mask, 0)
        graph_labels = torch.randint(0, tags.n_labels, mask.shape, generator=rng).masked_fill(~mask, 0)
        return {"tokens": tokens, "mask": mask, "upos": upos, "heads": heads, "labels": labels,
                "init_heads": graph, "init_labels": graph_labels}

    def their_inputs(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Their word ids, tag ids (word-embedding rows) over <ROOT> + words, and their word mask."""
        mask = batch["mask"]
        root = torch.full((len(mask), 1), self.root_id)
        words = torch.cat([root, batch["tokens"]], dim=1)
        tags = torch.cat([torch.zeros_like(root), (batch["upos"] + VOCAB_SIZE).masked_fill(~mask, 0)], dim=1)
        return words, tags, torch.cat([torch.zeros_like(mask[:, :1]), mask], dim=1)

    def their_graph(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Their relation ids, built by their ``build_graph_labeled`` from the graph's heads and labels."""
        _, their_model = self.modules()
        model = their_model.Model.__new__(their_model.Model)
        model.num_labels = self.tags().n_labels
        model.config = SimpleNamespace(use_mst_train=False, train_zero_rel=False)
        _, _, words = self.their_inputs(batch)
        arcs = torch.cat([torch.zeros_like(batch["init_heads"][:, :1]), batch["init_heads"]], dim=1)
        labels = torch.cat([torch.zeros_like(arcs[:, :1]), batch["init_labels"]], dim=1)
        graph, _, _, _ = model.build_graph_labeled(arcs, labels, words, torch.ones(len(words), dtype=torch.long))
        return graph

    def stages(self, pair: Pair, batch: dict[str, torch.Tensor]) -> Iterator[tuple[str, Any, Any]]:
        if self.loop:
            yield from self.loop_stages(pair, batch)
            return
        yield from self.pass_stages(pair, batch)

    def pass_stages(self, pair: Pair, batch: dict[str, torch.Tensor]) -> Iterator[tuple[str, Any, Any]]:
        from depinduce.training.objectives import HeadsAndLabels

        ours, theirs = pair.ours, pair.theirs
        network, mask = ours.network, batch["mask"]
        words, tags, word_mask = self.their_inputs(batch)
        their_mask = words.ne(PAD)
        rows = torch.cat([torch.ones_like(mask[:, :1]), mask], dim=1)
        itself = torch.arange(1, mask.size(1) + 1)[:, None] == torch.arange(mask.size(1) + 1)[None, :]
        pairs = mask[:, :, None] & rows[:, None, :] & ~itself  # (B, T, T+1): a real word and a head not itself
        _, their_model = self.modules()
        objective = HeadsAndLabels()
        ours_loss = their_loss = 0.0
        for graph_name, with_graph in (("no graph", False), ("graph", True)):
            graph = (batch["init_heads"], batch["init_labels"]) if with_graph else None
            states: list[torch.Tensor] = []
            their_states: list[torch.Tensor] = []
            hooks = [layer.register_forward_hook(lambda _m, _i, out: states.append(out.detach().clone()))
                     for layer in network.encoder.layers]
            hooks += [layer.register_forward_hook(lambda _m, _i, out: their_states.append(out[0]))
                      for layer in theirs.bert.encoder.layer]
            try:
                hidden = network.encode(batch["tokens"], batch["upos"], mask, graph)
                if with_graph:
                    s_arc, s_rel = theirs(words, tags, torch.ones(len(words), dtype=torch.long),
                                          self.their_graph(batch), None)
                else:
                    s_arc, s_rel = theirs(words, tags)
            finally:
                for hook in hooks:
                    hook.remove()
            for i, (state, their_state) in enumerate(zip(states, their_states)):
                yield f"hidden states, layer {i + 1} ({graph_name})", state[rows], their_state[their_mask]
            yield f"arc scores ({graph_name})", network.arc(hidden, mask)[pairs], s_arc[:, 1:][pairs]
            yield f"label scores ({graph_name})", network.label.all_pairs(hidden)[pairs], s_rel[:, 1:][pairs]
            inputs = {k: v for k, v in batch.items() if with_graph or not k.startswith("init_")}
            ours_loss = ours_loss + objective.compute(ours, **inputs).loss
            s_arc = s_arc.masked_fill(torch.eye(s_arc.size(1), dtype=torch.bool), float("-inf"))
            their_loss = their_loss + their_model.Model.get_loss(
                SimpleNamespace(criterion=torch.nn.CrossEntropyLoss()), s_arc[word_mask], s_rel[word_mask],
                batch["heads"][mask], batch["labels"][mask])
        yield "loss", ours_loss, their_loss  # the graph-less pass's plus the graph pass's

    def loop_stages(self, pair: Pair, batch: dict[str, torch.Tensor]) -> Iterator[tuple[str, Any, Any]]:
        """The refinement loop against their ``Model.train`` and ``Model.evaluate`` (``--stop_arc_rel``, MST for
        the first graph and for decoding, ``num_iter_encoder`` = T + 1), on a one-batch loader in their layout
        (:class:`TheirLayout`): training, one plain gradient step per pass on both sides (:class:`PassRecorder`),
        each pass's loss and gradients and which sentences it trained on compared; then parsing with the updated
        weights in eval mode, the arc probabilities each sentence is decoded from (their ``s_arc_final``, the pass
        before the one that converged) compared with depinduce's ``final_scores``."""
        from depinduce.training.objectives import HeadsAndLabels

        ours, theirs = pair.ours, pair.theirs
        _, their_model_module = self.modules()
        tags, mask = self.tags(), batch["mask"]
        inputs = {k: v for k, v in batch.items() if not k.startswith("init_")}
        # depinduce: one update per pass, recording each pass's loss, gradients and rows first
        our_losses, our_grads, our_rows = [], [], []
        params = dict(ours.named_parameters())
        stepped = stepped_parameters(pair)[0]
        objective = HeadsAndLabels()
        rows_seen: list[torch.Tensor] = []
        network_passes = ours.network.arc_label_passes

        def recording_passes(*args: Any, **kwargs: Any) -> Iterator[Any]:
            for out in network_passes(*args, **kwargs):
                rows_seen.append(out.rows.clone())
                yield out

        ours.network.arc_label_passes = recording_passes
        try:
            for out in objective.updates(ours, **inputs):
                ours.zero_grad(set_to_none=True)
                out.loss.backward()
                our_losses.append(out.loss.detach())
                our_grads.append({name: (p.grad.clone() if p.grad is not None else torch.zeros_like(p))
                                  for name, p in params.items()})
                with torch.no_grad():
                    for name in stepped:
                        if params[name].grad is not None:
                            params[name] -= self.LOOP_LR * params[name].grad
        finally:
            del ours.network.arc_label_passes
        for rows in rows_seen:  # batch rows (the CPU's route) or a boolean mask of them (the device route)
            our_rows.append(rows.to(F64) if rows.dtype == torch.bool
                            else torch.zeros(len(mask), dtype=F64).index_fill_(0, rows, 1.0))
        # theirs: their trainer on the same batch
        loader = [self.their_loop_batch(batch)]
        config = SimpleNamespace(num_iter_encoder=self.LOOP_T + 1, use_mst_train=False, use_two_opts=False,
                                 input_labeled_graph=True, subword_option="semantic", stop_arc=False,
                                 stop_arc_rel=True, train_zero_rel=False, use_mst_eval=True)
        vocab = SimpleNamespace(root_label=0, sbert_label=tags.n_labels)  # label 0: their '<ROOT>' (see build)
        model = their_model_module.Model(vocab, TheirLayout(theirs), config, tags.n_labels)
        # their decode_mst writes into views of the label scores, which torch 2 refuses under autograd (torch 1.x,
        # theirs, let it pass): it gets the scores detached — it only decides, no gradient goes through it
        decide = model.decode_mst
        model.decode_mst = lambda s_arc, s_rel, *args, **kwargs: decide(s_arc.detach(), s_rel.detach(), *args,
                                                                         **kwargs)
        table = StageTable()
        model.optimizer = PassRecorder(pair, our_grads, self.LOOP_LR, table)
        model.scheduler = SimpleNamespace(step=lambda: None)
        their_losses: list[torch.Tensor] = []
        their_rows: list[torch.Tensor] = []
        get_loss = model.get_loss
        parser_forward = model.parser.forward

        def recording_forward(words: torch.Tensor, tags_: torch.Tensor, sign: torch.Tensor | None = None,
                              *rest: Any) -> Any:
            their_rows.append(torch.ones(len(words), dtype=F64) if sign is None else sign.to(F64))
            return parser_forward(words, tags_, sign, *rest)

        model.get_loss = lambda *args: their_losses.append(get_loss(*args)) or their_losses[-1]
        model.parser.forward = recording_forward
        with contextlib.redirect_stderr(open(os.devnull, "w")):  # their tqdm bars
            model.train(loader)
        yield "passes trained (count)", torch.tensor(float(len(our_losses)), dtype=F64), \
            torch.tensor(float(len(their_losses)), dtype=F64)
        for k, (mine, their) in enumerate(zip(our_losses, their_losses)):
            yield f"loss, pass {k + 1}", mine, their
        for k, (mine, their) in enumerate(zip(our_rows, their_rows)):
            yield f"sentences refining, pass {k + 1}", mine, their
        for stage, value in table.worst.items():
            yield stage, torch.tensor(value, dtype=F64), torch.tensor(0.0, dtype=F64)
        yield "weights after the per-pass steps", torch.tensor(max(
            difference(p, pair.theirs_as_ours(their, transform)) for mine, their, transform in pair.weights
            for p in [params[mine]]), dtype=F64), torch.tensor(0.0, dtype=F64)
        del model.parser.forward
        # parsing: their evaluate's decoded scores beside depinduce's final scores
        ours.eval()
        with torch.no_grad():
            final = ours.network.final_scores(batch["tokens"], batch["upos"], mask)
        captured: list[torch.Tensor] = []
        decode_mst = model.decode_mst

        def capturing(s_arc: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if not kwargs.get("prepare", args[2] if len(args) > 2 else True):
                captured.append(s_arc.clone())
            return decode_mst(s_arc, *args, **kwargs)

        model.decode_mst = capturing
        with torch.no_grad(), contextlib.redirect_stderr(open(os.devnull, "w")):
            model.evaluate(loader)
        their_arc = captured[0][:, 2:, 1:-1]  # word rows; <ROOT> + word columns (the last: [SEP] of the longest)
        pairs = mask[:, :, None] & torch.cat([torch.ones_like(mask[:, :1]), mask], dim=1)[:, None, :]
        pairs &= ~(torch.arange(1, mask.size(1) + 1)[:, None] == torch.arange(mask.size(1) + 1)[None, :])
        their_probs = their_arc[:, : mask.size(1)].masked_fill(~pairs, float("-inf")).softmax(dim=-1)
        yield "arc probabilities decoded (decode_pass: previous)", final.arcs.exp()[pairs], their_probs[pairs]

    def their_loop_batch(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """One batch as their data loader gives it for words of one word piece each: words and tags as
        [CLS] <ROOT> words [SEP] (padding after), gold heads at their positions (<ROOT> = 1, word k = k + 1), the
        word mask, and their sub-word arrays (each position its own first piece; [BERT] labels between [CLS] and
        [SEP])."""
        mask = batch["mask"]
        b, t = mask.shape
        width = t + 3
        lengths = mask.sum(dim=1).tolist()
        words = torch.full((b, width), PAD, dtype=torch.long)
        tags = torch.zeros((b, width), dtype=torch.long)
        arcs = torch.zeros((b, width), dtype=torch.long)
        rels = torch.zeros((b, width), dtype=torch.long)
        their_mask = torch.zeros((b, width), dtype=torch.bool)
        sbert_arc = torch.zeros((b, width), dtype=torch.long)
        sbert_rel = torch.zeros((b, width), dtype=torch.long)
        for i, n in enumerate(lengths):
            words[i, 0] = words[i, n + 2] = TheirLayout.MARK
            words[i, 1] = self.root_id
            words[i, 2 : n + 2] = batch["tokens"][i, :n]
            tags[i, 2 : n + 2] = batch["upos"][i, :n] + VOCAB_SIZE
            arcs[i, 2 : n + 2] = batch["heads"][i, :n] + 1
            rels[i, 2 : n + 2] = batch["labels"][i, :n]
            their_mask[i, 2 : n + 2] = True
            sbert_arc[i, 1 : n + 2] = torch.arange(1, n + 2)
            sbert_rel[i, 1 : n + 2] = self.tags().n_labels
        return words, tags, arcs, rels, their_mask, sbert_arc, sbert_rel

    def decoders(self, rng: np.random.Generator, sentences: int) -> dict[str, DecoderTally]:
        """Their ``Model.decode_mst`` (softmax with self-loops and padding masked, then their Chu-Liu/Edmonds with
        the one-root rule over the probabilities) on float64 arc scores in their layout ([CLS], <ROOT>, words),
        beside depinduce's ``rngtr-mst`` on the log-probabilities a float64 backend hands its decoders
        (log_softmax of the same scores, the self-loop masked); trees that differ are scored by their objective,
        the sum of the arc probabilities.  (On float32 scores the two read probabilities rounded apart —
        softmax against exp of log_softmax — so trees within ~1e-7 of each other may come out differently.)"""
        from depinduce.models.base import ParseScores
        from depinduce.models.rngtr.decoders import AUTHORS_DECODERS

        _, their_model = self.modules()
        model = their_model.Model.__new__(their_model.Model)
        model.vocab = SimpleNamespace(root_label=0)
        tally = DecoderTally()
        for _ in range(sentences):
            n = int(rng.integers(1, 11))
            scores = torch.from_numpy(rng.normal(size=(n, n + 1)) * rng.choice([1.0, 8.0, 40.0]))
            itself = torch.arange(1, n + 1)[:, None] == torch.arange(n + 1)[None, :]
            masked = scores.masked_fill(itself, torch.finfo(F64).min / 2)
            heads = torch.full((n + 1, n + 1), float("-inf"), dtype=F64)
            heads[1:] = masked.log_softmax(dim=-1)
            ours = AUTHORS_DECODERS["rngtr-mst"].decode(ParseScores(heads=heads))
            s_arc = torch.zeros((1, n + 2, n + 2), dtype=F64)
            s_arc[0, 2:, 1:] = scores
            mask = torch.zeros((1, n + 2), dtype=torch.bool)
            mask[0, 2:] = True
            positions, _ = model.decode_mst(s_arc, torch.zeros((1, n + 2, n + 2, 1)), mask.clone(), prepare=True)
            theirs = [max(int(p) - 1, 0) for p in positions[0, 2:]]
            probs = masked.softmax(dim=-1)
            tally.add(ours, theirs, lambda tree, probs=probs: math.fsum(float(probs[i, h]) for i, h in enumerate(tree)))
        return {"rngtr-mst": tally}


# ----------------------------------------------------------------------------------------------------- PRPN


class Torch03CellBase(torch.nn.Module):
    """torch 0.3's ``RNNCellBase``: a module whose constructor takes no arguments (torch 2's wants the sizes and
    allocates weights that their cell, which builds its own, never uses)."""


class torch03_rnn_module:
    """While their ``LSTMCell.py`` is imported: its ``from torch.nn.modules.rnn import *`` gives torch 0.3's
    names — every public name of the module (``torch`` among them: their file uses it unimported; torch 2's
    ``__all__`` lists only the classes) and torch 0.3's ``RNNCellBase``."""

    def __enter__(self) -> None:
        from torch.nn.modules import rnn

        self.rnn, self.saved = rnn, (rnn.__all__, rnn.RNNCellBase)
        del rnn.__all__
        rnn.RNNCellBase = Torch03CellBase  # type: ignore[misc]

    def __exit__(self, *_: object) -> None:
        self.rnn.__all__, self.rnn.RNNCellBase = self.saved  # type: ignore[misc]


def lstm_gates_reordered(x: torch.Tensor) -> torch.Tensor:
    """Their LSTM gate blocks [input, forget, cell, output] → depinduce's [input, forget, output, cell]."""
    i, f, g, o = x.chunk(4, dim=0)
    return torch.cat([i, f, o, g], dim=0)


class PRPNAdapter(Adapter):
    """yikangshen/PRPN (``model_PRPN.py`` and the reading, parsing and predict networks; torch 0.3 code) at their
    ``main_UP.py`` settings: hard gates, tied output layer, no residual block (``--res 0``), with depinduce's
    ``layer_norm: authors``, ``dropout_placement: authors`` and ``init: authors`` (the paper recipe's).  Their
    input is depinduce's: the boundary symbol, then the words, predicting the words and the closing boundary
    (their ``</s>`` input, whose prediction their mask drops, is left out); their loss is ``main_UP.py``'s
    ``criterion``.  Sentences of one length: their BatchNorm statistics include padded positions, depinduce's
    cover real positions only (no switch: a sentence's result does not depend on its batch-mates).

    The map: their look-back convolution is depinduce's window map over (look-back + 1) × embedding inputs,
    oldest first; their grouped 1×1 head convolution is depinduce's two distance heads; their reading key, one
    linear map of [x_t; h_(t−1)], is depinduce's ``key_x`` and ``key_h``; their LSTM gate blocks [i, f, g, o] are
    depinduce's [i, f, o, g].  Their parameters are redrawn at random (+ N(0, 0.3²)) before the copy: their
    embeddings start at ±0.01 and their norms at 1 and 0, which would leave the gates nearly constant.  Shims:
    torch 0.3's ``RNNCellBase`` and star-import (``torch03_rnn_module``); their forward runs with the default
    dtype float64 (their reading-dropout mask is built with it)."""

    name = "prpn"
    SIZE = {"emb_size": 6, "hidden_size": 8, "n_layers": 2, "n_slots": 3, "lookback": 2}

    def modules(self) -> ModuleType:
        need_file(self.authors / "model_PRPN.py", "give the yikangshen/PRPN checkout")
        if str(self.authors) not in sys.path:
            sys.path.insert(0, str(self.authors))
        with torch03_rnn_module():
            import model_PRPN  # type: ignore[import-not-found]

        return model_PRPN

    def build(self, seed: int) -> Pair:
        from depinduce.models.prpn.config import PRPNConfig
        from depinduce.models.prpn.model import PRPN

        size = self.SIZE
        torch.manual_seed(seed)
        theirs = self.modules().PRPN(
            VOCAB_SIZE + 1, size["emb_size"], size["hidden_size"], size["n_layers"], nslots=size["n_slots"],
            nlookback=size["lookback"], resolution=0.1, dropout=0.0, idropout=0.0, rdropout=0.0, tie_weights=True,
            hard=True, res=0)
        with torch.no_grad():
            for p in theirs.parameters():
                p.add_(torch.randn_like(p) * 0.3)
        ours = PRPN(PRPNConfig(**size, resolution=0.1, gate="hard", dropout=0.0, idropout=0.0, rdropout=0.0,
                               dropout_placement="authors", layer_norm="authors", init="authors"), VOCAB)
        return Pair(ours, theirs, self.weight_map(size))

    def weight_map(self, size: dict[str, int]) -> list[tuple[str, str | tuple[str, ...], Transform]]:
        hidden = size["hidden_size"]
        weights: list[tuple[str, str | tuple[str, ...], Transform]] = [
            ("embedding.weight", "encoder.weight", same), ("output_bias", "decoder.bias", same),
            ("parser.window.weight", "parser.gate.1.weight", lambda w: w.permute(0, 2, 1).reshape(hidden, -1)),
            ("parser.window.bias", "parser.gate.1.bias", same),
            ("parser.norm.weight", "parser.gate.2.weight", same), ("parser.norm.bias", "parser.gate.2.bias", same),
            ("parser.distance.weight", "parser.gate.5.weight", lambda w: w[0:1, :, 0]),
            ("parser.distance.bias", "parser.gate.5.bias", lambda b: b[0:1]),
            ("parser.next_distance.weight", "parser.gate.5.weight", lambda w: w[1:2, :, 0]),
            ("parser.next_distance.bias", "parser.gate.5.bias", lambda b: b[1:2]),
            ("predictor.key.weight", "predictor.projector_pred.1.weight", same),
            ("predictor.key.bias", "predictor.projector_pred.1.bias", same),
            ("predictor.project.weight", "predictor.ffd.1.weight", same),
            ("predictor.project.bias", "predictor.ffd.1.bias", same),
            ("predictor.norm.weight", "predictor.ffd.2.weight", same),
            ("predictor.norm.bias", "predictor.ffd.2.bias", same),
        ]
        for k in range(size["n_layers"]):
            ours_layer, cell = f"readers.{k}.", f"reader.{k}.memory_rnn."
            inputs = size["emb_size"] if k == 0 else hidden
            for half in ("ih", "hh"):
                weights += [(f"{ours_layer}{half}.{kind}", f"{cell}{half}.0.{kind}", lstm_gates_reordered)
                            for kind in ("weight", "bias")]
                weights += [(f"{ours_layer}{half}_norm.{a}", f"{cell}{half}.1.{b}", lstm_gates_reordered)
                            for a, b in (("weight", "gamma"), ("bias", "beta"))]
            weights += [(f"{ours_layer}c_norm.weight", f"{cell}c_norm.gamma", same),
                        (f"{ours_layer}c_norm.bias", f"{cell}c_norm.beta", same)]
            key = f"reader.{k}.projector_summ.1."
            weights += [(ours_layer + "key_x.weight", key + "weight", lambda w, i=inputs: w[:, :i]),
                        (ours_layer + "key_x.bias", key + "bias", same),
                        (ours_layer + "key_h.weight", key + "weight", lambda w, i=inputs: w[:, i:])]
        return weights

    def batch(self, rng: torch.Generator) -> dict[str, torch.Tensor]:
        """Four sentences of one random length (see the class docstring)."""
        length = int(torch.randint(3, 10, (1,), generator=rng))
        tokens = torch.randint(FIRST_WORD, VOCAB_SIZE, (4, length), generator=rng)
        return {"tokens": tokens, "mask": torch.ones_like(tokens, dtype=torch.bool)}

    def stages(self, pair: Pair, batch: dict[str, torch.Tensor]) -> Iterator[tuple[str, Any, Any]]:
        from depinduce.models.prpn import model as prpn_model
        from depinduce.training.objectives import NextWordLM

        ours, theirs = pair.ours, pair.theirs
        tokens, mask = batch["tokens"], batch["mask"]
        recorded = self.record_ours(ours, prpn_model, tokens, mask)
        boundary = torch.full((len(tokens), 1), ours.boundary_index)
        inputs = torch.cat([boundary, tokens], dim=1)
        targets = torch.cat([tokens, boundary], dim=1)
        steps: list[list[torch.Tensor]] = [[] for _ in theirs.reader]
        hooks = [reader.register_forward_hook(lambda _m, _i, out, k=k: steps[k].append(out[0]))
                 for k, reader in enumerate(theirs.reader)]
        predicted: list[torch.Tensor] = []
        hooks.append(theirs.predictor.register_forward_hook(lambda _m, _i, out: predicted.append(out)))
        try:
            with authors_float64():
                logits, _ = theirs(inputs.t(), theirs.init_hidden(len(tokens)))
        finally:
            for hook in hooks:
                hook.remove()
        gates = theirs.attentions.transpose(0, 1)  # (B, T+1, layers + 3, slots)
        yield "distances d", recorded["distance"], theirs.gates
        yield "reading gates", recorded["gates"][0], gates[:, :, 0]
        yield "predicting gates", recorded["gates"][1], gates[:, :, len(theirs.reader) + 1]
        for k, states in enumerate(steps):
            yield f"hidden states, reading layer {k + 1}", recorded["readers"][k], torch.stack(states, dim=1)
        width = recorded["predictor"].shape[-1]
        yield "predict network output", recorded["predictor"].flatten(0, 1), \
            predicted[0].view(-1, len(tokens), width).transpose(0, 1).reshape(-1, width)
        logits = logits.transpose(0, 1)
        yield "logits", ours.output_logits(ours.lm_hidden(tokens, mask).flatten(0, 1)), logits.flatten(0, 1)
        their_loss = main_up_criterion(logits.transpose(0, 1), targets.t(), torch.ones_like(targets.t()))
        yield "loss", NextWordLM(ours.boundary_index).compute(ours, tokens=tokens, mask=mask).loss, their_loss

    def decoders(self, rng: np.random.Generator, sentences: int) -> dict[str, DecoderTally]:
        """Their parse (``test_phrase_grammar.py``: ``build_tree`` on the words' distances, the deepest word k
        splitting (w_<k)(w_k (w_>k)), ties to the leftmost) on random float32 word distances, beside depinduce's
        ``tree: paper`` tree (the same parse as split distances for the shared splitter); a third of the
        sentences draw their distances from four values, so ties are common.  Their file is Python 2 (print
        statements): its ``build_tree`` and ``get_brackets``, valid Python 3, are taken from its text alone."""
        import nltk

        from depinduce.structures.spans import binary_tree_from_distances, labelled_spans
        from depinduce.structures.spans import word_depths_to_split_distances

        path = self.authors / "test_phrase_grammar.py"
        need_file(path, "give the yikangshen/PRPN checkout")
        theirs = functions_from_text(path, ("build_tree", "get_brackets"), {"numpy": np, "nltk": nltk})
        tally = DecoderTally()
        for _ in range(sentences):
            n = int(rng.integers(1, 11))
            depth = grid_or_normal(rng, n, rng.random() < 1 / 3)
            words = [f"w{i}" for i in range(n)]
            their_spans = theirs["get_brackets"](theirs["build_tree"](depth, words))[0] | ({(0, n)} if n > 1 else set())
            tree = binary_tree_from_distances(words, word_depths_to_split_distances(depth.tolist()))
            our_spans = {(a, b) for _, a, b in labelled_spans(tree) if b - a > 1}
            tally.add(sorted(our_spans), sorted(their_spans), lambda spans: tuple(spans))
        return {"tree: paper trees": tally}

    @staticmethod
    def record_ours(ours: Any, prpn_model: ModuleType, tokens: torch.Tensor, mask: torch.Tensor
                    ) -> dict[str, Any]:
        """depinduce's distances, gates (reading, predicting), reading-layer outputs and predict-network output
        from one forward pass: hooks on the modules, and a recording wrapper around the gate function."""
        found: dict[str, Any] = {"gates": [], "readers": []}
        gate_function = prpn_model.stick_breaking_gates

        def recording_gates(*args: Any, **kwargs: Any) -> torch.Tensor:
            found["gates"].append(gate_function(*args, **kwargs))
            return found["gates"][-1]

        hooks = [ours.parser.register_forward_hook(lambda _m, _i, out: found.update(distance=out[0])),
                 ours.predictor.register_forward_hook(lambda _m, _i, out: found.update(predictor=out))]
        hooks += [reader.register_forward_hook(lambda _m, _i, out: found["readers"].append(out[0]))
                  for reader in ours.readers]
        prpn_model.stick_breaking_gates = recording_gates
        try:
            ours.lm_hidden(tokens, mask)
        finally:
            prpn_model.stick_breaking_gates = gate_function
            for hook in hooks:
                hook.remove()
        return found


def functions_from_text(path: Path, names: tuple[str, ...], namespace: dict[str, Any]) -> dict[str, Any]:
    """The top-level functions ``names`` of a file that does not import (here: Python 2 elsewhere in it), each
    taken from the file's text as written (its ``def`` line to the next top-level statement) and executed in
    ``namespace``."""
    lines = path.read_text().splitlines()
    for name in names:
        start = next((i for i, line in enumerate(lines) if line.startswith(f"def {name}(")), None)
        if start is None:
            sys.exit(f"{path}: no function {name}")
        end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i][0].isspace()), len(lines))
        text = "\n" * start + "\n".join(lines[start:end])  # at its own line numbers, for tracebacks
        exec(compile(text, str(path), "exec"), namespace)  # noqa: S102 (their code)
    return namespace


def main_up_criterion(output: torch.Tensor, targets: torch.Tensor, targets_mask: torch.Tensor) -> torch.Tensor:
    """Their ``main_UP.py`` loss (a function of that script, which cannot be imported without running it):
    the mean negative log-likelihood of the targets over the mask, as written there."""
    targets, targets_mask = targets.reshape(-1), targets_mask.reshape(-1)
    scores = torch.nn.functional.log_softmax(output.reshape(-1, output.shape[-1]), dim=-1)
    loss = torch.gather(scores, 1, targets[:, None]).view(-1)
    return (-loss * targets_mask).sum() / targets_mask.sum()


ADAPTERS: dict[str, type[Adapter]] = {"udgn": UDGNAdapter, "structformer": StructFormerAdapter,
                                      "probformer": ProbFormerAdapter, "rngtr": RNGTrAdapter, "prpn": PRPNAdapter}


if __name__ == "__main__":
    sys.exit(main())
