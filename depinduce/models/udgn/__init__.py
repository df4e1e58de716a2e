"""The UDGN backend (registered as ``udgn``); see ``model.py`` for the network and its root scoring."""

from depinduce.models.udgn.config import UDGNConfig
from depinduce.models.udgn.model import UDGN

__all__ = ["UDGN", "UDGNConfig"]
