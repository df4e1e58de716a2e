"""RNGTr / SynTr: a supervised graph-to-graph transformer that parses and iteratively refines any parse."""

from depinduce.models.rngtr.backend import RNGTr

__all__ = ["RNGTr"]
