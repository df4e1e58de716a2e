"""One-line validation of a backend's hyperparameter dataclass, shared by every backend's ``config.py``.

Recipes are YAML written by hand, so a wrong type or range must name the model and the key rather than fail
later inside torch."""

from __future__ import annotations

from typing import Any

from depinduce.errors import RecipeError


class ConfigChecks:
    """Checks on the fields of ``config``; every failure is ``RecipeError('<model>: <problem>')``."""

    def __init__(self, model: str, config: Any) -> None:
        self.model = model
        self.config = config

    def need(self, ok: bool, problem: str) -> None:
        if not ok:
            raise RecipeError(f"{self.model}: {problem}")

    def positive_ints(self, *names: str) -> None:
        for name in names:
            value = getattr(self.config, name)
            self.need(isinstance(value, int) and not isinstance(value, bool) and value >= 1,
                      f"{name} must be a positive integer, not {value!r}")

    def probabilities(self, *names: str) -> None:
        """Dropout rates: numbers in [0, 1)."""
        for name in names:
            value = getattr(self.config, name)
            self.need(isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= value < 1.0,
                      f"{name} must be in [0, 1), not {value!r}")

    def booleans(self, *names: str) -> None:
        for name in names:
            value = getattr(self.config, name)
            self.need(isinstance(value, bool), f"{name} must be true or false, not {value!r}")

    def recompute_switches(self, *names: str) -> None:
        """Recomputation switches: true, false or auto (see models/layers/memory.py)."""
        for name in names:
            value = getattr(self.config, name)
            self.need(isinstance(value, bool) or value == "auto", f"{name} must be true, false or auto, not {value!r}")

    def choices(self, name: str, allowed: tuple[str, ...]) -> None:
        value = getattr(self.config, name)
        self.need(value in allowed, f"{name} must be one of {', '.join(allowed)}, not {value!r}")
