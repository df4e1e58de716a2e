"""One progress bar for the whole run, measured against what ends it: the time budget, else the token budget,
else the recipe's epochs — so its ETA is the run's, not the current epoch's ('epoch 3/100' under a 3-minute
budget said nothing about when the run ends)."""

from __future__ import annotations

import sys
import time

from tqdm import tqdm


class BudgetBar:
    """The bar; :meth:`advance` moves it to where the run stands after a step."""

    def __init__(self, *, started: float, budget_minutes: float | None, token_budget: int | None,
                 total_steps: int, step: int, tokens_seen: float, epochs: int, disable: bool) -> None:
        self.started, self.epochs = started, epochs
        interactive = sys.stderr.isatty()
        common = dict(file=sys.stderr, leave=False, dynamic_ncols=interactive, smoothing=0.0,
                      mininterval=0.5 if interactive else 30.0, disable=disable)
        if budget_minutes is not None:
            self.kind = "time"
            seconds = budget_minutes * 60.0
            self.bar = tqdm(total=round(seconds), initial=min(round(time.monotonic() - started), round(seconds)),
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| " + f"{budget_minutes:g}-minute budget, "
                                       "{remaining} left{postfix}", **common)
        elif token_budget is not None:
            self.kind = "tokens"
            self.bar = tqdm(total=token_budget, initial=min(int(tokens_seen), token_budget), unit="tok",
                            unit_scale=True, bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
                                                        "tokens of the budget, {remaining} left{postfix}", **common)
        else:
            self.kind = "steps"
            self.bar = tqdm(total=max(total_steps, step), initial=step, unit="step",
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| step {n_fmt}/{total_fmt}, "
                                       "{remaining} left{postfix}", **common)

    def advance(self, *, step: int, tokens_seen: float, epoch: int) -> None:
        """Move to the run's position (seconds elapsed, tokens read or steps taken) in the current epoch."""
        target = {"time": time.monotonic() - self.started, "tokens": tokens_seen, "steps": step}[self.kind]
        target = min(int(target), int(self.bar.total))
        self.bar.set_description_str(f"epoch {epoch}/{self.epochs}", refresh=False)
        if target > self.bar.n:
            self.bar.update(target - self.bar.n)

    @property
    def shown(self) -> bool:
        """Whether the bar is drawn (the first rank, not --quiet): its loss figure is worth a read of the device."""
        return not self.bar.disable

    def set_postfix(self, **values: str) -> None:
        self.bar.set_postfix(refresh=False, **values)

    def close(self) -> None:
        self.bar.close()
