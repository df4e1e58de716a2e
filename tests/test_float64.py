"""A float64 model computes in float64 end to end: no silent float32 cast inside it.

Why: the fidelity check against the authors' code (``scripts/check_authors.py``) compares the two networks to
round-off in float64; one float32 step inside depinduce's network caps the agreement at ~1e-7 and hides real
differences below it.  Every backend is built small in float64 and its training objective (forward and
backward) and its parse scoring run under a dispatch mode that sees every tensor operation, inside fused kernels
and custom autograd functions too; every floating-point result must be float64.  Random draws (dropout masks'
uniform numbers, compared against the rate, never read as values) are the only exception."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from depinduce.data.tags import TagVocab
from depinduce.data.vocab import Vocab
from depinduce.training.objectives import objective_for

F64 = torch.float64
VOCAB = Vocab([f"w{i}" for i in range(30)])
TAGS = TagVocab(["DET", "NOUN", "VERB"], ["det", "nsubj", "root"])
RANDOM_DRAWS = {"aten.uniform_", "aten.rand", "aten.bernoulli_", "aten.bernoulli", "aten.normal_", "aten.randn"}


class NarrowResults(TorchDispatchMode):
    """Records every operation whose floating-point result is not float64."""

    def __init__(self) -> None:
        super().__init__()
        self.found: set[str] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        name = str(func.overloadpacket)
        if name not in RANDOM_DRAWS:
            for value in tree_flatten(out)[0]:
                if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != F64:
                    self.found.add(f"{name} → {value.dtype}")
        return out


def _structformer() -> Any:
    from depinduce.models.structformer import StructFormer, StructFormerConfig

    return StructFormer(StructFormerConfig(hidden_size=12, n_layers=2, n_heads=3, ff_size=24, n_parser_layers=2,
                                           conv_size=3, dropout=0.1, dropatt=0.1), VOCAB)


def _udgn() -> Any:
    from depinduce.models.udgn import UDGN, UDGNConfig

    return UDGN(UDGNConfig(hidden_size=12, n_layers=2, n_heads=3, head_size=4, parser_layers=2,
                           parser_hidden_size=12, dropout=0.1, dropatt=0.1, graph_floor=1e-6), VOCAB)


def _probformer() -> Any:
    from depinduce.models.probformer import ProbFormer, ProbFormerConfig

    return ProbFormer(ProbFormerConfig(d=10, n_channels=2, n_iter=2, rank=3, distance_threshold=2, dropout=0.1),
                      VOCAB)


def _prpn() -> Any:
    from depinduce.models.prpn import PRPN
    from depinduce.models.prpn.config import PRPNConfig

    return PRPN(PRPNConfig(emb_size=12, hidden_size=16, n_layers=2, n_slots=4, lookback=2), VOCAB)


def _rngtr() -> Any:
    from depinduce.models.rngtr.backend import RNGTr
    from depinduce.models.rngtr.config import RNGTrConfig

    return RNGTr(RNGTrConfig(hidden_size=16, n_layers=2, n_heads=2, ff_size=32, arc_mlp_size=12, label_mlp_size=6,
                             iterations=1), VOCAB, TAGS)


def _cpcfg() -> Any:
    from depinduce.models.cpcfg.config import CPCFGConfig
    from depinduce.models.cpcfg.model import CPCFG

    return CPCFG(CPCFGConfig(nt=4, t=6, state_dim=8, z_dim=3, word_dim=6, lstm_dim=5), VOCAB)


BACKENDS: dict[str, Callable[[], Any]] = {
    "structformer": _structformer, "udgn": _udgn, "probformer": _probformer, "prpn": _prpn, "rngtr": _rngtr,
    "cpcfg": _cpcfg,
}


def _batch() -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """Two sentences (5 and 3 words) and, for the supervised objective, gold heads, labels and UPOS."""
    tokens = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, 0, 0]])
    mask = tokens != 0
    gold = {"heads": torch.tensor([[2, 0, 2, 3, 3], [0, 1, 1, 0, 0]]),
            "labels": torch.tensor([[0, 2, 1, 0, 0], [2, 0, 1, 0, 0]]),
            "upos": torch.tensor([[0, 1, 2, 1, 0], [2, 1, 0, 0, 0]])}
    return tokens, mask, gold


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_a_float64_model_computes_every_step_in_float64(name: str) -> None:
    torch.manual_seed(0)
    model = BACKENDS[name]().double()
    model.train()
    tokens, mask, gold = _batch()
    objective = objective_for(model.capabilities.objective, mask_rate=0.5, vocab_size=len(VOCAB))
    extra = gold if model.capabilities.supervised else {}
    inputs = objective.prepare(tokens, mask, generator=torch.Generator().manual_seed(0), **extra)
    recorder = NarrowResults()
    with recorder:
        loss = objective.compute(model, **inputs).loss
        loss.backward()
        model.eval()
        scores = model.score_tensors(tokens, mask, **({"upos": gold["upos"]} if name == "rngtr" else {}))
    assert loss.dtype == F64
    assert not recorder.found, f"{name}: float32 inside a float64 model: {sorted(recorder.found)}"
    for s in scores:
        for field in ("heads", "distances", "heights"):
            value = getattr(s, field, None)
            assert value is None or value.dtype == F64, f"{name}: score {field} is {value.dtype}"
