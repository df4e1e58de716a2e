"""UDGN's own (the authors') decoders by name and one-line description, without torch: the
``depinduce.decoders`` entry point that ``--help`` reads without loading the model; :mod:`.decoders` implements
them."""

from __future__ import annotations

DECODERS: dict[str, str] = {
    "udgn-tree": "the authors' tree decoder (the paper's DDA): Chu-Liu/Edmonds over log(p + 1e-9) between words, "
                 "every root scored 0, each word tried as the root (the first best wins)",
    "udgn-argmax": "the authors' argmax (the paper's argmax column): each word's most probable other word; never "
                   "ROOT except one-word sentences",
}
