"""Recipes and --set: type checks, unknown keys, the resolved config saved in the run directory."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from depinduce.errors import DepinduceError, InputError
from depinduce.training.config import TrainConfig, load_recipe, resolve_config
from depinduce.training.engine import TrainOptions, train, trainable_class
from training_support import REPO, TinyConfig, make_data, one_thread, tiny_plugin  # noqa: F401 (fixtures)


def _resolve(recipe: dict | None = None, *sets: str, model: str | None = "tiny-mlm", seed: int | None = None):
    return resolve_config(model_name=model, model_config_class=TinyConfig, recipe=recipe, overrides=sets, seed=seed)


def test_recipe_values_are_typed_and_defaults_filled(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    # PyYAML reads 3e-4 (no decimal point) as a string: a float field must still accept it
    path.write_text("model: tiny-mlm\nmodel_config:\n  hidden: 8\ntrain:\n  lr: 3e-4\n  epochs: 4\n  clip: null\n")
    resolved = _resolve(load_recipe(path))
    assert resolved.model == "tiny-mlm"
    assert resolved.model_config == {"hidden": 8, "dropout": 0.1, "sleep": 0.0, "first_sleep": 0.0, "parse_sleep": 0.0}
    assert resolved.train.lr == pytest.approx(3e-4) and isinstance(resolved.train.lr, float)
    assert resolved.train.epochs == 4 and resolved.train.clip is None
    assert resolved.train.batch_tokens == TrainConfig().batch_tokens


def test_set_overrides_with_type_conversion() -> None:
    resolved = _resolve({"train": {"lr": 0.1}}, "lr=1e-3", "train.epochs=7", "hidden=32", "model_config.dropout=0",
                        "patience=none", "optimizer=adamw", "dev_parse=false", "clip=null", seed=5)
    assert resolved.train.lr == pytest.approx(1e-3)
    assert resolved.train.epochs == 7 and resolved.train.patience is None and resolved.train.clip is None
    assert resolved.train.optimizer == "adamw" and resolved.train.dev_parse is False
    assert resolved.model_config["hidden"] == 32 and resolved.model_config["dropout"] == 0.0
    assert resolved.train.seed == 5


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("epochs=2.5", "train.epochs must be an integer, not 2.5"),
        ("epochs=many", "train.epochs must be an integer, not 'many'"),
        ("lr=fast", "train.lr must be a number, not 'fast'"),
        ("dev_parse=2", "train.dev_parse must be true or false, not 2"),
        ("optimizer=sgd", "train.optimizer must be one of 'adam', 'adamw', not 'sgd'"),
        ("select=dev_bleu", "train.select must be one of"),
        ("hidden=wide", "model_config.hidden must be an integer"),
        ("nosuch=1", "--set nosuch: unknown key; training keys:"),
        ("train.hidden=1", "unknown train key 'hidden'"),
        ("optim.lr=1", "the prefix must be 'train.' or 'model_config.'"),
        ("lr", "--set expects KEY=VALUE"),
        ("epochs=0", "epochs must be at least 1"),
        ("mask_rate=1.5", "mask_rate must be between 0 and 1"),
    ],
)
def test_bad_overrides_are_one_line_errors(override: str, message: str) -> None:
    with pytest.raises(DepinduceError) as info:
        _resolve(None, override)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_bad_recipes_are_located_errors(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("train:\n  lr: [1\n")
    with pytest.raises(InputError, match=r"r\.yaml:\d+: not valid YAML"):
        load_recipe(path)
    path.write_text("optimiser: {lr: 1}\n")
    with pytest.raises(InputError, match="unknown top-level key"):
        load_recipe(path)
    path.write_text("train: {learning_rate: 1}\n")
    with pytest.raises(DepinduceError, match="unknown train key.*learning_rate.*known:.*lr"):
        _resolve(load_recipe(path))
    path.write_text("model: structformer\n")
    with pytest.raises(DepinduceError, match="recipe is for model 'structformer' but --model is 'tiny-mlm'"):
        _resolve(load_recipe(path))
    with pytest.raises(DepinduceError, match="no model given"):
        _resolve({}, model=None)


def test_resolved_config_is_saved_and_reusable_as_a_recipe(tmp_path: Path, tiny_plugin: Path, one_thread) -> None:
    data = make_data(tmp_path / "data", n_train=60, n_dev=10)
    recipe = tmp_path / "r.yaml"
    recipe.write_text("model: tiny-mlm\nmodel_config: {hidden: 8}\ntrain: {epochs: 1, batch_tokens: 300}\n")
    run = tmp_path / "run"
    train(TrainOptions(data_dir=data, run_dir=run, recipe=recipe, overrides=("lr=2e-3", "dropout=0.2"), seed=3,
                       quiet=True), log=lambda _: None)
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["model"] == "tiny-mlm"
    assert saved["model_config"] == {"hidden": 8, "dropout": 0.2, "sleep": 0.0, "first_sleep": 0.0, "parse_sleep": 0.0}
    assert saved["train"]["lr"] == pytest.approx(2e-3) and saved["train"]["seed"] == 3
    assert set(saved["train"]) == set(TrainConfig.__dataclass_fields__)
    again = _resolve(load_recipe(run / "config.yaml"), model=None)
    assert again.train == _resolve(saved).train and again.model_config == saved["model_config"]
    assert (run / "vocab.json").read_bytes() == (data / "vocab.json").read_bytes()


def test_existing_run_dir_needs_force_or_resume(tmp_path: Path, tiny_plugin: Path, one_thread) -> None:
    data = make_data(tmp_path / "data", n_train=40, n_dev=5, gold_dev=False)
    run = tmp_path / "run"
    options = dict(data_dir=data, run_dir=run, model="tiny-mlm", overrides=("epochs=1",), quiet=True)
    train(TrainOptions(**options), log=lambda _: None)
    (run / "notes.txt").write_text("mine")
    with pytest.raises(DepinduceError, match="already exists; use --resume to continue it or --force"):
        train(TrainOptions(**options), log=lambda _: None)
    with pytest.raises(DepinduceError, match="--set and --seed cannot change it"):
        train(TrainOptions(**options, resume=True), log=lambda _: None)
    train(TrainOptions(**options, force=True), log=lambda _: None)
    assert (run / "notes.txt").read_text() == "mine"  # --force replaces run files only
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 1


def test_cli_errors_are_one_line(tmp_path: Path, tiny_plugin: Path) -> None:
    from depinduce.cli.main import cli

    data = make_data(tmp_path / "data", n_train=20, n_dev=5, gold_dev=False)
    runner = CliRunner()
    result = runner.invoke(cli, ["train", "--model", "tiny-mlm", "--data", str(data), "--out", str(tmp_path / "r"),
                                 "--set", "epochs=two"])
    assert result.exit_code == 2
    assert result.output.strip() == "--set epochs=two: train.epochs must be an integer, not 'two'"
    result = runner.invoke(cli, ["train", "--model", "right-branching", "--data", str(data),
                                 "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "model 'right-branching' is not trainable" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_shipped_recipes_resolve() -> None:
    """The recipes in depinduce/recipes/ use only keys the engine knows, with the right types; the model keys are checked
    against the backend's own dataclass when it is registered here."""
    paths = sorted((REPO / "depinduce" / "recipes").glob("*.yaml"))
    assert paths
    for path in paths:
        recipe = load_recipe(path)
        try:
            config_class = trainable_class(recipe["model"]).config_class
        except DepinduceError:  # the backend is not installed in this environment
            config_class = dataclasses.make_dataclass(
                "AnyConfig", [(k, typing.Any, dataclasses.field(default=v)) for k, v in recipe["model_config"].items()])
        resolved = resolve_config(model_name=None, model_config_class=config_class, recipe=recipe, where=str(path))
        assert path.name.startswith(f"{resolved.model}-")  # recipes are named <model>-<dataset>[-cpu].yaml
