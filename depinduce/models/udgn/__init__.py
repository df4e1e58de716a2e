"""The UDGN backend (registered as ``udgn``); see ``model.py`` for the network and its root scoring.

The names below are imported on first use, so that ``decoder_info`` (read by ``--help``) does not load torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from depinduce.models.lazy import forward_attributes

if TYPE_CHECKING:
    from depinduce.models.udgn.config import UDGNConfig
    from depinduce.models.udgn.model import UDGN

__all__ = ["UDGN", "UDGNConfig"]
__getattr__ = forward_attributes(__name__, {"UDGN": ".model", "UDGNConfig": ".config"})
