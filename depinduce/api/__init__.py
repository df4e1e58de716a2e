"""The Python API: the same ``parse``, ``eval``, ``train`` and the other commands as the command line, for notebooks
and scripts (``report`` is :func:`depinduce.api.reporting.command.report_runs`, in its own subpackage).  The command line itself
reaches the library only through this package (``tests/test_layering.py`` checks it); the names its options offer
are in :mod:`depinduce.api.choices`.

Each function here is the one implementation its command uses (or shares every step with), so a number from a
notebook is the number the CLI prints.  Errors are :class:`~depinduce.errors.DepinduceError` with the CLI's
one-line message, never ``SystemExit``; every exported function checks its arguments against its annotations
(:func:`~depinduce.api.words.python_words`); nothing is written to stdout (progress, when asked for, goes to stderr).

Submodules are imported on first use: ``evaluate`` never imports torch.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

_EXPORTS: dict[str, str] = {
    "load": "depinduce.api.parser",
    "Parser": "depinduce.api.parser",
    "ParsedSentence": "depinduce.api.parser",
    "write": "depinduce.api.parser",
    "evaluate": "depinduce.api.scoring",
    "Evaluation": "depinduce.api.scoring",
    "train": "depinduce.api.training",
    "convert": "depinduce.api.conversion",
    "list_runs": "depinduce.api.runs",
    "Predictions": "depinduce.api.results",
    "Token": "depinduce.api.results",
    "list_models": "depinduce.api.catalog",
    "model_catalog": "depinduce.api.catalog",
    "ModelCatalog": "depinduce.api.catalog",
    "preprocess": "depinduce.api.commands",
    "PreprocessOptions": "depinduce.data.preprocess",
    "Normalization": "depinduce.data.normalize",
    "perplexity": "depinduce.api.commands",
    "show": "depinduce.api.drawing",
    "show_text": "depinduce.api.drawing",
    "analyze_heads": "depinduce.api.analysis",
    "analyze_channels": "depinduce.api.analysis",
    "HeadAnalysis": "depinduce.api.analysis",
    "ChannelAnalysis": "depinduce.api.analysis",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    if inspect.isfunction(value):  # every exported function is the API's boundary, whatever its module says
        from depinduce.api.words import python_words

        value = python_words(value)
    globals()[name] = value
    return value
