"""The DMV's own decoder by name and one-line description, without torch: the ``depinduce.decoders`` entry
point that ``--help`` reads without loading the model; :mod:`.model` implements it."""

from __future__ import annotations

DECODERS: dict[str, str] = {
    "dmv-viterbi": "the DMV's most probable projective tree (Viterbi; Klein & Manning's parses)",
}
