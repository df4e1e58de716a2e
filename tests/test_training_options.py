"""Options that get structure sooner without changing the model (issue 24): a length curriculum, warm-up before
the plateau schedule, a learning rate of the parser's own, and learning-curve records that leave training as it
would be without them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from depinduce.errors import RecipeError
from depinduce.training import batching
from depinduce.training.config import TrainConfig
from depinduce.training.engine import TrainOptions, train
from depinduce.training.optim import Schedule, build_optimizer
from training_support import make_data, one_thread, tiny_plugin  # noqa: F401 (fixtures)


def _metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _quiet(_: str) -> None:
    pass


def _timeless(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in ("eval_s", "train_s", "wall_s", "tokens_per_s")}


# ------------------------------------------------------------------------------------------------ curriculum


def test_curriculum_cap_grows_per_epoch_up_to_max_length() -> None:
    assert [batching.curriculum_length(40, 10, 5, e) for e in range(8)] == [10, 15, 20, 25, 30, 35, 40, 40]
    assert [batching.curriculum_length(None, 30, 1, e) for e in (0, 1, 12)] == [30, 31, 42]
    assert batching.curriculum_length(40, None, 1, 3) == 40  # off
    assert batching.curriculum_length(12, 3, 0, 9) == 3  # step 0: a fixed cap


def test_curriculum_epochs_read_only_short_sentences_first(tmp_path: Path, tiny_plugin: Path, one_thread) -> None:
    data = make_data(tmp_path / "data", n_train=200, n_dev=10, gold_dev=False)
    lengths = [len(line.split()) for line in (data / "train.txt").read_text().splitlines()]
    messages: list[str] = []
    run = tmp_path / "run"
    train(TrainOptions(data_dir=data, run_dir=run, model="tiny-mlm",
                       overrides=("epochs=3", "batch_tokens=100", "curriculum_start=5", "curriculum_step=2")),
          log=messages.append)
    per_epoch = [r["train_tokens"] for r in _metrics(run)]
    assert per_epoch[0] == sum(n for n in lengths if n <= 5) < per_epoch[1] == sum(n for n in lengths if n <= 7)
    assert per_epoch[2] == sum(n for n in lengths if n <= 9)
    assert [r["epoch"] for r in _metrics(run)] == [1.0, 2.0, 3.0]
    assert any("epoch 1 trains on sentences of at most 5 words" in m for m in messages)


def test_curriculum_settings_are_checked(tmp_path: Path, tiny_plugin: Path) -> None:
    with pytest.raises(RecipeError, match="curriculum_start must be at least 1"):
        TrainConfig.from_values({"curriculum_start": 0}, "recipe")
    with pytest.raises(RecipeError, match="lm_mode continuous"):
        TrainConfig.from_values({"curriculum_start": 10, "lm_mode": "continuous"}, "recipe")
    data = make_data(tmp_path / "data", n_train=30, n_dev=5, gold_dev=False)
    with pytest.raises(RecipeError, match="no training sentence has at most curriculum_start=1 words"):
        train(TrainOptions(data_dir=data, run_dir=tmp_path / "run", model="tiny-mlm", quiet=True,
                           overrides=("curriculum_start=1",)), log=_quiet)


# ------------------------------------------------------------------------------------------ warm-up, plateau


def _optimizer(lr: float = 1e-2) -> torch.optim.Optimizer:
    return torch.optim.Adam([torch.nn.Parameter(torch.zeros(2))], lr=lr)


def test_plateau_warms_up_linearly_and_ignores_evaluations_until_then() -> None:
    optimizer = _optimizer()
    schedule = Schedule(optimizer, TrainConfig(lr=1e-2, schedule="plateau", warmup_steps=4, plateau_patience=0),
                        total_steps=100)
    rates = [schedule.lr]
    for _ in range(3):
        schedule.after_step()
        schedule.after_eval(5.0)  # a worsening loss during warm-up must not halve the rate
        rates.append(schedule.lr)
    assert rates == pytest.approx([2.5e-3, 5e-3, 7.5e-3, 1e-2])
    schedule.after_step()
    schedule.after_eval(1.0)
    schedule.after_eval(2.0)  # patience 0: halves at once now
    assert schedule.lr == pytest.approx(5e-3)
    for _ in range(3):
        schedule.after_step()
    assert schedule.lr == pytest.approx(5e-3)  # warm-up is over: steps no longer set the rate
    # the checkpointed schedule resumes where it was
    again = Schedule(_optimizer(), TrainConfig(lr=1e-2, schedule="plateau", warmup_steps=4, plateau_patience=0), 100)
    again.load_state_dict(schedule.state_dict())
    assert again.steps == schedule.steps == 7


def test_plateau_without_warmup_is_unchanged() -> None:
    optimizer = _optimizer()
    schedule = Schedule(optimizer, TrainConfig(lr=1e-2, schedule="plateau", plateau_patience=0), total_steps=10)
    schedule.after_step()
    assert schedule.lr == 1e-2
    schedule.after_eval(1.0)
    schedule.after_eval(2.0)
    assert schedule.lr == pytest.approx(5e-3)


# ------------------------------------------------------------------------------------------------- parser_lr


def test_parser_lr_puts_the_parser_in_its_own_group_scaled_by_the_schedule() -> None:
    body, parser = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    config = TrainConfig(lr=1e-3, parser_lr=4e-3, schedule="linear", warmup_steps=2)
    optimizer = build_optimizer(body.parameters(), config, parser.parameters())
    assert [g["lr"] for g in optimizer.param_groups] == [1e-3, 4e-3]
    schedule = Schedule(optimizer, config, total_steps=10)
    assert [g["lr"] for g in optimizer.param_groups] == pytest.approx([5e-4, 2e-3])  # warm-up scales both
    plateau = TrainConfig(lr=1e-3, parser_lr=4e-3, warmup_steps=2)
    optimizer = build_optimizer(body.parameters(), plateau, parser.parameters())
    Schedule(optimizer, plateau, total_steps=10)
    assert [g["lr"] for g in optimizer.param_groups] == pytest.approx([5e-4, 2e-3])


def test_parser_lr_trains_the_backends_parser_faster(tmp_path: Path, tiny_plugin: Path, one_thread) -> None:
    data = make_data(tmp_path / "data", n_train=60, n_dev=10, gold_dev=False)
    run = tmp_path / "run"
    train(TrainOptions(data_dir=data, run_dir=run, model="tiny-mlm", quiet=True, max_tokens=100,
                       overrides=("epochs=1", "batch_tokens=100", "lr=1e-3", "parser_lr=5e-3")), log=_quiet)
    state = torch.load(run / "last.pt", weights_only=True)
    groups = state["optimizer"]["param_groups"]
    assert [g["lr"] for g in groups] == [1e-3, 5e-3]
    # the parser group holds exactly the parser's parameters (query, key, root: weight and bias each)
    assert len(groups[1]["params"]) == 6
    # the run keeps its token budget on --resume (issue 46): a larger one lets it finish its epoch
    resumed = train(TrainOptions(data_dir=data, run_dir=run, resume=True, quiet=True, max_tokens=10**7), log=_quiet)
    assert resumed.reason == "completed" and resumed.epoch == 1


def test_parser_lr_on_a_backend_without_a_separate_parser_is_a_recipe_error(tmp_path: Path, tiny_plugin: Path,
                                                                           monkeypatch) -> None:
    from training_support import TinyMLM

    monkeypatch.setattr(TinyMLM, "parser_modules", ())
    data = make_data(tmp_path / "data", n_train=30, n_dev=5, gold_dev=False)
    with pytest.raises(RecipeError, match="train.parser_lr: model 'tiny-mlm' has no parser separate"):
        train(TrainOptions(data_dir=data, run_dir=tmp_path / "run", model="tiny-mlm", quiet=True,
                           overrides=("parser_lr=1e-3",)), log=_quiet)


def test_the_paper_backends_name_their_parsers() -> None:
    from depinduce.models.registry import backend_class

    for name in ("structformer", "udgn", "prpn"):
        assert backend_class(name).parser_modules == ("parser",)
    assert backend_class("probformer").parser_modules == ()


# ------------------------------------------------------------------------------------------ learning curves


def test_curve_points_are_recorded_without_changing_the_run(tmp_path: Path, tiny_plugin: Path, one_thread) -> None:
    data = make_data(tmp_path / "data", n_train=120, n_dev=10)
    train_words = sum(len(line.split()) for line in (data / "train.txt").read_text().splitlines())
    common = ("epochs=2", "batch_tokens=100", "eval_every=7", "plateau_patience=0")
    plain, curved = tmp_path / "plain", tmp_path / "curved"
    train(TrainOptions(data_dir=data, run_dir=plain, model="tiny-mlm", quiet=True, overrides=common), log=_quiet)
    messages: list[str] = []
    train(TrainOptions(data_dir=data, run_dir=curved, model="tiny-mlm",
                       overrides=(*common, "curve_every_tokens=150")), log=messages.append)
    records = _metrics(curved)
    points = [r for r in records if r.get("curve")]
    # one point per 150 tokens read, each at the first step that reached the next multiple
    assert [r["tokens_seen"] // 150 for r in points] == list(range(1, 2 * train_words // 150 + 1))[: len(points)]
    assert len(points) >= 2 * train_words // 150 - 1
    assert all({"dev_ppl", "dev_dda", "dev_uda"} <= set(r) and "best" not in r for r in points)
    assert any("curve point at" in m and "dda" in m for m in messages)
    # everything else is exactly the plain run: same evaluations, same weights
    assert [_timeless(r) for r in records if not r.get("curve")] == [_timeless(r) for r in _metrics(plain)]
    a = torch.load(plain / "last.pt", weights_only=True)["model"]
    b = torch.load(curved / "last.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert (plain / "model.pt").read_bytes() == (curved / "model.pt").read_bytes()


def test_set_values_are_checked_together_not_in_their_order() -> None:
    from depinduce.training.config import resolve_config

    @__import__("dataclasses").dataclass
    class Empty:
        pass

    recipe = {"train": {"curriculum_start": 10}}
    # lm_mode=continuous alone clashes with the recipe's curriculum; with curriculum_start=null after it, it does not
    resolved = resolve_config(model_name="x", model_config_class=Empty, recipe=recipe,
                              overrides=("lm_mode=continuous", "curriculum_start=null"))
    assert resolved.train.next_word.lm_mode == "continuous" and resolved.train.batches.curriculum_start is None
    with pytest.raises(RecipeError, match=r"^--set lm_mode=continuous --set lr=0.1: a length curriculum"):
        resolve_config(model_name="x", model_config_class=Empty, recipe=recipe,
                       overrides=("lm_mode=continuous", "lr=0.1"))
