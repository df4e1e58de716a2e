"""The Probabilistic Transformer backend (registered as ``probformer``); see ``model.py`` for the network, the
parsing views (channel average, one channel) and the ROOT score, ``inference.py`` for mean-field inference."""

from depinduce.models.probformer.config import ProbFormerConfig
from depinduce.models.probformer.model import ProbFormer

__all__ = ["ProbFormer", "ProbFormerConfig"]
