"""PRPN backend (Parsing-Reading-Predict Network, Shen et al. 2018)."""

from depinduce.models.prpn.model import PRPN

__all__ = ["PRPN"]
