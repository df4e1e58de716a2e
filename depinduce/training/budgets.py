"""A run's budgets: ``--max-time`` (minutes per invocation) and ``--max-tokens`` (training tokens over the whole
run), checked by one function where the options enter (:func:`depinduce.api.train`, which ``depinduce train``
calls), and the share of a time budget kept back for the final evaluation.

Torch-free: the CLI reads these before it decides to train.
"""

from __future__ import annotations

from dataclasses import dataclass

from depinduce.errors import UsageError

# The most of a time budget kept back for the final evaluation and checkpoint.  A budget is bought for training:
# when the evaluation alone costs more than this share (a 1-minute budget, a 40-second evaluation on a busy
# machine), keeping all of it back would leave a few steps — or one — so the run trains for at least the rest
# and ends late by the excess instead (the log says so).  Three quarters of any budget go to setup and training.
RESERVE_SHARE = 0.25

_SCALE = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}


@dataclass(frozen=True)
class Budgets:
    """Checked budgets (None: not given, so the recipe's or none)."""

    max_time: float | None = None  # minutes, per invocation
    max_tokens: int | None = None  # training tokens over the whole run, resumes included


def checked_budgets(max_time: float | None, max_tokens: int | str | None) -> Budgets:
    """The one check of the budgets a caller gives: a positive number of minutes, a positive token count (an
    integer or a number with a k/M/G suffix); a :class:`UsageError` naming the option otherwise."""
    if max_time is not None and not max_time > 0:
        raise UsageError("--max-time must be a positive number of minutes")
    return Budgets(max_time, parse_token_count(max_tokens))


def parse_token_count(value: int | str | None) -> int | None:
    """``--max-tokens``: an integer, or a number with a k/M/G suffix (``2.5M`` = 2,500,000)."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        if isinstance(value, int) and value < 1:
            raise UsageError(f"--max-tokens {value}: give a positive number of training tokens")
        return value
    text = str(value).strip().replace(",", "").replace("_", "")
    suffix = text[-1:].lower() if text[-1:].isalpha() else ""
    try:
        number = float(text[: len(text) - len(suffix)]) * _SCALE[suffix]
    except (ValueError, KeyError):
        number = float("nan")
    if not (number >= 1 and number == number and number != float("inf")):
        raise UsageError(f"--max-tokens {value!r}: give a positive number of training tokens (2500000, 2.5M, 500k)")
    return int(round(number))


def capped_reserve(reserve: float, started: float, deadline: float | None) -> float:
    """``reserve`` seconds, but never more than RESERVE_SHARE of the budget that runs from ``started`` to
    ``deadline`` (monotonic clock)."""
    return reserve if deadline is None else min(reserve, RESERVE_SHARE * (deadline - started))


def fmt_tokens(tokens: float) -> str:
    """A token count as people read budgets: 2.50M, 480k, 900."""
    if tokens >= 1e6:
        return f"{tokens / 1e6:.2f}M"
    return f"{tokens / 1e3:.0f}k" if tokens >= 1e4 else f"{tokens:.0f}"


def fmt_minutes(minutes: float | None) -> str:
    """A time budget for the log: ``30 minutes``, or what no budget means."""
    if minutes is None:
        return "none (until the recipe's epochs end)"
    return f"{minutes:g} minute{'' if minutes == 1 else 's'}"
