"""RNGTr / SynTr: a supervised graph-to-graph transformer that parses and iteratively refines any parse.

``RNGTr`` is imported on first use, so that ``decoder_info`` (read by ``--help``) does not load torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from depinduce.models.lazy import forward_attributes

if TYPE_CHECKING:
    from depinduce.models.rngtr.backend import RNGTr

__all__ = ["RNGTr"]
__getattr__ = forward_attributes(__name__, {"RNGTr": ".backend"})
