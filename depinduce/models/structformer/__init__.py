"""The StructFormer backend (registered as ``structformer``); see ``model.py`` for the network.

The paper's dependency decoder (argmax parents, the highest word as the root) is the shared ``argmax`` decoder,
which ``parse`` gives the root from the heights this backend returns; the authors' exact form, with every word
tied at the greatest height a root, is this backend's own ``structformer-argmax`` (``decoders.py``).

The names below are imported on first use, so that ``decoder_info`` (read by ``--help``) does not load torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from depinduce.models.lazy import forward_attributes

if TYPE_CHECKING:
    from depinduce.models.structformer.config import StructFormerConfig
    from depinduce.models.structformer.model import StructFormer

__all__ = ["StructFormer", "StructFormerConfig"]
__getattr__ = forward_attributes(__name__, {"StructFormer": ".model", "StructFormerConfig": ".config"})
