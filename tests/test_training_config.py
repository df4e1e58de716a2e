"""Recipes and --set: type checks, unknown keys, the resolved config saved in the run directory."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from depinduce.errors import DepinduceError, InputError
from depinduce.training.config import TrainConfig, load_recipe, resolve_config
from depinduce.training.engine import TrainOptions, train, trainable_class
from training_support import REPO, TinyConfig, make_data, one_thread, tiny_plugin  # noqa: F401 (fixtures)

pytestmark = pytest.mark.lower_bounds  # pyyaml and pydantic, quickly (scripts/check_lower_bounds.py)


def _resolve(recipe: dict | None = None, *sets: str, model: str | None = "tiny-mlm", seed: int | None = None):
    return resolve_config(model_name=model, model_config_class=TinyConfig, recipe=recipe, overrides=sets, seed=seed)


def test_recipe_values_are_typed_and_defaults_filled(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    # PyYAML reads 3e-4 (no decimal point) as a string: a float field must still accept it
    path.write_text("model: tiny-mlm\nmodel_config:\n  hidden: 8\ntrain:\n  lr: 3e-4\n  epochs: 4\n  clip: null\n")
    resolved = _resolve(load_recipe(path))
    assert resolved.model == "tiny-mlm"
    assert resolved.model_config == {"hidden": 8, "dropout": 0.1, "sleep": 0.0, "first_sleep": 0.0, "parse_sleep": 0.0,
                                      "signal_at": 0}
    train = resolved.train
    assert train.optimiser.lr == pytest.approx(3e-4) and isinstance(train.optimiser.lr, float)
    assert train.budget.epochs == 4 and train.optimiser.clip is None
    assert train.batches.batch_tokens == TrainConfig().batches.batch_tokens


def test_set_overrides_with_type_conversion() -> None:
    resolved = _resolve({"train": {"lr": 0.1}}, "lr=1e-3", "train.epochs=7", "hidden=32", "model_config.dropout=0",
                        "patience=none", "optimizer=adamw", "dev_parse=false", "clip=null", seed=5)
    train = resolved.train
    assert train.optimiser.lr == pytest.approx(1e-3)
    assert train.budget.epochs == 7 and train.selection.patience is None and train.optimiser.clip is None
    assert train.optimiser.optimizer == "adamw" and train.selection.dev_parse is False
    assert resolved.model_config["hidden"] == 32 and resolved.model_config["dropout"] == 0.0
    assert train.execution.seed == 5


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
    assert saved["model_config"] == {"hidden": 8, "dropout": 0.2, "sleep": 0.0, "first_sleep": 0.0, "parse_sleep": 0.0,
                                     "signal_at": 0}
    assert saved["train"]["lr"] == pytest.approx(2e-3) and saved["train"]["seed"] == 3
    assert list(saved["train"]) == list(TrainConfig().flat())  # flat, in the order config.yaml always had
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


# ------------------------------------------------------------------------------- settings grouped by concern


def test_every_flat_key_belongs_to_exactly_one_group() -> None:
    from depinduce.training.settings.groups import FLAT_KEYS, GROUP_OF, GROUPS

    declared = [key for group in GROUPS.values() for key in group.model_fields]
    assert sorted(declared) == sorted(FLAT_KEYS) and len(set(FLAT_KEYS)) == len(FLAT_KEYS)
    assert not set(GROUPS) & set(FLAT_KEYS)  # a group's name never reads as a flat key
    config = TrainConfig(lr=1e-3, epochs=3, bptt=20)
    assert (config.optimiser.lr, config.budget.epochs, config.next_word.bptt) == (1e-3, 3, 20)
    assert config.flat()["lr"] == 1e-3 and list(config.flat()) == list(FLAT_KEYS)
    assert {GROUP_OF[k] for k in ("lr", "schedule", "select", "mask_rate", "seed")} == \
        {"optimiser", "lr_schedule", "selection", "masked_lm", "execution"}


def test_groups_can_be_written_as_sections_and_dotted_keys() -> None:
    flat = _resolve({"train": {"lr": 2e-3, "epochs": 5, "warmup_steps": 3}}, "eps=1e-8", "seed=2")
    nested = _resolve({"train": {"optimiser": {"lr": 2e-3}, "budget": {"epochs": 5}, "warmup_steps": 3}},
                      "optimiser.eps=1e-8", "train.execution.seed=2")
    assert nested.train == flat.train and nested.to_yaml() == flat.to_yaml()
    assert nested.train.optimiser.eps == 1e-8 and nested.train.lr_schedule.warmup_steps == 3
    saved = yaml.safe_load(nested.to_yaml())["train"]
    assert saved["lr"] == 2e-3 and "optimiser" not in saved  # config.yaml stays flat


@pytest.mark.parametrize(
    ("recipe", "sets", "message"),
    [
        (None, ("optimiser.epochs=1",),
         "--set optimiser.epochs: the optimiser group has no key 'epochs'; it has optimizer, lr"),
        (None, ("budget.epochs=x",), "--set budget.epochs=x: train.epochs must be an integer, not 'x'"),
        ({"optimiser": 5}, (), "recipe: train.optimiser must be a mapping of its keys (optimizer, lr,"),
        ({"optimiser": {"rate": 1}}, (), "recipe: unknown train key(s) optimiser.rate; known: batch_tokens,"),
        ({"optimiser": {"lr": 1}, "lr": 2}, (), "recipe: train.lr is given twice (as optimiser.lr and as lr)"),
        ({"budget": {"epochs": True}}, (), "recipe: train.epochs must be an integer, not True"),
    ],
)
def test_grouped_forms_have_one_line_errors(recipe: dict | None, sets: tuple[str, ...], message: str) -> None:
    with pytest.raises(DepinduceError) as info:
        _resolve({"train": recipe} if recipe is not None else None, *sets)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_range_problems_of_several_groups_are_one_line_in_a_fixed_order() -> None:
    with pytest.raises(DepinduceError) as info:
        _resolve(None, "eps=0", "lm_mode=continuous", "curriculum_start=5", "epochs=0")
    assert str(info.value) == (
        "--set eps=0 --set lm_mode=continuous --set curriculum_start=5 --set epochs=0: "
        "epochs must be at least 1; a length curriculum picks sentences; "
        "lm_mode continuous reads the text as one stream (add --set curriculum_start=null); eps must be positive; "
        "weight_decay and min_lr must not be negative")
    with pytest.raises(ValueError, match="mask_rate must be between 0 and 1"):  # pydantic's ValidationError
        TrainConfig(mask_rate=0)


def test_types_are_strict_in_both_sections() -> None:
    """A bool is not a number, a number is not a string, ints widen to floats, a float field takes a string that
    reads as a number (PyYAML's 3e-4), in train and in the backend's model_config alike."""
    resolved = _resolve({"model_config": {"dropout": "2e-1", "hidden": 4}, "train": {"clip": 1, "lr": "1e-2"}})
    assert resolved.model_config["dropout"] == 0.2 and resolved.train.optimiser.clip == 1.0
    assert isinstance(resolved.train.optimiser.clip, float) and resolved.train.optimiser.lr == 1e-2
    for section, key, value, words in [("model_config", "dropout", True, "a number"),
                                       ("model_config", "hidden", 4.0, "an integer"),
                                       ("train", "decoder", 5, "a string"),
                                       ("train", "patience", "3", "an integer or null"),
                                       ("train", "tensorboard", 1, "true or false")]:
        with pytest.raises(DepinduceError) as info:
            _resolve({section: {key: value}})
        assert str(info.value) == f"recipe: {section}.{key} must be {words}, not {value!r}"


def test_help_does_not_import_pydantic() -> None:
    """The settings' validation is imported with training, not by the command line's help."""
    from test_fast_start import HELP_ALL

    code = 'HEAVY = ("pydantic", "depinduce.training.config")\n' + HELP_ALL
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["heavy"] == []


def test_a_run_recorded_before_fused_adam_resumes_with_the_update_it_ran(tmp_path: Path) -> None:
    """config.yaml written before the key existed: the run ran torch's default update and resumes with it; a
    run that records the key resumes with what it records."""
    from depinduce.training.config import load_run_config

    recorded = _resolve().train.flat()
    assert recorded["fused_adam"] is True  # the default
    for written, expected in (({k: v for k, v in recorded.items() if k != "fused_adam"}, False),
                              (recorded, True)):
        (tmp_path / "config.yaml").write_text(yaml.safe_dump({"model": "tiny-mlm", "train": written}))
        assert load_run_config(tmp_path, lambda name: TinyConfig).train.optimiser.fused_adam is expected
