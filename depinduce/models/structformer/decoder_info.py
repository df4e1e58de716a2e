"""StructFormer's own decoders by name and one-line description, without torch: the ``depinduce.decoders``
entry point that ``--help`` reads without loading the model; :mod:`.decoders` implements them."""

from __future__ import annotations

DECODERS: dict[str, str] = {
    "structformer-argmax": "the authors' decoder: every word at the greatest height is a root (several at a tie), "
                           "every other word takes its most probable parent; not always a tree",
}
