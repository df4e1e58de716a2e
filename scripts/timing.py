"""Timing helper shared by the benchmark scripts (imported from their own folder, as ``cpu_info`` is)."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_time(run: Callable[[], object], repeats: int) -> float:
    """Seconds of the fastest of ``repeats`` runs (the least disturbed by other work on the machine)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best
