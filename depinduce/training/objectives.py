"""Training objectives: the engine owns the losses, backends implement the hooks of their objective.

The hooks of each objective are the abstract methods of its contract class (:mod:`depinduce.models.contracts`),
which a backend subclasses; :meth:`Objective.check_model` checks the model is one (``isinstance``).

- :class:`MaskedLM` (StructFormer, UDGN, Probabilistic Transformer) — exactly docs/models-reference.md: each real token
  is masked independently with probability ``mask_rate``; ``<unk>`` and padding are never masked; a masked token
  is always replaced by ``<mask>``; the loss is the cross-entropy over masked positions only, and the backend's
  ``output_logits`` is called on the hidden states of those positions alone (the output softmax otherwise
  dominates CPU time).  Dev masks are drawn once per sentence from a fixed seed.
- :class:`NextWordLM` (PRPN, one sentence at a time) — hook ``lm_hidden(tokens, mask) -> (B, T+1, H)`` where
  position t has read a sentence-boundary symbol and the words before t and predicts word t, and position n
  predicts the closing boundary; then ``output_logits``.  The boundary is index ``len(vocab)`` (one past the
  vocabulary), which the backend embeds and predicts: it plays ``<s>`` and ``</s>``.
- :class:`StreamLM` (PRPN's language-model mode) — continuous text: the training sentences in file order, each
  followed by the boundary, cut into ``batch_tokens // bptt`` parallel streams and read ``bptt`` tokens at a
  time; hook ``lm_stream(tokens, state) -> (hidden (B, T, H), state)`` carries the backend's state (a list of
  tensors) from one chunk to the next, and gradients stop at chunk boundaries (truncated backpropagation).
- :class:`HeadsAndLabels` (RNGTr/SynTr) — hook ``arc_label_passes(tokens, mask, heads, *, upos, init_heads,
  init_labels)`` yielding ``(arc (b, T, T+1), label (b, T, L), rows (b,))`` per refinement pass (arc column 0 =
  ROOT; label logits at the gold heads; ``rows`` the sentences still refining); head CE + label CE at every pass,
  one update per batch or (``updates_per_pass``) one per pass.
- :class:`Likelihood` (the compound / neural PCFG) — hook ``neg_elbo(tokens, mask) -> (per_sentence (B,),
  words (B,))``: each sentence's negative ELBO (its exact negative log-likelihood for a model without a latent)
  and the words it counts; the loss is the mean over the sentences that count, as the paper's.

Every objective adds the backend's ``regularizer()`` and reports the summed per-token negative log-likelihood
and the token count separately, so perplexity = exp(sum / count) is exact over a whole corpus and across ranks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from depinduce.data.vocab import Vocab
from depinduce.errors import ModelError, RecipeError, UsageError
from depinduce.models.contracts import (
    LikelihoodBackend, MaskedLMBackend, NextWordLMBackend, RefinerBackend, StreamingLMBackend, require_contract,
)
from depinduce.models.layers.kernels import on_cpu_route
from depinduce.models.layers.output_loss import IGNORE, linear_cross_entropy, widened
from depinduce.models.neural import LinearOutputLayer


@dataclass
class LossOutput:
    """What one forward pass of an objective gives: the loss to minimise and the exact counts behind it."""

    loss: torch.Tensor  # scalar: mean NLL over predicted tokens + regularizer
    nll_sum: torch.Tensor  # scalar, detached: summed NLL (no regularizer)
    count: torch.Tensor  # scalar long: tokens predicted


def _summed_nll(model: Any, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Summed cross-entropy of ``targets`` (N,) under the backend's output layer on ``hidden`` (N, H).  A backend
    whose output layer is one linear map says so (``LinearOutputLayer``); its loss is then computed with the
    gradients made in the same pass (``linear_cross_entropy``: the same numbers, far less memory at the step's
    peak).  Otherwise ``output_logits`` and ``F.cross_entropy``."""
    if isinstance(model, LinearOutputLayer):
        return linear_cross_entropy(*model.output_layer(hidden), targets)
    return F.cross_entropy(widened(model.output_logits(hidden)), targets, reduction="sum")


