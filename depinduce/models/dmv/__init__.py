"""The Dependency Model with Valence (Klein & Manning 2004), trained by EM.

The model and its statistics: :mod:`.model` and :mod:`.chart`; its EM training: :mod:`depinduce.training.em`.
``DMV`` is imported on first use, so that ``decoder_info`` (read by ``--help``) does not load torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from depinduce.models.lazy import forward_attributes

if TYPE_CHECKING:
    from depinduce.models.dmv.model import DMV

__all__ = ["DMV"]
__getattr__ = forward_attributes(__name__, {"DMV": ".model"})
