"""The Probabilistic Transformer backend (registered as ``probformer``); see ``model.py`` for the network, the
parsing views (channel average, one channel) and the ROOT score, ``inference.py`` for mean-field inference.

The names below are imported on first use, so that ``decoder_info`` (read by ``--help``) does not load torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from depinduce.models.lazy import forward_attributes

if TYPE_CHECKING:
    from depinduce.models.probformer.config import ProbFormerConfig
    from depinduce.models.probformer.model import ProbFormer

__all__ = ["ProbFormer", "ProbFormerConfig"]
__getattr__ = forward_attributes(__name__, {"ProbFormer": ".model", "ProbFormerConfig": ".config"})
