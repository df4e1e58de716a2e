"""depinduce: induce syntax from raw text, parse into standard formats, and score parses.

The Python API (``depinduce.load``, ``depinduce.evaluate``, ``depinduce.train``) is imported on first use, so
``import depinduce`` stays cheap (no torch) for the command line and for scripts that only score.
"""

from __future__ import annotations

from typing import Any

from depinduce.version import __version__

_API = ("load", "evaluate", "train", "Parser", "ParsedSentence", "Evaluation", "write", "convert", "list_runs",
        "Predictions", "Token", "list_models", "model_catalog", "ModelCatalog", "preprocess", "PreprocessOptions",
        "Normalization", "perplexity", "show", "show_text", "analyze_heads", "analyze_channels", "HeadAnalysis",
        "ChannelAnalysis")
# ``depinduce.report_runs`` is ``depinduce report`` (the API's reporting package)
_REPORT = ("report_runs",)
_ERRORS = ("DepinduceError", "InputError", "UsageError", "RecipeError", "NotFoundError", "ModelError",
           "RunDirectoryError", "ResourceError")

__all__ = ["__version__", *_API, *_REPORT, *_ERRORS]


def __getattr__(name: str) -> Any:
    if name in _API:
        from depinduce import api

        return getattr(api, name)
    if name in _REPORT:
        from depinduce.api.reporting import command

        return getattr(command, name)
    if name in _ERRORS:
        from depinduce import errors

        return getattr(errors, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
