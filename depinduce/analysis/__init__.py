"""Analyses that need a model: which attention heads track dependencies (``analyze heads``) and which of a
backend's head channels parses best (``analyze channels``).

They live apart from :mod:`depinduce.metrics`, which scores parses and knows no model, so that ``metrics`` stays
below ``models`` and ``parsing`` in the import order.
"""
