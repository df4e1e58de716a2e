"""Fidelity check: depinduce's network against its authors' code, weights copied across, float64 end to end.

For one backend, each draw builds both implementations at a small size from one seed, copies the authors'
freshly initialised weights into depinduce's network (a fixed map per backend: names, transposes, the order of
concatenated blocks), runs one random float64 batch through both, in eval mode and in train mode, and records
the largest absolute difference at each stage the two compute: the parser's distributions, the hidden states,
the output logits, the loss and every parameter's gradient.  depinduce runs with the authors' switches on (the
paper recipe's values).  Train mode runs at dropout 0: the two sides draw their dropout masks from different
generators (and torch's LSTM draws its own inside the kernel), so train mode checks the training-time code paths
(depinduce's fused CPU kernels, recomputation) and the tests check where each dropout applies.  Where both sides
drop the same tensors in the same order (the Probabilistic Transformer), a third run at the paper's dropout
routes both sides' dropout through one mask source (``SharedMasks``) and compares every dropped tensor too.
The others do not: StructFormer's authors run their layers time-major and depinduce its last layer at the
masked positions only, so the two drop differently laid-out tensors; UDGN's parser LSTM draws its masks inside
torch's kernel; PRPN's authors step all layers per word where depinduce runs one layer after another; RNGTr's
authors share one MLP mask over all positions (README: a difference without a switch).
Then each backend's own decoders, the authors' decoding conventions, are run beside the authors' decoders on
random inputs; where the trees differ, both are scored under the authors' objective: equal scores count as
ties, scores apart by float64 round-off only (1e-12 relative) as round-off, anything else as a failure.

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
    neither can tell such trees apart); and differing otherwise (a failure)."""

    ROUNDING = 1e-12

    equal: int = 0
    tied: int = 0
    rounding: int = 0
    differ: int = 0

    def add(self, ours: list[Any], theirs: list[Any], score: Callable[[list[Any]], Any]) -> None:
        ours_score, their_score = (None, None) if ours == theirs else (score(ours), score(theirs))
        if ours == theirs:
            self.equal += 1
        elif ours_score == their_score:
            self.tied += 1
        elif isinstance(ours_score, float) and isinstance(their_score, float) and \
                abs(ours_score - their_score) <= self.ROUNDING * max(1.0, abs(their_score)):
            self.rounding += 1
        else:
            self.differ += 1

    @property
    def total(self) -> int:
        return self.equal + self.tied + self.rounding + self.differ

    def line(self) -> str:
        return (f"{self.equal} of {self.total} equal; {self.tied} differ as exactly tied trees; "
                f"{self.rounding} as trees whose scores differ by round-off; {self.differ} differ otherwise")


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

    MASK_DROPOUT = 0.0  # > 0: the backend also runs in train mode at this dropout with shared masks

    def built_with_dropout(self, seed: int, dropout: float) -> Pair:
        """Both networks at ``dropout`` (backends with ``MASK_DROPOUT``)."""
        raise NotImplementedError(f"{self.name}: no shared-mask run")

    def share_masks(self, pair: Pair, masks: SharedMasks) -> contextlib.AbstractContextManager[None]:
        """Route both sides' dropout through ``masks`` while the context is open (backends with
        ``MASK_DROPOUT``)."""
        raise NotImplementedError(f"{self.name}: no shared-mask run")

    def dropped_entries(self, x: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The entries of a dropped tensor that both sides compute alike (backends with ``MASK_DROPOUT``)."""
        return x


@dataclass
class SharedMasks:
    """One dropout for both sides: keep-masks drawn with ``torch.rand`` from torch's default generator, reseeded
    when either side's network starts a forward pass (``restart``, from a forward pre-hook), so two
    implementations that drop the same tensors in the same order draw the same masks (and torch's checkpoint,
    which restores the generator when it recomputes in backward, draws them again).  Each call's input and output
    are kept per side and forward pass, so the dropped tensors are compared too."""

    seed: int
    side: str = "ours"
    calls: dict[str, list[list[tuple[torch.Tensor, torch.Tensor]]]] = field(
        default_factory=lambda: {"ours": [], "theirs": []})

    def restart(self, side: str) -> None:
        torch.manual_seed(self.seed)
        self.side = side
        self.calls[side].append([])

    def dropout(self, x: torch.Tensor, p: float, training: bool = True, rows: torch.Tensor | None = None
                ) -> torch.Tensor:
        """Inverted dropout; with ``rows`` (depinduce's rows-only layers) the whole (B, T, C) mask is drawn and
        the selected rows taken, as depinduce's own ``apply_dropout`` does."""
        if not training or p == 0.0:
            return x
        shape = x.shape if rows is None else (*rows.shape, x.shape[-1])
        keep = torch.rand(shape, dtype=F64) >= p
        keep = keep if rows is None else keep[rows].view(x.shape)
        out = x * keep / (1.0 - p)
        self.calls[self.side][-1].append((x.detach(), out.detach()))
        return out

    def stages(self, entries: Callable[[torch.Tensor], torch.Tensor]
               ) -> Iterator[tuple[str, torch.Tensor, torch.Tensor]]:
        """Every dropout call of each side's first forward pass, in order: what went in and what came out, at the
        ``entries`` both compute alike (padding excluded)."""
        ours, theirs = self.calls["ours"][0], self.calls["theirs"][0]
        if [x.shape for x, _ in ours] != [x.shape for x, _ in theirs]:
            sys.exit(f"the two sides drop different tensors: {[tuple(x.shape) for x, _ in ours]} vs "
                     f"{[tuple(x.shape) for x, _ in theirs]}")
        for k, name in enumerate(("inputs", "outputs")):
            yield f"dropout {name} (every call)", torch.cat([entries(call[k]).flatten() for call in ours]), \
                torch.cat([entries(call[k]).flatten() for call in theirs])


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
    assert losses is not None, "an adapter's last stage is the loss"
    if masks is not None:
        for stage, ours, theirs in masks.stages(lambda x: adapter.dropped_entries(x, batch)):
            table.add(stage, difference(ours, theirs))
    losses[0].backward()
    losses[1].backward()
    table.add("gradients", pair.gradient_difference())


def run_draw(adapter: Adapter, seed: int, tables: dict[str, StageTable]) -> None:
    pair = prepared(adapter.build(seed))
    batch = adapter.batch(torch.Generator().manual_seed(seed))
    for mode in ("eval", "train"):
        run_mode(adapter, pair, batch, mode == "train", tables.setdefault(mode, StageTable()))
    if adapter.MASK_DROPOUT:
        masks = SharedMasks(seed)
        pair = prepared(adapter.built_with_dropout(seed, adapter.MASK_DROPOUT))
        pair.masks = masks
        with adapter.share_masks(pair, masks):
            run_mode(adapter, pair, batch, True, tables.setdefault("masks", StageTable()), masks)


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
    titles = {"eval": "eval mode", "train": "train mode (dropout 0)",
              "masks": f"train mode, dropout {adapter.MASK_DROPOUT} with the same masks on both sides"}
    for mode, table in tables.items():
        table.print(titles[mode])
    tallies = adapter.decoders(np.random.default_rng(args.seed), args.sentences)
    for name, tally in tallies.items():
        print(f"decoder {name}: {tally.line()}")
    worst = max(v for table in tables.values() for v in table.worst.values())
    failed = worst > args.tolerance or any(t.differ for t in tallies.values())
    print("FAIL" if failed else "OK", f"(largest difference {worst:.2e}, tolerance {args.tolerance:.0e})")
    return 1 if failed else 0


# ----------------------------------------------------------------------------------------------------- UDGN


class UDGNAdapter(Adapter):
    """yikangshen/UDGN (``models.py``, ``layers.py``; decoders in ``test_phrase_grammar.py``).  Their parser's
    LSTM is ``emb_size`` wide and scales the bilinear scores by emb_size^-½, so depinduce runs with
    ``parser_hidden_size = hidden_size``; their projection's halves are [parent; child], depinduce's [child;
    parent]; their per-relation biases (2, N) are depinduce's (N, 2)."""

    name = "udgn"
    SIZE = {"hidden_size": 12, "n_layers": 2, "n_heads": 3, "head_size": 5, "parser_layers": 2}

    def module(self) -> ModuleType:
        need_file(self.authors / "models.py", "give the yikangshen/UDGN checkout")
        if str(self.authors) not in sys.path:
            sys.path.insert(0, str(self.authors))
        import models  # type: ignore[import-not-found]

        return models

    def build(self, seed: int) -> Pair:
        from depinduce.models.udgn import UDGN, UDGNConfig

        size = self.SIZE
        torch.manual_seed(seed)
        theirs = self.module().UDGN(
            emb_size=size["hidden_size"], head_size=size["head_size"], nlayers=size["n_layers"],
            ntokens=VOCAB_SIZE, nhead=size["n_heads"], dropout=0.0, parser_dropout=0.0, dropatt=0.0,
            pos_emb=False, pad=PAD, n_parser_layers=size["parser_layers"])
        ours = UDGN(UDGNConfig(**size, parser_hidden_size=size["hidden_size"], dropout=0.0, dropatt=0.0,
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

    def stages(self, pair: Pair, batch: dict[str, torch.Tensor]) -> Iterator[tuple[str, Any, Any]]:
        ours, theirs = pair.ours, pair.theirs
        tokens, mask, masked = batch["tokens"], batch["mask"], batch["masked"]
        inputs = tokens.masked_fill(masked, MASK)
        rows = mask[:, :, None]  # their padding rows hold a distribution over the real words; ours are 0
        states: list[torch.Tensor] = []
        hooks = [layer.register_forward_hook(lambda _m, _i, out: states.append(out.detach().clone()))
                 for layer in ours.layers]
        try:
            p = ours.head_distribution(inputs, mask)
            graph = ours.graph(inputs, mask)
            hidden = ours.encode_masked(inputs, mask, masked)
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
        yield "logits (masked positions)", ours.output_logits(hidden), theirs.output_layer(out["raw_output"][masked])
        yield "loss", ours_masked_lm_loss(ours, batch), their_loss

    def decoders(self, rng: np.random.Generator, sentences: int) -> dict[str, DecoderTally]:
        """Their ``argmax`` and ``dms`` on p with the diagonal zeroed (float32, as their model's), ours through
        the registered decoders on the log-distribution scores the backend gives (log_softmax, read in float32
        by ``parse``)."""
        from depinduce.models.base import ParseScores
        from depinduce.models.udgn.decoders import AUTHORS_DECODERS

        need_file(self.authors / "test_phrase_grammar.py", "their decoders")
        if str(self.authors) not in sys.path:
            sys.path.insert(0, str(self.authors))
        import test_phrase_grammar as theirs  # type: ignore[import-not-found]

        tallies = {"udgn-argmax": DecoderTally(), "udgn-tree": DecoderTally()}
        for _ in range(sentences):
            n = int(rng.integers(1, 11))
            logits = torch.from_numpy(rng.normal(size=(n, n)) * rng.choice([1.0, 8.0, 40.0])).float()
            head = logits.softmax(dim=-1).fill_diagonal_(0.0).numpy()
            log_p = logits.log_softmax(dim=-1)
            scores = torch.full((n + 1, n + 1), float("-inf"))
            scores[1:, 0] = log_p.diagonal()
            scores[1:, 1:] = log_p.fill_diagonal_(float("-inf"))
            parse_scores = ParseScores(heads=scores)
            weights = np.log(head + 1e-9).astype(np.float64)

            def objective(heads: list[int], weights: np.ndarray = weights) -> float:
                return float(sum(weights[i, h - 1] for i, h in enumerate(heads) if h != 0))

            their_argmax = [0 if int(j) == i else int(j) + 1 for i, j in enumerate(np.argmax(head, axis=1))]
            their_tree = [0 if int(j) == i else int(j) + 1 for i, j in enumerate(theirs.dms(weights))]
            tallies["udgn-argmax"].add(AUTHORS_DECODERS["udgn-argmax"].decode(parse_scores), their_argmax,
                                       lambda heads, head=head: float(sum(head[i, h - 1] for i, h in
                                                                          enumerate(heads) if h != 0)))
            tallies["udgn-tree"].add(AUTHORS_DECODERS["udgn-tree"].decode(parse_scores), their_tree, objective)
        return tallies


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

    def module(self) -> ModuleType:
        root = self.authors.parent if (self.authors / "structformer.py").is_file() else self.authors
        need_file(root / "structformer" / "structformer.py", "give the folder that holds structformer/")
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        from structformer import structformer  # type: ignore[import-not-found]

        return structformer

    def build(self, seed: int) -> Pair:
        from depinduce.models.structformer import StructFormer, StructFormerConfig

        size = self.SIZE
        torch.manual_seed(seed)
        theirs = self.module().StructFormer(
            size["hidden_size"], size["n_layers"], VOCAB_SIZE, size["n_heads"], 0.0, 0.0, False, True, pad=PAD,
            n_parser_layers=size["n_parser_layers"], conv_size=size["conv_size"], relations=("head", "child"),
            weight_act="softmax")
        ours = StructFormer(StructFormerConfig(**size, ff_size=4 * size["hidden_size"], dropout=0.0, dropatt=0.0,
                                               pos_emb=True, max_positions=500, margin="batch"), VOCAB)
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

    def stages(self, pair: Pair, batch: dict[str, torch.Tensor]) -> Iterator[tuple[str, Any, Any]]:
        ours, theirs = pair.ours, pair.theirs
        tokens, mask, masked = batch["tokens"], batch["mask"], batch["masked"]
        inputs = tokens.masked_fill(masked, MASK)
        boundaries = word_boundaries(mask)
        states: list[torch.Tensor] = []
        their_states: list[torch.Tensor] = []
        hooks = [layer.register_forward_hook(lambda _m, _i, out: states.append(out.detach().clone()))
                 for layer in ours.layers]
        hooks += [layer.register_forward_hook(lambda _m, _i, out: their_states.append(out.transpose(0, 1)))
                  for layer in theirs.layers]
        try:
            found = ours.structure(inputs, mask, batch_margin=True)
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
        yield "logits (masked positions)", ours.output_logits(ours.encode_masked(inputs, mask, masked)), their_logits
        their_loss = torch.nn.functional.cross_entropy(their_logits, tokens[masked])
        yield "loss", ours_masked_lm_loss(ours, batch), their_loss

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

    def build(self, seed: int) -> Pair:
        return self.built_with_dropout(seed, 0.0)

    def built_with_dropout(self, seed: int, dropout: float) -> Pair:
        from torch import nn

        from depinduce.models.probformer import ProbFormer, ProbFormerConfig

        candidates = [self.authors / "src" / "models" / "modules", self.authors]
        path = next((c / "lazyHeadCRFEncoder.py" for c in candidates if (c / "lazyHeadCRFEncoder.py").is_file()),
                    candidates[0] / "lazyHeadCRFEncoder.py")
        need_file(path, "give the whyNLP/Probabilistic-Transformer checkout")
        module = import_file("authors_lazy_head_crf_encoder", path)
        size = self.SIZE
        torch.manual_seed(seed)
        theirs = nn.Module()
        theirs.embedding = nn.Embedding(VOCAB_SIZE, size["d"])
        nn.init.xavier_uniform_(theirs.embedding.weight)
        theirs.mod = module.HalfLazyHeadProbEncoder(
            d_model=size["d"], n_head=size["n_channels"], n_iter=size["n_iter"],
            dists=", ".join(str(n) for n in range(2, size["distance_threshold"] + 2)), async_update=True,
            use_td=f"uv:{size['rank']}", dropout=dropout)
        theirs.mod.distmask = theirs.mod.distmask.to(F64)
        theirs.linear = nn.Linear(size["d"], VOCAB_SIZE)
        ours = ProbFormer(ProbFormerConfig(**size, decomposition="uv", dropout=dropout, ternary_l2=self.TERNARY_L2),
                          VOCAB)

        def channels_first(x: torch.Tensor) -> torch.Tensor:
            return x.permute(0, 3, 2, 1)

        weights: list[tuple[str, str | tuple[str, ...], Transform]] = [
            ("embedding.weight", "embedding.weight", same), ("output.weight", "linear.weight", same),
            ("output.bias", "linear.bias", same),
            ("mean_field.factors.U", "mod.U", channels_first), ("mean_field.factors.V", "mod.V", channels_first)]
        return Pair(ours, theirs, weights)

    def stages(self, pair: Pair, batch: dict[str, torch.Tensor]) -> Iterator[tuple[str, Any, Any]]:
        ours, theirs = pair.ours, pair.theirs
        tokens, mask, masked = batch["tokens"], batch["mask"], batch["masked"]
        inputs = tokens.masked_fill(masked, MASK)
        found = ours.infer(inputs, mask)
        with authors_float64():
            features = theirs.mod(theirs.embedding(inputs), mask.to(torch.int32))
        # pairs of two different real words (their one-word sentences spread a row's mass over -1e9 entries)
        pairs = (mask[:, :, None] & mask[:, None, :] & ~torch.eye(tokens.size(1), dtype=torch.bool))[:, None]
        if pair.masks is None:  # theirs keeps Q_h after dropout (with masks: the dropout stages compare it)
            yield "head marginals Q_h", found.heads * pairs, theirs.mod.q_h * pairs
        yield "label scores q_z (final)", found.q_z[mask], features[mask]
        their_logits = theirs.linear(features)
        yield "logits (masked positions)", ours.output_logits(ours.encode_masked(inputs, mask, masked)), \
            their_logits[masked]
        yield "regulariser", ours.regularizer(), self.TERNARY_L2 * theirs.mod.getTernaryNorm(2)
        summed = sum(torch.nn.functional.cross_entropy(their_logits[b][masked[b]], tokens[b][masked[b]],
                                                       reduction="sum") for b in range(len(tokens)))
        their_loss = summed / masked.sum() + self.TERNARY_L2 * theirs.mod.getTernaryNorm(2)
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
        """Q_h (B, C, T, T) at pairs of two different real words, q_z (B, T, d) at real words (their padding
        rows hold a uniform Q_h and unmasked label scores; depinduce's are 0)."""
        mask = batch["mask"]
        if x.dim() == 4:
            pairs = mask[:, :, None] & mask[:, None, :] & ~torch.eye(mask.size(1), dtype=torch.bool)
            return x[pairs[:, None].expand_as(x)]
        return x[mask]

    @contextlib.contextmanager
    def share_masks(self, pair: Pair, masks: SharedMasks) -> Iterator[None]:
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
    BERT's 1e-12 (depinduce's ``layer_norm_eps``, taken from the BERT with ``--encoder-path``).  Three
    differences that have no switch are aligned on their side: the "no arc" row of their relation tables, learned
    there, is zeroed (fixed at zero in depinduce); the graphs are random trees (their argmax graphs drop
    2-cycles, depinduce's read them); their arc loss sees the self-loop column at −∞ (depinduce masks it)."""

    name = "rngtr"
    SIZE = {"hidden_size": 12, "n_layers": 2, "n_heads": 3, "ff_size": 20, "arc_mlp_size": 7, "label_mlp_size": 5,
            "max_positions": 16}
    UPOS = ["ADJ", "DET", "NOUN", "VERB"]
    LABELS = ["amod", "det", "nsubj", "obj", "root"]
    EPS = 1e-12

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
        ours = RNGTr(RNGTrConfig(**size, dropout=0.0, mlp_dropout=0.0, iterations=0, layer_norm_eps=self.EPS,
                                 updates="per_pass"), VOCAB, tags)
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
        lengths = random_lengths(rng, 4, 9)
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
        labels = torch.randint(0, tags.n_labels, mask.shape, generator=rng).masked_fill(~mask, 0)
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
