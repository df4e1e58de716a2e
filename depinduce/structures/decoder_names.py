"""The shared decoders' names, apart from their implementations (:mod:`depinduce.structures.decode`, which
imports torch and numpy), so that ``--help`` lists them without importing either."""

from __future__ import annotations

DECODERS = ("mst", "eisner", "argmax")
