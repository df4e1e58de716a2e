"""Which dropout masks a forward pass draws, in order: the tests that pin where each backend applies dropout
(beside scripts/check_authors.py, which compares the masks themselves with the authors')."""

from __future__ import annotations

import sys
from collections.abc import Callable

from depinduce.models.layers import dropout as own


def drawn_dropout_masks(run: Callable[[], object]) -> list[tuple[int, ...]]:
    """The shape of every dropout mask ``run()`` draws, in order (a mask drawn at selected rows counts as the
    whole (B, T, C) mask it is taken from): where each dropout applies, on every path (fused cores included)."""
    shapes: list[tuple[int, ...]] = []
    original = own.drop_mask
    inside: list[bool] = []  # drop_mask at selected rows draws the whole mask through itself: count it once

    def recording(shape, p, seed, rows=None):  # type: ignore[no-untyped-def]
        if not inside:
            shapes.append(tuple(shape) if rows is None else (*rows.shape, shape[-1]))
        inside.append(True)
        try:
            return original(shape, p, seed, rows)
        finally:
            inside.pop()

    modules = [m for m in list(sys.modules.values())
               if getattr(m, "__name__", "").startswith("depinduce") and getattr(m, "drop_mask", None) is original]
    for module in modules:
        module.drop_mask = recording
    try:
        run()
    finally:
        for module in modules:
            module.drop_mask = original
    return shapes
