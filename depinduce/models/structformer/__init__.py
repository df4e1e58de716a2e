"""The StructFormer backend (registered as ``structformer``); see ``model.py`` for the network."""

from depinduce.models.structformer.config import StructFormerConfig
from depinduce.models.structformer.decode import paper_dependency_heads
from depinduce.models.structformer.model import StructFormer

__all__ = ["StructFormer", "StructFormerConfig", "paper_dependency_heads"]
