"""Compound PCFG backend (Kim, Dyer & Rush 2019); ``compound: false`` gives the paper's neural PCFG.

The grammar's inside algorithm, marginals and trees: :mod:`.chart`; the networks and the loss: :mod:`.model`.
"""

from depinduce.models.cpcfg.model import CPCFG

__all__ = ["CPCFG"]
