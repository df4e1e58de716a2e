"""The one way depinduce takes over Ctrl-C and SIGTERM for a stretch of work (a training run, seeds run side by
side) and gives them back afterwards."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def stop_signals_handled(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """SIGINT and SIGTERM go to ``handler`` inside the block and back to their previous handlers after it.
    Outside the main thread, where Python installs no handlers, the default behaviour stays."""
    previous: dict[int, Any] = {}
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
    except ValueError:
        pass
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
