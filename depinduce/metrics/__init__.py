"""Scoring parses: dependency (DDA/UDA/LAS) and constituency (UF1) metrics under one stated protocol.

``evaluate`` aligns gold and predicted sentences and returns an ``EvalResult``; ``render_table`` prints it for
people, ``EvalResult.to_json()`` for programs.  The protocol text lives in :mod:`depinduce.metrics.protocol`.
"""

from depinduce.metrics.evaluate import EvalResult, Scores, evaluate
from depinduce.metrics.report import render_table, result_renderable

__all__ = ["EvalResult", "Scores", "evaluate", "render_table", "result_renderable"]
