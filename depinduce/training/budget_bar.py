"""One progress bar for the whole run, measured against what ends it: the time budget, else the token budget,
else the recipe's epochs — so its ETA is the run's, not the current epoch's ('epoch 3/100' under a 3-minute
budget said nothing about when the run ends).

On a terminal it is a bar redrawn in place.  Where stderr is no terminal (a pipe, a file, a ``--jobs`` seed's
process) a redrawn bar leaves carriage returns and half-drawn bars in the text, so the same figures come as plain
complete lines instead (:class:`ProgressLine`): one every :data:`PLAIN_SECONDS` seconds (the environment's
``DEPINDUCE_PROGRESS_EVERY``, if set) and at each tenth of the way, which ``--jobs`` reads back to show its seeds.
"""

from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass

from tqdm import tqdm

from depinduce.training.budgets import fmt_tokens

PROGRESS_EVERY = "DEPINDUCE_PROGRESS_EVERY"  # seconds between plain progress lines
PLAIN_SECONDS = 30.0
PLAIN_STEPS = 10  # and a line at each tenth of the way


def on_terminal() -> bool:
    """Whether stderr is a terminal, where a bar can be redrawn in place."""
    return sys.stderr.isatty()


def plain_seconds() -> float:
    """Seconds between plain progress lines: ``DEPINDUCE_PROGRESS_EVERY``, else :data:`PLAIN_SECONDS`."""
    try:
        return max(0.0, float(os.environ.get(PROGRESS_EVERY, PLAIN_SECONDS)))
    except ValueError:
        return PLAIN_SECONDS


_LINE = re.compile(r"progress: epoch (?P<epoch>\d+/\d+) \| (?P<percent>\d+)% \| (?P<done>[^|]+) \| "
                   r"(?P<left>\S+) left(?: \| loss (?P<loss>\S+) \| lr (?P<lr>\S+) \| (?P<speed>[\d,.]+) tok/s \| "
                   r"(?P<seen>\S+) tokens seen)?")


@dataclass(frozen=True)
class ProgressLine:
    """The bar's figures as one complete line: written where stderr is no terminal, and read back (:meth:`parse`,
    the one reader) by ``train --jobs``, whose seeds write theirs to a pipe.

    ``progress: epoch 1/3 | 25% | step 6/24 | 00:03 left | loss 8.383 | lr 3.00e-04 | 676 tok/s | 146 tokens seen``
    """

    epoch: str  # "1/3"
    percent: int
    done: str  # "step 6/24", "146/2400 tokens of the budget", "00:40 of the 3-minute budget"
    left: str  # "00:03", "?" before there is a pace
    loss: str | None = None  # the figures below come after the first steps
    lr: str | None = None
    speed: str | None = None  # training tokens per second, "1,234"
    seen: str | None = None  # training tokens read so far, "2.50M"

    def text(self) -> str:
        parts = [f"progress: epoch {self.epoch}", f"{self.percent}%", self.done, f"{self.left} left"]
        if None not in (self.loss, self.lr, self.speed, self.seen):
            parts += [f"loss {self.loss}", f"lr {self.lr}", f"{self.speed} tok/s", f"{self.seen} tokens seen"]
        return " | ".join(parts)

    @classmethod
    def parse(cls, line: str) -> ProgressLine | None:
        """The line's figures, or None when ``line`` is no progress line."""
        found = _LINE.fullmatch(line.strip())
        if found is None:
            return None
        values = found.groupdict()
        return cls(epoch=values["epoch"], percent=int(values["percent"]), done=values["done"],
                   left=values["left"], loss=values["loss"], lr=values["lr"], speed=values["speed"],
                   seen=values["seen"])

    @property
    def tokens_per_second(self) -> float:
        return float(self.speed.replace(",", "")) if self.speed else 0.0


