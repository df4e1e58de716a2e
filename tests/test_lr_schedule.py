"""The ``linear`` learning-rate schedule over a token budget: the rate follows the share of the budget read, so a
run with ``max_tokens`` ends with its rate at ``min_lr`` whatever its steps per epoch, and a resumed run picks the
rate up from its optimiser's state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from depinduce.training.config import TrainConfig
from depinduce.training.engine import TrainOptions, train
from depinduce.training.optim import Schedule, build_optimizer
from training_support import make_data, one_thread, tiny_plugin  # noqa: F401


def _optimiser(config: TrainConfig) -> torch.optim.Optimizer:
    model, parser = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
    return build_optimizer(model.parameters(), config, parser.parameters())


def test_linear_over_tokens_follows_the_share_of_the_budget_read() -> None:
    config = TrainConfig(schedule="linear", lr=2e-3, parser_lr=6e-4, min_lr=2e-4)
    optimiser = _optimiser(config)
    schedule = Schedule(optimiser, config, total_steps=10_000, token_budget=1000)
    assert [g["lr"] for g in optimiser.param_groups] == [2e-3, 6e-4]
    for seen, share in ((250, 0.75), (500, 0.5), (1000, 0.0), (1200, 0.0)):
        schedule.after_step()  # steps do not move a token schedule
        schedule.after_tokens(seen)
        factor = 0.1 + 0.9 * share  # min_lr / lr = 0.1: both groups scaled alike, to min_lr's share at the end
        assert optimiser.param_groups[0]["lr"] == pytest.approx(2e-3 * factor, rel=1e-12)
        assert optimiser.param_groups[1]["lr"] == pytest.approx(6e-4 * factor, rel=1e-12)


def test_linear_over_tokens_warms_up_first_and_other_schedules_ignore_tokens() -> None:
    config = TrainConfig(schedule="linear", lr=1e-3, warmup_steps=4)
    optimiser = _optimiser(config)
    schedule = Schedule(optimiser, config, total_steps=100, token_budget=1000)
    assert optimiser.param_groups[0]["lr"] == pytest.approx(0.25e-3)
    schedule.after_step()
    schedule.after_tokens(100)  # still warming up: the warm-up owns the rate
    assert optimiser.param_groups[0]["lr"] == pytest.approx(0.5e-3)
    for _ in range(3):
        schedule.after_step()
    schedule.after_tokens(400)
    assert optimiser.param_groups[0]["lr"] == pytest.approx(0.6e-3)

    for kind in ("plateau", "constant"):
        config = TrainConfig(schedule=kind, lr=1e-3)
        optimiser = _optimiser(config)
        schedule = Schedule(optimiser, config, total_steps=100, token_budget=1000)
        schedule.after_tokens(900)
        assert optimiser.param_groups[0]["lr"] == 1e-3, kind


def test_a_run_with_a_token_budget_ends_its_linear_schedule_at_the_budget(tmp_path: Path, tiny_plugin: Path,
                                                                          one_thread) -> None:
    """Every logged rate is the base rate times the share of the budget left after that step's tokens, and the
    last step's rate is near zero although the run's epochs would have allowed twenty times more steps."""
    data = make_data(tmp_path / "data", n_train=200, n_dev=20, gold_dev=False)
    run = tmp_path / "run"
    budget = 4000
    train(TrainOptions(data_dir=data, run_dir=run, model="tiny-mlm", threads=1, seed=3, quiet=True,
                       max_tokens=budget,
                       overrides=("epochs=20", "batch_tokens=120", "lr=5e-3", "schedule=linear", "log_every=1",
                                  "dev_parse=false")), log=lambda _: None)
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    logged = [r for r in records if "dev_loss" not in r and "lr" in r]
    assert len(logged) > 20
    for record in logged:
        assert record["lr"] == pytest.approx(5e-3 * max(0.0, 1 - record["tokens_seen"] / budget), abs=1e-12)
    assert logged[-1]["tokens_seen"] >= budget and logged[-1]["lr"] == 0.0
