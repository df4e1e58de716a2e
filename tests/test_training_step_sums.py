"""The gradient loop reads its steps' losses in batches (training/step.py ``PendingSums``): the same sums as a read
per step, and a loss gone infinite or NaN still stops the run in one line naming its step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from depinduce.errors import RecipeError
from depinduce.training import distributed
from depinduce.training.engine import TrainOptions, train
from depinduce.training.step import OptimiserStep, PendingSums
from training_support import make_data, one_thread, tiny_plugin  # noqa: F401 (fixtures)

SINGLE = distributed.DistContext()


def _numbers(loss: float, nll: float, count: int) -> torch.Tensor:
    return torch.stack([torch.tensor(loss), torch.tensor(nll), torch.tensor(count).double()]).double()


def test_the_sums_are_the_per_step_reads_added_in_order() -> None:
    generator = torch.Generator().manual_seed(0)
    steps = [[(float(v), float(v) * 7.3, 11 + k) for v in torch.rand(1 + k % 3, generator=generator)]
             for k in range(9)]  # one or several updates per step (RNGTr's per-pass updates)
    sums = PendingSums()
    for step, updates in enumerate(steps, start=1):
        sums.add(step, [_numbers(torch.tensor(nll / 7.3, dtype=torch.float32).item(),
                                 torch.tensor(nll, dtype=torch.float32).item(), count)
                        for _, nll, count in updates])
    read = sums.read()
    assert [r.step for r in read] == list(range(1, 10)) and sums.read() == []
    for numbers, updates in zip(read, steps):
        nll = count = 0.0
        for _, update_nll, update_count in updates:  # what float() of each update, added at once, gave
            nll, count = nll + float(torch.tensor(update_nll, dtype=torch.float32)), count + float(update_count)
        assert (numbers.nll, numbers.count) == (nll, count)
    sums.check(SINGLE, 9)  # nothing diverged


def test_a_loss_that_is_not_finite_names_its_step_when_read() -> None:
    sums = PendingSums()
    for step, loss in ((4, 2.5), (5, float("inf")), (6, float("nan"))):
        sums.add(step, [_numbers(loss, 1.0, 3)])
    sums.read()
    with pytest.raises(RecipeError, match=r"^training diverged at step 5: the loss is inf; lower train.lr or set "
                                          r"train.clip$"):
        sums.check(SINGLE, 6)


def test_a_run_whose_loss_diverges_stops_in_one_line(tmp_path: Path, tiny_plugin: Path, one_thread,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    data = make_data(tmp_path / "data", n_train=60, n_dev=6, gold_dev=False)
    step = OptimiserStep.__call__
    calls = []

    def nan_at_the_third(self, inputs):  # the third step's loss is NaN, as a diverged run's would be
        numbers = step(self, inputs)
        calls.append(1)
        return [n.clone().fill_(float("nan")) for n in numbers] if len(calls) == 3 else numbers

    monkeypatch.setattr(OptimiserStep, "__call__", nan_at_the_third)
    with pytest.raises(RecipeError, match=r"^training diverged at step 3: the loss is nan; "):
        train(TrainOptions(data_dir=data, run_dir=tmp_path / "run", model="tiny-mlm", quiet=True, seed=1,
                           overrides=("log_every=4", "batch_tokens=60", "epochs=1", "dev_parse=false")),
              log=lambda _: None)
    assert len(calls) == 4  # read at the log_every step after it, not at every step
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()] \
        if (tmp_path / "run" / "metrics.jsonl").exists() else []
    assert not records and not (tmp_path / "run" / "last.pt").exists()
