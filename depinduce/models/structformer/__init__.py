"""The StructFormer backend (registered as ``structformer``); see ``model.py`` for the network.

The paper's dependency decoder (argmax parents, the highest word as the root) is the shared ``argmax`` decoder,
which ``parse`` gives the root from the heights this backend returns; the authors' exact form, with every word
tied at the greatest height a root, is this backend's own ``structformer-argmax`` (``decoders.py``).
"""

from depinduce.models.structformer.config import StructFormerConfig
from depinduce.models.structformer.model import StructFormer

__all__ = ["StructFormer", "StructFormerConfig"]
