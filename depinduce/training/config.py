"""Training recipes: YAML files of model hyperparameters and optimisation settings, ``--set`` overrides, type checks.

A recipe (and the ``config.yaml`` a run writes, so a run's config is itself a valid recipe) has three keys::

    model: structformer          # optional; the backend's registry name (--model wins when it agrees)
    model_config: {n_layers: 8}  # the backend's hyperparameter dataclass fields
    train: {lr: 3.0e-4}          # :class:`TrainConfig`'s settings, flat (or by group: optimiser: {lr: …})

Every value is checked (by pydantic, ``training/settings/rules.py``) against the declared type of its field, so a
typo or a wrong type is a one-line error before any work starts rather than a crash (or a silently ignored key) an
hour into training.  Floats are also accepted as strings because PyYAML reads ``3e-4`` (no decimal point) as a
string, a classic recipe trap.

``--set KEY=VALUE`` addresses ``train.KEY`` or ``model_config.KEY``; a bare ``KEY`` is resolved to whichever of
the two declares it (a name both declare must be qualified); a train key may also be named by its group
(``optimiser.lr``, ``train.optimiser.lr``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from depinduce.data.files import dump_yaml, load_yaml, read_text_file
from depinduce.display import quote, shorten
from depinduce.errors import InputError, RecipeError, RunDirectoryError, UsageError
from depinduce.io.filenames import CONFIG_FILE
from depinduce.training.settings.groups import (  # noqa: F401 (the metric sets: the engine imports them from here)
    CONSTITUENCY_METRICS, DEPENDENCY_METRICS, GROUP_OF, GROUPS, LABELLED_METRICS, LOWER_IS_BETTER, SelectMetric,
)
from depinduce.training.settings.rules import FieldRules
from depinduce.training.settings.train import TRAIN_RULES, TrainConfig, flatten


@dataclass
class ResolvedConfig:
    """A recipe with every default filled in: what ``config.yaml`` records and what the engine runs."""

    model: str
    model_config: dict[str, Any]
    train: TrainConfig

    def to_yaml(self) -> str:
        data = {"model": self.model, "model_config": _plain(self.model_config),
                "train": _plain(self.train.flat())}
        return dump_yaml(data)


# ---------------------------------------------------------------------------------------- recipe loading


TOP_KEYS = ("model", "model_config", "train")


def load_recipe(path: str | Path) -> dict[str, Any]:
    """Read a recipe file into its raw mapping (``model`` / ``model_config`` / ``train``), checking its shape."""
    path = Path(path)
    data = load_yaml(read_text_file(path, "recipe"), path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(path, None, "a recipe must be a mapping with keys model, model_config, train")
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise InputError(path, None, f"unknown top-level key(s) {', '.join(map(shorten, unknown))}; "
                                     f"a recipe has {', '.join(TOP_KEYS)}")
    if data.get("model") is not None and not isinstance(data["model"], str):
        raise InputError(path, None, "'model' must be a backend name")
    for section in ("model_config", "train"):
        if data.get(section) is None:
            data[section] = {}
        elif not isinstance(data[section], dict):
            raise InputError(path, None, f"'{section}' must be a mapping of keys to values")
    return data


def parse_override(item: str) -> tuple[str, str]:
    """``KEY=VALUE`` → (KEY, VALUE); anything else is a one-line error."""
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise RecipeError(f"--set expects KEY=VALUE, not {quote(item)}")
    return key, value


def resolve_config(
    *,
    model_name: str | None,
    model_config_class: type,
    recipe: Mapping[str, Any] | None = None,
    overrides: Sequence[str] = (),
    seed: int | None = None,
    where: str = "recipe",
) -> ResolvedConfig:
    """Recipe + ``--set`` overrides + ``--seed`` → a fully typed :class:`ResolvedConfig` (defaults filled in)."""
    recipe = dict(recipe or {})
    recipe_model = recipe.get("model")
    name = model_name or recipe_model
    if name is None:
        raise UsageError("no model given: pass --model NAME or a recipe with a 'model' key")
    if recipe_model is not None and model_name is not None and recipe_model != model_name:
        raise RecipeError(f"{where} is for model {quote(recipe_model)} but --model is '{model_name}'")
    model_rules = FieldRules.of_dataclass("model_config", model_config_class)
    model_values = model_rules.check(recipe.get("model_config") or {}, where)
    train_values = TRAIN_RULES.check(flatten(recipe.get("train") or {}, where), where)
    # the recipe is checked alone, so a bad value is blamed on it; the --set values of the train section are
    # checked together once all are applied (constraints between fields must not depend on their order) and
    # blamed on the --set items that gave train values
    TrainConfig.from_values(train_values, where)
    _build_model_config(model_config_class, model_values, where)
    train_items: list[str] = []
    for item in overrides:
        key, raw = parse_override(item)
        rules, field_name = _locate(key, model_rules)
        checked = rules.check({field_name: rules.parse_text(field_name, raw)}, f"--set {item}")
        (model_values if rules is model_rules else train_values).update(checked)
        if rules is TRAIN_RULES:
            train_items.append(item)
        else:
            _build_model_config(model_config_class, model_values, f"--set {item}")
    if train_items:
        TrainConfig.from_values(train_values, " ".join(f"--set {item}" for item in train_items))
    if seed is not None:
        train_values["seed"] = seed
    train = TrainConfig.from_values(train_values, "--seed" if seed is not None else where)
    model_config = _build_model_config(model_config_class, model_values, where)
    return ResolvedConfig(name, _plain(asdict(model_config)), train)


def _build_model_config(model_config_class: type, values: Mapping[str, Any], where: str) -> Any:
    try:
        return model_config_class(**values)
    except (TypeError, ValueError) as exc:
        raise RecipeError(f"{where}: invalid model_config ({shorten(exc, 200)})") from exc


def _locate(key: str, model_rules: FieldRules) -> tuple[FieldRules, str]:
    """Which section's rules a ``--set`` key addresses, and the field: ``lr``, ``train.lr``, ``optimiser.lr``,
    ``train.optimiser.lr`` or ``model_config.n_layers``."""
    section, dot, rest = key.partition(".")
    if dot:
        if section == "model_config":
            if rest not in model_rules:
                raise RecipeError(f"--set {key}: unknown model_config key '{rest}'; "
                                  f"known: {', '.join(sorted(model_rules.keys()))}")
            return model_rules, rest
        if section == "train" and rest not in TRAIN_RULES and rest.partition(".")[0] in GROUPS:
            section, _, rest = rest.partition(".")
        if section in GROUPS:
            if GROUP_OF.get(rest) != section:
                raise RecipeError(f"--set {key}: the {section} group has no key '{rest}'; it has "
                                  f"{', '.join(GROUPS[section].model_fields)}")
            return TRAIN_RULES, rest
        if section != "train":
            raise RecipeError(f"--set {key}: the prefix must be 'train.' or 'model_config.' (or a group of train "
                              f"keys: {', '.join(f'{group}.' for group in GROUPS)})")
        if rest not in TRAIN_RULES:
            raise RecipeError(f"--set {key}: unknown train key '{rest}'; "
                              f"known: {', '.join(sorted(TRAIN_RULES.keys()))}")
        return TRAIN_RULES, rest
    in_train, in_model = key in TRAIN_RULES, key in model_rules
    if in_train and in_model:
        raise RecipeError(f"--set {key}: both a training and a model key; write train.{key} or model_config.{key}")
    if in_train:
        return TRAIN_RULES, key
    if in_model:
        return model_rules, key
    raise RecipeError(
        f"--set {key}: unknown key; training keys: {', '.join(sorted(TRAIN_RULES.keys()))}; "
        f"model keys: {', '.join(sorted(model_rules.keys())) or 'none'}"
    )


def _plain(value: Any) -> Any:
    """Tuples → lists (safe YAML has no tuples), recursively; everything else unchanged."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def load_run_config(run_dir: Path, model_config_class_for: Any) -> ResolvedConfig:
    """Re-read a run's ``config.yaml`` (for ``--resume``), with the same checks as a recipe.

    ``model_config_class_for`` maps the recorded model name to its hyperparameter dataclass.
    """
    path = run_dir / CONFIG_FILE
    if not path.is_file():
        raise RunDirectoryError(f"{run_dir}: not a run directory (no config.yaml); nothing to resume")
    data = load_recipe(path)
    if not data.get("model"):
        raise InputError(path, None, "no 'model' key naming the backend")
    train = data.get("train")
    if isinstance(train, dict) and "fused_adam" not in train:
        train["fused_adam"] = False  # recorded before the key existed: the run resumes with the update it ran
    return resolve_config(model_name=data["model"], model_config_class=model_config_class_for(data["model"]),
                          recipe=data, where=str(path))
