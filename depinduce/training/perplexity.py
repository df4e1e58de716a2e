"""Perplexity of a trained language model on a model-view text file (``depinduce perplexity``).

The run's own objective and settings decide what is measured, exactly as dev perplexity was during training:
next-word models predict every word and each sentence's end (continuous-text runs read the file as one stream
from a zero state); masked-LM models predict masked words under masks fixed per sentence by the run's
``dev_mask_seed`` — a pseudo-perplexity, comparable across runs of the same mask rate and between models of
the same objective, not with a next-word model's.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from depinduce.errors import InputError, ModelError
from depinduce.models.neural import NeuralBackend
from depinduce.models.registry import load_model
from depinduce.training import batching
from depinduce.training.config import load_run_config
from depinduce.training.corpus_loss import sentence_loss, stream_loss, text_inputs
from depinduce.training.trainrun import trainable_class
from depinduce.training.objectives import LossModule, StreamLM, fixed_masks, objective_for


@dataclass
class Perplexity:
    """What ``depinduce perplexity`` reports."""

    model: str
    objective: str  # lm | lm-continuous | mlm
    sentences: int
    predicted: int
    loss: float  # mean NLL per predicted token (nats)

    @property
    def perplexity(self) -> float:
        return math.exp(self.loss) if self.loss < 700 else float("inf")

    def as_dict(self) -> dict[str, object]:
        return {"model": self.model, "objective": self.objective, "sentences": self.sentences,
                "predicted": self.predicted, "loss": self.loss, "perplexity": self.perplexity}


def measure(run_dir: Path, text: Path, *, device: str = "cpu", batch_tokens: int | None = None,
            progress: bool = True) -> Perplexity:
    """The run's objective loss over ``text`` (one normalised sentence per line, as ``preprocess`` writes)."""
    config = load_run_config(run_dir, lambda name: trainable_class(name).config_class)
    model = load_model(str(run_dir), device=device)
    if not isinstance(model, NeuralBackend):
        raise ModelError(f"{run_dir}: model '{config.model}' is not a trained language model")
    cfg = config.train
    objective = objective_for(model.capabilities.objective, mask_rate=cfg.masked_lm.mask_rate,
                              vocab_size=len(model.vocab), lm_mode=cfg.next_word.lm_mode, bptt=cfg.next_word.bptt)
    if not objective.reports_perplexity:
        raise ModelError(f"model '{config.model}' is not a language model; perplexity does not apply")
    objective.check_model(model)
    rows = batching.read_corpus(text, model.vocab)
    loss_module = LossModule(model, objective)
    budget = batch_tokens or cfg.batches.batch_tokens
    dev = model.device  # where load_model put it (``auto`` resolved)
    if isinstance(objective, StreamLM):
        stream = batching.TokenStream(rows, len(model.vocab), max(1, budget // cfg.next_word.bptt), cfg.next_word.bptt)
        with tqdm(total=stream.n_chunks, unit="chunk", file=sys.stderr, disable=None if progress else True,
                  leave=False) as bar:
            nll, count = stream_loss(loss_module, stream, device=dev, progress=bar.update)
        kind = "lm-continuous"
    else:
        masks = fixed_masks(rows, cfg.masked_lm.mask_rate, cfg.selection.dev_mask_seed) \
            if objective.name == "mlm" else None
        batches = batching.eval_order([len(r) for r in rows], budget)
        with tqdm(total=len(rows), unit="sent", file=sys.stderr, disable=None if progress else True,
                  leave=False) as bar:
            nll, count = sentence_loss(loss_module, batches,
                                       text_inputs(objective, rows, model.vocab.pad_index, masks),
                                       device=dev, progress=bar.update)
        kind = objective.name
    if not count:
        raise InputError(text, None, "nothing to predict")
    return Perplexity(config.model, kind, len(rows), int(count), nll / count)