def _finish(model: Any, nll_sum: torch.Tensor, count: torch.Tensor) -> LossOutput:
    loss = nll_sum / count.clamp(min=1)  # no predicted token (rare, tiny batches): 0, still connected to the graph
    reg = model.regularizer()
    if reg is not None:
        loss = loss + reg
    return LossOutput(loss, nll_sum.detach(), count)


class Objective(ABC):
    """One training objective: turns a batch into model inputs (``prepare``) and computes the loss (``compute``).

    ``prepare`` runs on the CPU before the batch moves to the device, so random choices (the masks) come from a
    CPU generator whose state is checkpointed: a resumed run draws exactly the masks the uninterrupted run would.
    """

    name: ClassVar[str]
    # Perplexity is meaningful for language-model objectives only.
    reports_perplexity: ClassVar[bool] = True
    # Whether batches must carry gold heads/labels (read from CoNLL-U) instead of plain model-view text.
    needs_gold: ClassVar[bool] = False

    @abstractmethod
    def check_model(self, model: Any) -> None:
        """A one-line error unless ``model`` is the contract of this objective (:mod:`depinduce.models.contracts`),
        naming the hooks it lacks."""

    @abstractmethod
    def prepare(self, tokens: torch.Tensor, mask: torch.Tensor, *, generator: torch.Generator | None,
                fixed: Sequence[torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
        """The keyword tensors :meth:`compute` takes, for padded ``tokens``/``mask`` (B, T).

        ``generator`` drives training randomness; ``fixed`` (one tensor per row) replaces it for evaluation.
        """

    @abstractmethod
    def compute(self, model: Any, **inputs: torch.Tensor) -> LossOutput:
        """Loss of ``model`` on one prepared batch (runs inside the DDP-wrapped forward)."""

    def stepwise(self, model: Any) -> bool:
        """Whether a batch makes several optimiser updates with ``model`` (see :meth:`updates`)."""
        return False

    def max_updates(self, model: Any) -> int:
        """Optimiser updates one batch makes at most (sizes the learning-rate schedule)."""
        return 1

    def updates(self, model: Any, **inputs: torch.Tensor) -> Iterator[LossOutput]:
        """The loss of each optimiser update one batch makes, computed lazily: the caller steps the optimiser
        after each before asking for the next (one update, ``compute``'s, unless :meth:`stepwise`)."""
        yield self.compute(model, **inputs)


# ------------------------------------------------------------------------------------------------ masked LM


def draw_mask(tokens: torch.Tensor, mask: torch.Tensor, rate: float, generator: torch.Generator | None,
              *, unk_index: int = Vocab.unk_index) -> torch.Tensor:
    """Positions to mask: each real, known token independently with probability ``rate``."""
    draws = torch.rand(tokens.shape, generator=generator, device=tokens.device)
    return (draws < rate) & mask & (tokens != unk_index)


def fixed_masks(rows: Sequence[Sequence[int]], rate: float, seed: int, *,
                unk_index: int = Vocab.unk_index) -> list[torch.Tensor]:
    """One mask per sentence, drawn in corpus order from ``seed``: independent of batching, sharding or epoch."""
    generator = torch.Generator().manual_seed(seed)
    out = []
    for row in rows:
        ids = torch.as_tensor(row, dtype=torch.long)
        out.append((torch.rand(len(row), generator=generator) < rate) & (ids != unk_index))
    return out


def stack_fixed(fixed: Sequence[torch.Tensor], width: int) -> torch.Tensor:
    """Per-sentence masks right-padded with False into a (B, width) tensor."""
    out = torch.zeros((len(fixed), width), dtype=torch.bool)
    for b, m in enumerate(fixed):
        out[b, : len(m)] = m
    return out


class MaskedLM(Objective):
    """Masked-LM objective of docs/models-reference.md (no 80/10/10; loss and logits at masked positions only).

    ``chunks`` (``train.loss_chunks``): while training, split each batch into that many runs of consecutive
    sentences (sizes differing by at most one; one run per sentence when there are fewer), each forwarded on its
    own, and minimise the *sum* of the runs' mean losses, each with the regulariser.  This is the Probabilistic
    Transformer's trainer, which sums the losses of the 16-sentence chunks of its 64-sentence batches: its
    gradients are 4× a mean's, so its clipping acts 4× tighter and its weight decay 4× weaker than with a mean.
    None (the default): the batch's mean loss.  The reported NLL sum and count are the batch's either way."""

    name = "mlm"

    def __init__(self, mask_rate: float, *, chunks: int | None = None, mask_index: int = Vocab.mask_index,
                 unk_index: int = Vocab.unk_index) -> None:
        self.mask_rate = mask_rate
        self.chunks = chunks
        self.mask_index = mask_index
        self.unk_index = unk_index

    def check_model(self, model: Any) -> None:
        require_contract(model, MaskedLMBackend)

    def prepare(self, tokens, mask, *, generator=None, fixed=None):
        if fixed is not None:
            masked = stack_fixed(fixed, tokens.shape[1]) & mask
        else:
            masked = draw_mask(tokens, mask, self.mask_rate, generator, unk_index=self.unk_index)
        return {"tokens": tokens, "mask": mask, "masked": masked}

    def compute(self, model, *, tokens, mask, masked):
        if self.chunks is None or not model.training:  # evaluation sums the NLL: chunks would change nothing
            return self._mean_loss(model, tokens, mask, masked)
        parts = []
        for rows in zip(*(t.tensor_split(min(self.chunks, len(tokens))) for t in (tokens, mask, masked))):
            width = int(rows[1].sum(dim=1).max())  # each run padded to its own longest sentence, as forwarded alone
            parts.append(self._mean_loss(model, *(t[:, :width] for t in rows)))
        return LossOutput(sum(p.loss for p in parts), sum(p.nll_sum for p in parts), sum(p.count for p in parts))

    def _mean_loss(self, model, tokens, mask, masked) -> LossOutput:
        inputs = tokens.masked_fill(masked, self.mask_index)
        if hasattr(model, "encode_masked"):  # MaskedLMBackend's optional hook; a stand-in may give only encode
            hidden = model.encode_masked(inputs, mask, masked)
        else:
            hidden = model.encode(inputs, mask)[masked]
        nll = _summed_nll(model, hidden, tokens[masked])
        return _finish(model, nll, masked.sum())


# ------------------------------------------------------------------------------------------ next-word LM


class NextWordLM(Objective):
    """Next-word language modelling over each sentence on its own (PRPN's unsupervised-parsing mode): every word
    and the closing boundary are predicted, so perplexity counts n+1 predictions per n-word sentence."""

    name = "lm"

    def __init__(self, boundary_index: int) -> None:
        self.boundary_index = boundary_index

    def check_model(self, model: Any) -> None:
        require_contract(model, NextWordLMBackend)

    def prepare(self, tokens, mask, *, generator=None, fixed=None):
        return {"tokens": tokens, "mask": mask}

    def compute(self, model, *, tokens, mask):
        hidden = model.lm_hidden(tokens, mask)
        rows = torch.arange(tokens.shape[0], device=tokens.device)
        lengths = mask.sum(dim=1)
        targets = F.pad(tokens, (0, 1))
        targets[rows, lengths] = self.boundary_index
        predicted = F.pad(mask, (0, 1))
        predicted[rows, lengths] = True
        nll = _summed_nll(model, hidden[predicted], targets[predicted])
        return _finish(model, nll, predicted.sum())


class StreamLM(Objective):
    """Next-word language modelling over continuous text with truncated backpropagation (PRPN's LM mode).

    The objective keeps each stream's carried state under a name (``train``, ``dev``, ...): :meth:`use` picks
    the one the next :meth:`compute` reads and updates, :meth:`reset` starts it over (None = zero state).
    """

    name = "lm"

    def __init__(self, boundary_index: int, bptt: int) -> None:
        self.boundary_index = boundary_index
        self.bptt = bptt
        self.states: dict[str, list[torch.Tensor] | None] = {}
        self.active = "train"

    def check_model(self, model: Any) -> None:
        require_contract(model, StreamingLMBackend)

    def use(self, name: str) -> None:
        self.active = name

    def reset(self, name: str) -> None:
        self.states[name] = None

    def prepare(self, tokens, mask, *, generator=None, fixed=None):
        raise UsageError("continuous-text batches come from batching.TokenStream.chunk, not from sentences")

    def compute(self, model, *, tokens, targets):
        hidden, state = model.lm_stream(tokens, self.states.get(self.active))
        self.states[self.active] = [t.detach() for t in state]
        nll = _summed_nll(model, hidden.reshape(-1, hidden.shape[-1]), targets.reshape(-1))
        return _finish(model, nll, torch.tensor(targets.numel(), device=targets.device))

    def state_dict(self) -> dict[str, list[torch.Tensor]]:
        """The carried states (CPU tensors), for checkpoints: a resumed run continues the streams exactly."""
        return {name: [t.cpu() for t in state] for name, state in self.states.items() if state is not None}

    def load_state_dict(self, states: dict[str, list[torch.Tensor]], device: torch.device) -> None:
        self.states = {name: [t.to(device) for t in state] for name, state in states.items()}


# ------------------------------------------------------------------------------------ supervised parsing


class HeadsAndLabels(Objective):
    """Supervised heads + labels (RNGTr/SynTr): cross-entropy on each word's head and on its label at the gold
    head, at every refinement pass.  Batches come from :func:`~.gold_data.collate_gold`: ``heads`` (B, T) in 0..n
    (0 = ROOT), ``labels`` and ``upos`` (B, T) ids, and optionally the initial graph of each sentence
    (``init_heads``/``init_labels``, from ``--init-train``) and the model's ``word_inputs`` (``piece_*`` word
    pieces of a BERT-initialised encoder).

    The hook ``arc_label_passes`` yields each pass's (arc (b, T, T+1), label logits (b, T, L) at the gold heads,
    the b batch rows it ran on): a sentence whose graph has converged leaves the later passes, so its tokens are
    in no later pass's loss.  By default the passes' losses make one update: the summed NLL over every (token,
    pass) pair divided by their number (the per-pass means, weighted by the tokens each pass scored).  A model
    whose ``updates_per_pass`` is true gets one update per pass instead (:meth:`updates`), each on that pass's
    mean — the authors' trainer.  The loss counts every token, punctuation included; the reported NLL and count
    are sums over (token, pass) pairs, so dev loss is exact over a corpus."""

    name = "supervised"
    reports_perplexity = False
    needs_gold = True
    _GOLD = ("heads", "labels", "upos")
    _OPTIONAL = ("init_heads", "init_labels")

    def check_model(self, model: Any) -> None:
        require_contract(model, RefinerBackend)

    def prepare(self, tokens, mask, *, generator=None, fixed=None, **gold):
        missing = [k for k in self._GOLD if gold.get(k) is None]
        if missing:
            raise UsageError(f"the supervised objective needs batches with gold {', '.join(missing)}")
        unknown = sorted(k for k in set(gold) - set(self._GOLD) - set(self._OPTIONAL) if not k.startswith("piece_"))
        if unknown:
            raise UsageError(f"the supervised objective does not take {', '.join(unknown)}")
        return {"tokens": tokens, "mask": mask, **{k: v for k, v in gold.items() if v is not None}}

    def stepwise(self, model: Any) -> bool:
        return bool(getattr(model, "updates_per_pass", False))

    def max_updates(self, model: Any) -> int:
        return int(getattr(model, "max_passes", 1)) if self.stepwise(model) else 1

    def _pass_losses(self, model, *, tokens, mask, heads, labels, upos, init_heads=None, init_labels=None,
                     **pieces) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """(summed head + label NLL, tokens scored) of each pass, computed as the pass is run.

        ``rows`` may also be a (B,) boolean mask over a pass of the whole batch (the device route's static
        passes): its tokens are those of the rows it marks.  Off the CPU's route the sums take every position,
        the others ignored by the loss, rather than a boolean selection (which makes the host wait for the
        device); the count stays on the device."""
        passes = model.arc_label_passes(tokens, mask, heads, upos=upos, init_heads=init_heads,
                                        init_labels=init_labels, **pieces)
        for arc, label, rows in passes:
            if rows is not None and rows.dtype == torch.bool:
                m, h, lab = mask & rows[:, None], heads, labels
            else:
                m = mask if rows is None else mask[rows]
                h = heads if rows is None else heads[rows]
                lab = labels if rows is None else labels[rows]
            if on_cpu_route(arc):
                nll = (F.cross_entropy(widened(arc[m]), h[m], reduction="sum")
                       + F.cross_entropy(widened(label[m]), lab[m], reduction="sum"))
            else:
                nll = (F.cross_entropy(widened(arc).flatten(0, 1), h.masked_fill(~m, IGNORE).flatten(),
                                       reduction="sum", ignore_index=IGNORE)
                       + F.cross_entropy(widened(label).flatten(0, 1), lab.masked_fill(~m, IGNORE).flatten(),
                                         reduction="sum", ignore_index=IGNORE))
            yield nll, m.sum()

    def compute(self, model, **inputs):
        total = count = None
        for nll, n in self._pass_losses(model, **inputs):
            total, count = (nll, n) if total is None else (total + nll, count + n)
        if total is None:
            raise ModelError("arc_label_passes yielded no pass")
        return _finish(model, total, count)

    def updates(self, model, **inputs) -> Iterator[LossOutput]:
        if not self.stepwise(model):
            yield self.compute(model, **inputs)
            return
        for nll, n in self._pass_losses(model, **inputs):
            yield _finish(model, nll, n)


# ------------------------------------------------------------------------------------------ likelihood


class Likelihood(Objective):
    """Maximum likelihood of a generative model of sentences (the compound PCFG's ELBO, the neural PCFG's exact
    log-likelihood).  The backend's ``neg_elbo`` gives each sentence's negative ELBO and the words it counts (0
    for a sentence the model cannot generate, e.g. a one-word sentence under a binary grammar: it is left out of
    both the loss and the counts).

    Loss = the mean negative ELBO over the counted sentences of the batch (Kim et al. 2019 average over sentences,
    not words; with their clipping at norm 3 a per-word mean would change the effective step size), plus the
    regulariser.  Reported: the summed negative ELBO and the word count, so perplexity = exp(sum / words) over a
    whole corpus and across ranks: the ELBO bounds log p(x) from below, so this bounds the model's perplexity from
    above (in expectation, when the backend samples its latent; exact when there is no latent)."""

    name = "likelihood"

    def check_model(self, model: Any) -> None:
        require_contract(model, LikelihoodBackend)

    def prepare(self, tokens, mask, *, generator=None, fixed=None):
        return {"tokens": tokens, "mask": mask}

    def compute(self, model, *, tokens, mask):
        per_sentence, words = model.neg_elbo(tokens, mask)
        counted = words > 0
        total = torch.where(counted, per_sentence, torch.zeros_like(per_sentence)).sum()
        loss = total / counted.sum().clamp(min=1)  # no counted sentence: 0, still connected to the graph
        reg = model.regularizer()
        if reg is not None:
            loss = loss + reg
        return LossOutput(loss, total.detach(), words.sum())


def objective_for(kind: str, *, mask_rate: float, vocab_size: int, lm_mode: str = "sentences",
                  bptt: int = 35, loss_chunks: int | None = None) -> Objective:
    """The objective a backend's ``capabilities.objective`` names (``lm_mode`` picks sentences or continuous
    text for ``lm``; the sentence boundary of both is index ``vocab_size``; ``loss_chunks`` sums the masked LM's
    losses over that many runs of sentences)."""
    if lm_mode != "sentences" and kind != "lm":
        raise RecipeError(f"lm_mode '{lm_mode}' needs a next-word language model; this model's objective is "
                          f"'{kind}'")
    if loss_chunks is not None and kind != "mlm":
        raise RecipeError(f"train.loss_chunks applies to masked-LM training; this model's objective is '{kind}'")
    if kind == "mlm":
        return MaskedLM(mask_rate, chunks=loss_chunks)
    if kind == "lm":
        return StreamLM(vocab_size, bptt) if lm_mode == "continuous" else NextWordLM(vocab_size)
    if kind == "supervised":
        return HeadsAndLabels()
    if kind == "likelihood":
        return Likelihood()
    raise ModelError(f"objective '{kind}' is not trainable")


class LossModule(torch.nn.Module):
    """The model and its objective as one module, so DDP wraps a ``forward`` that runs every hook the loss uses
    (DDP synchronises gradients of what runs inside its forward; calling ``encode`` directly would bypass it)."""

    def __init__(self, model: torch.nn.Module, objective: Objective) -> None:
        super().__init__()
        self.model = model
        self.objective = objective

    def forward(self, **inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(loss, summed NLL, token count): a tuple, the output shape DDP knows how to search for tensors."""
        out = self.objective.compute(self.model, **inputs)
        return out.loss, out.nll_sum, out.count
