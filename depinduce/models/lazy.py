"""Backend packages that name their classes without importing them.

A backend package's light metadata (its own decoders' names and descriptions, which ``--help`` reads through the
``depinduce.decoders`` entry points) sits beside the model, and importing it runs the package's ``__init__``:
that must not import the model, and torch with it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def forward_attributes(package: str, homes: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) for ``package``: each name in ``homes`` is imported on first use from
    its module there (relative to ``package``), as ``from package import Name`` and entry points expect."""

    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(homes[name], package), name)

    return __getattr__