class BudgetBar:
    """The bar; :meth:`advance` moves it to where the run stands after a step."""

    def __init__(self, *, started: float, budget_minutes: float | None, token_budget: int | None,
                 total_steps: int, step: int, tokens_seen: float, epochs: int, disable: bool) -> None:
        self.started, self.epochs, self.epoch = started, epochs, 1
        self.disable = disable
        self.values: dict[str, str] = {}
        if budget_minutes is not None:
            self.kind, self.total = "time", round(budget_minutes * 60.0)
            self.n = min(round(time.monotonic() - started), self.total)
            self.budget_words = f"{budget_minutes:g}-minute budget"
        elif token_budget is not None:
            self.kind, self.total, self.n = "tokens", token_budget, min(int(tokens_seen), token_budget)
        else:
            self.kind, self.total = "steps", max(total_steps, step)
            self.n = step
        self.bar: tqdm | None = None
        if not disable and on_terminal():
            self.bar = self._terminal_bar()
        # the plain lines' pace and schedule: from this invocation's start, as the bar's
        self.first_n, self.first_time = self.n, time.monotonic()
        self.last_line = self.first_time
        self.every = plain_seconds()
        self.tenth = self._tenth()

    def _terminal_bar(self) -> tqdm:
        common = dict(file=sys.stderr, leave=False, dynamic_ncols=True, smoothing=0.0, mininterval=0.5)
        if self.kind == "time":
            return tqdm(total=self.total, initial=self.n, bar_format="{desc}: {percentage:3.0f}%|{bar}| "
                        + self.budget_words + ", {remaining} left{postfix}", **common)
        if self.kind == "tokens":
            return tqdm(total=self.total, initial=self.n, unit="tok", unit_scale=True,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} tokens of the budget, "
                                   "{remaining} left{postfix}", **common)
        return tqdm(total=self.total, initial=self.n, unit="step",
                    bar_format="{desc}: {percentage:3.0f}%|{bar}| step {n_fmt}/{total_fmt}, {remaining} left"
                               "{postfix}", **common)

    def _tenth(self) -> int:
        return self.n * PLAIN_STEPS // max(self.total, 1)

    def advance(self, *, step: int, tokens_seen: float, epoch: int) -> None:
        """Move to the run's position (seconds elapsed, tokens read or steps taken) in the current epoch."""
        target = {"time": time.monotonic() - self.started, "tokens": tokens_seen, "steps": step}[self.kind]
        target = min(int(target), int(self.total))
        self.epoch = epoch
        if self.bar is not None:
            self.bar.set_description_str(f"epoch {epoch}/{self.epochs}", refresh=False)
            if target > self.bar.n:
                self.bar.update(target - self.bar.n)
        self.n = max(self.n, target)
        if self.disable or self.bar is not None:
            return
        now, tenth = time.monotonic(), self._tenth()
        if now - self.last_line >= self.every or tenth > self.tenth:
            self.last_line, self.tenth = now, tenth
            print(self.line().text(), file=sys.stderr, flush=True)

    def line(self) -> ProgressLine:
        """Where the run stands, as a plain line."""
        now = time.monotonic()
        if self.kind == "time":
            left: float | None = max(self.total - (now - self.started), 0.0)
            done = f"{tqdm.format_interval(self.n)} of the {self.budget_words}"
        else:
            rate = (self.n - self.first_n) / (now - self.first_time) if now > self.first_time else 0.0
            left = (self.total - self.n) / rate if rate > 0 else None
            done = f"step {self.n}/{self.total}" if self.kind == "steps" else \
                f"{fmt_tokens(self.n)}/{fmt_tokens(self.total)} tokens of the budget"
        values = self.values
        return ProgressLine(epoch=f"{self.epoch}/{self.epochs}", percent=int(100 * self.n / max(self.total, 1)),
                            done=done, left="?" if left is None else tqdm.format_interval(left),
                            loss=values.get("loss"), lr=values.get("lr"), speed=values.get("tok_s"),
                            seen=values.get("seen"))

    @property
    def in_place(self) -> bool:
        """Whether the bar is redrawn in place on a terminal, showing the loss (so the ``log_every`` lines need not
        be on stderr too)."""
        return self.bar is not None

    @property
    def shown(self) -> bool:
        """Whether the bar is drawn (the first rank, not --quiet): its loss figure is worth a read of the device."""
        return not self.disable

    def set_postfix(self, **values: str) -> None:
        self.values.update(values)
        if self.bar is not None:
            self.bar.set_postfix(refresh=False, **values)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
