"""The Dependency Model with Valence (Klein & Manning 2004), trained by EM.

The model and its statistics: :mod:`.model` and :mod:`.chart`; its EM training: :mod:`depinduce.training.em`.
"""

from depinduce.models.dmv.model import DMV

__all__ = ["DMV"]
