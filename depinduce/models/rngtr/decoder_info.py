"""RNGTr's own (the authors') decoder by name and one-line description, without torch: the
``depinduce.decoders`` entry point that ``--help`` reads without loading the model; :mod:`.decoders` implements
it."""

from __future__ import annotations

DECODERS: dict[str, str] = {
    "rngtr-mst": "the authors' final decoder: the single-rooted tree with the largest sum of arc probabilities "
                 "(Chu-Liu/Edmonds with Dozat's root rule), where mst maximises the sum of log-probabilities",
}
