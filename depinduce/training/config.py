"""Training recipes: YAML files of model hyperparameters and optimisation settings, ``--set`` overrides, type checks.

A recipe (and the ``config.yaml`` a run writes, so a run's config is itself a valid recipe) has three keys::

    model: structformer          # optional; the backend's registry name (--model wins when it agrees)
    model_config: {n_layers: 8}  # the backend's hyperparameter dataclass fields
    train: {lr: 3.0e-4}          # the fields of :class:`TrainConfig`

Every value is checked against the declared type of its field, so a typo or a wrong type is a one-line error
before any work starts rather than a crash (or a silently ignored key) an hour into training.  Floats are also
accepted as strings because PyYAML reads ``3e-4`` (no decimal point) as a string, a classic recipe trap.

``--set KEY=VALUE`` addresses ``train.KEY`` or ``model_config.KEY``; a bare ``KEY`` is resolved to whichever of
the two declares it (a name both declare must be qualified).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from depinduce.data.files import load_yaml, read_text_file
from depinduce.display import quote, shorten
from depinduce.errors import InputError, RecipeError, RunDirectoryError, UsageError

SelectMetric = Literal[
    "dev_loss", "dev_ppl", "dev_dda", "dev_uda", "dev_root_accuracy", "dev_las", "dev_uf1", "dev_uf1_corpus",
    "train_loss",
]
# Metrics where a lower value is better; every other selectable metric is a percentage where higher is better.
LOWER_IS_BETTER = frozenset({"dev_loss", "dev_ppl", "train_loss"})
DEPENDENCY_METRICS = frozenset({"dev_dda", "dev_uda", "dev_root_accuracy"})
CONSTITUENCY_METRICS = frozenset({"dev_uf1", "dev_uf1_corpus"})
# Only backends that predict labels (supervised ones) have a meaningful LAS.
LABELLED_METRICS = frozenset({"dev_las"})


@dataclass
class TrainConfig:
    """Optimisation settings; the defaults are StructFormer's paper setting (see design/models.md)."""

    epochs: int = 100
    # Padded tokens per batch (sentences x longest sentence); a longer sentence than this forms its own batch.
    batch_tokens: int = 4096
    # Training sentences longer than this many words are skipped (dev is never filtered).
    max_length: int | None = None
    # Length curriculum (off: null): epoch e trains only on sentences of at most curriculum_start + e *
    # curriculum_step words (never more than max_length), so the first epochs are short sentences only — the
    # Compound PCFG's schedule (start 30, +1 per epoch; Kim et al. 2019), Spitkovsky et al.'s "baby steps".
    curriculum_start: int | None = None
    curriculum_step: int = 1
    mask_rate: float = 0.3
    # Dev masks are drawn once from this seed, so dev perplexity is comparable across epochs and runs.
    dev_mask_seed: int = 1234
    optimizer: Literal["adam", "adamw"] = "adam"
    lr: float = 3e-4
    # Learning rate of the backend's parser (the submodules it names as its parser; null: lr, as the papers).
    # The schedule scales it as it scales lr.
    parser_lr: float | None = None
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-9
    weight_decay: float = 1.2e-6
    # Maximum global gradient norm; null disables clipping.
    clip: float | None = 0.25
    # Masked LM: split each batch into this many runs of consecutive sentences and minimise the sum of their mean
    # losses, each with the regularizer, as the Probabilistic Transformer's trainer does (4 chunks of 16 sentences
    # per 64-sentence batch: gradients 4x a mean's); null: the batch's mean loss.
    loss_chunks: int | None = None
    # plateau: ReduceLROnPlateau on the dev loss after each evaluation; linear: warmup then linear decay to
    # min_lr at the last step; constant: no schedule.
    schedule: Literal["plateau", "linear", "constant"] = "plateau"
    plateau_factor: float = 0.5
    plateau_patience: int = 2
    warmup_steps: int = 0
    min_lr: float = 0.0
    # The metric that picks model.pt; patience = evaluations without improvement before stopping (null: never).
    select: SelectMetric = "dev_ppl"
    patience: int | None = None
    # Evaluate every N optimiser steps as well as after every epoch (0: after epochs only).
    eval_every: int = 0
    # Learning-curve points: each time the run has read another multiple of this many training tokens, dev is
    # measured and recorded in metrics.jsonl ("curve": true) without touching the schedule, model selection or
    # patience — the run trains exactly as without them (null: none).
    curve_every_tokens: int | None = None
    # Write last.pt every N optimiser steps as well as after every epoch (0: after epochs only).
    checkpoint_every: int = 0
    # The training loss over the last N optimiser steps, every N steps, in metrics.jsonl ("train_log": true) and
    # train.log (0: none).
    log_every: int = 100
    # TensorBoard event files in RUN_DIR/tensorboard with every number of metrics.jsonl (the tensorboard extra).
    tensorboard: bool = False
    # Parsing metrics on dev (when dev has gold trees): the decoder, and whether to compute them at all.
    # mst, eisner, argmax or the backend's own (the authors') decoder, checked against the backend when training
    # starts (``Backend.own_decoders``).
    decoder: str = "mst"
    dev_parse: bool = True
    seed: int = 0
    # Next-word language models (PRPN): ``sentences`` trains on each sentence alone (state reset per sentence);
    # ``continuous`` reads the training text as one stream, batch_tokens // bptt streams in parallel, with
    # truncated backpropagation every ``bptt`` tokens (the paper's language-model mode).
    lm_mode: Literal["sentences", "continuous"] = "sentences"
    bptt: int = 35
    # Refining backends (RNGTr): CoNLL-U parses of train.conllu / dev.conllu (same sentences, same order) whose
    # graphs the first pass reads — `depinduce train --init-train/--init-dev` set them (absolute paths); null:
    # start from no graph.
    init_train: str | None = None
    init_dev: str | None = None
    # Start from the weights (model.pt) of another run of the same backend on the same vocabulary, e.g. RNGTr
    # from a trained SynTr — `depinduce train --warm-start RUN_DIR` sets it (absolute path).
    warm_start: str | None = None
    # Minutes this recipe is sized for: training stops cleanly (evaluated, checkpointed) within them; --max-time
    # overrides it; null: no budget (the epochs decide).  Per invocation, as --max-time.
    max_time: float | None = None
    # Training tokens (the words of the training batches, summed over ranks) the whole run may read: it stops
    # cleanly (evaluated, checkpointed) once it has read them, on any machine; --max-tokens overrides it; null: no
    # token budget.  Counted over the run, resumes included (unlike max_time).
    max_tokens: int | None = None
    # fp32: the authors' function to round-off.  bf16: each step's forward pass under bfloat16 autocast (weights,
    # optimiser, loss, evaluation and parsing stay float32; StructFormer and UDGN only) — faster on CPUs with
    # bfloat16 instructions and on GPUs, numbers rounded differently (training/precision.py).
    precision: Literal["fp32", "bf16"] = "fp32"
    # DDP only: set when the backend has parameters that some batches do not use.
    find_unused_parameters: bool = False

    def validate(self, where: str) -> None:
        """Range checks the types cannot express."""
        problems = []
        for name in ("epochs", "batch_tokens", "bptt"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be at least 1")
        if self.max_length is not None and self.max_length < 1:
            problems.append("max_length must be at least 1 (or null)")
        if not 0.0 < self.mask_rate < 1.0:
            problems.append("mask_rate must be between 0 and 1")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            problems.append("lr must be positive")
        if self.parser_lr is not None and not (self.parser_lr > 0 and math.isfinite(self.parser_lr)):
            problems.append("parser_lr must be positive (or null for lr)")
        if self.curriculum_start is not None and self.curriculum_start < 1:
            problems.append("curriculum_start must be at least 1 word (or null for no curriculum)")
        if self.curriculum_step < 0:
            problems.append("curriculum_step must not be negative")
        if self.curriculum_start is not None and self.lm_mode == "continuous":
            problems.append("a length curriculum picks sentences; lm_mode continuous reads the text as one stream "
                            "(add --set curriculum_start=null)")
        if self.curve_every_tokens is not None and self.curve_every_tokens < 1:
            problems.append("curve_every_tokens must be a positive number of training tokens (or null)")
        if not (0 <= self.beta1 < 1 and 0 <= self.beta2 < 1):
            problems.append("beta1 and beta2 must be in [0, 1)")
        if self.eps <= 0 or self.weight_decay < 0 or self.min_lr < 0:
            problems.append("eps must be positive; weight_decay and min_lr must not be negative")
        if self.clip is not None and self.clip <= 0:
            problems.append("clip must be positive (or null for no clipping)")
        if self.loss_chunks is not None and self.loss_chunks < 1:
            problems.append("loss_chunks must be at least 1 (or null for the batch's mean loss)")
        if not 0 < self.plateau_factor < 1 or self.plateau_patience < 0:
            problems.append("plateau_factor must be in (0, 1) and plateau_patience at least 0")
        for name in ("warmup_steps", "eval_every", "checkpoint_every", "log_every"):
            if getattr(self, name) < 0:
                problems.append(f"{name} must not be negative")
        if self.max_time is not None and not (self.max_time > 0 and math.isfinite(self.max_time)):
            problems.append("max_time must be a positive number of minutes (or null)")
        if self.max_tokens is not None and self.max_tokens < 1:
            problems.append("max_tokens must be a positive number of training tokens (or null)")
        if self.patience is not None and self.patience < 1:
            problems.append("patience must be at least 1 (or null)")
        if self.lm_mode == "continuous" and self.batch_tokens < self.bptt:
            problems.append(f"continuous text needs batch_tokens ({self.batch_tokens}) of at least one bptt "
                            f"({self.bptt}): batch_tokens // bptt streams are read in parallel")
        if problems:
            raise RecipeError(f"{where}: {'; '.join(problems)}")


@dataclass
class ResolvedConfig:
    """A recipe with every default filled in: what ``config.yaml`` records and what the engine runs."""

    model: str
    model_config: dict[str, Any]
    train: TrainConfig

    def to_yaml(self) -> str:
        data = {"model": self.model, "model_config": _plain(self.model_config),
                "train": _plain(dataclasses.asdict(self.train))}
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


# ------------------------------------------------------------------------------------------ type checking


def describe(annotation: Any) -> str:
    """A type annotation in words, for error messages."""
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return "one of " + ", ".join(repr(c) for c in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        parts = [describe(a) for a in args if a is not type(None)]
        return " or ".join(parts) + (" or null" if type(None) in args else "")
    if origin in (list, tuple, Sequence):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        inner = describe(args[0]) if args else "values"
        return f"a list of {inner}"
    if annotation is float:
        return "a number"
    if annotation is int:
        return "an integer"
    if annotation is bool:
        return "true or false"
    if annotation is str:
        return "a string"
    return getattr(annotation, "__name__", str(annotation))


class _Mismatch(Exception):
    """Raised inside :func:`check_value` when a value does not fit; turned into a one-line error by the caller."""


def check_value(value: Any, annotation: Any) -> Any:
    """``value`` converted to ``annotation`` when it fits exactly (ints widen to floats), else :class:`_Mismatch`."""
    if annotation is Any:
        return value
    origin = typing.get_origin(annotation)
    if origin is Literal:
        # compare types too: True == 1 must not let a boolean pass for an integer choice
        if any(type(c) is type(value) and c == value for c in typing.get_args(annotation)):
            return value
        raise _Mismatch
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        if value is None:
            if type(None) in args:
                return None
            raise _Mismatch
        for arg in args:
            if arg is type(None):
                continue
            try:
                return check_value(value, arg)
            except _Mismatch:
                continue
        raise _Mismatch
    if origin in (list, tuple, Sequence):
        if not isinstance(value, (list, tuple)):
            raise _Mismatch
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis] or [Any]
        if origin is tuple and Ellipsis not in typing.get_args(annotation) and len(args) > 1:
            if len(value) != len(args):
                raise _Mismatch
            return tuple(check_value(v, a) for v, a in zip(value, args))
        items = [check_value(v, args[0]) for v in value]
        return tuple(items) if origin is tuple else items
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise _Mismatch
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _Mismatch
    if annotation is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                raise _Mismatch from None
        raise _Mismatch
    if annotation is str:
        if isinstance(value, str):
            return value
        raise _Mismatch
    if annotation is dict or origin is dict:
        if isinstance(value, dict):
            return value
        raise _Mismatch
    raise _Mismatch


def _accepts_str(annotation: Any) -> bool:
    if annotation is str:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_accepts_str(a) for a in typing.get_args(annotation))
    return False


def parse_text_value(raw: str, annotation: Any) -> Any:
    """A command-line value as ``annotation``: YAML syntax (``null``, ``true``, ``[1, 2]``), except that a field
    that takes strings keeps the raw text (so ``--set name=123`` stays the string ``"123"``)."""
    if _accepts_str(annotation) and raw.strip().lower() not in ("null", "~", "none"):
        return raw
    if raw.strip().lower() == "none":
        return None
    try:
        return load_yaml(raw, "--set")  # no aliases: a --set value cannot expand into millions of nodes
    except InputError:
        return raw


def field_types(config_class: type) -> dict[str, Any]:
    """Declared types of a hyperparameter dataclass's fields (string annotations resolved)."""
    try:
        hints = typing.get_type_hints(config_class)
    except Exception:  # an unresolvable annotation: fall back to accepting anything for that class
        hints = {}
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(config_class)}


def _checked(values: Mapping[str, Any], types_: Mapping[str, Any], section: str, where: str) -> dict[str, Any]:
    unknown = sorted(set(values) - set(types_))
    if unknown:
        raise RecipeError(
            f"{where}: unknown {section} key(s) {', '.join(map(shorten, unknown))}; known: {', '.join(sorted(types_))}"
        )
    out = {}
    for key, value in values.items():
        try:
            out[key] = check_value(value, types_[key])
        except _Mismatch:
            raise RecipeError(
                f"{where}: {section}.{key} must be {describe(types_[key])}, not {quote(value)}"
            ) from None
    return out


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
    model_types = field_types(model_config_class)
    train_types = field_types(TrainConfig)
    model_values = _checked(recipe.get("model_config") or {}, model_types, "model_config", where)
    train_values = _checked(recipe.get("train") or {}, train_types, "train", where)
    # the recipe is checked alone, so a bad value is blamed on it; the --set values of the train section are
    # checked together once all are applied (constraints between fields must not depend on their order) and
    # blamed on the --set items that gave train values
    TrainConfig(**train_values).validate(where)
    _build_model_config(model_config_class, model_values, where)
    train_items: list[str] = []
    for item in overrides:
        key, raw = parse_override(item)
        section, field_name = _locate(key, model_types, train_types)
        types_ = model_types if section == "model_config" else train_types
        value = parse_text_value(raw, types_[field_name])
        checked = _checked({field_name: value}, types_, section, f"--set {item}")
        (model_values if section == "model_config" else train_values).update(checked)
        if section == "train":
            train_items.append(item)
        else:
            _build_model_config(model_config_class, model_values, f"--set {item}")
    if train_items:
        TrainConfig(**train_values).validate(" ".join(f"--set {item}" for item in train_items))
    if seed is not None:
        train_values["seed"] = seed
    train = TrainConfig(**train_values)
    train.validate("--seed" if seed is not None else where)
    model_config = _build_model_config(model_config_class, model_values, where)
    return ResolvedConfig(name, _plain(dataclasses.asdict(model_config)), train)


def _build_model_config(model_config_class: type, values: Mapping[str, Any], where: str) -> Any:
    try:
        return model_config_class(**values)
    except (TypeError, ValueError) as exc:
        raise RecipeError(f"{where}: invalid model_config ({shorten(exc, 200)})") from exc


def _locate(key: str, model_types: Mapping[str, Any], train_types: Mapping[str, Any]) -> tuple[str, str]:
    """Which section a ``--set`` key addresses."""
    section, dot, rest = key.partition(".")
    if dot:
        if section not in ("train", "model_config"):
            raise RecipeError(f"--set {key}: the prefix must be 'train.' or 'model_config.'")
        types_ = train_types if section == "train" else model_types
        if rest not in types_:
            raise RecipeError(f"--set {key}: unknown {section} key '{rest}'; known: {', '.join(sorted(types_))}")
        return section, rest
    in_train, in_model = key in train_types, key in model_types
    if in_train and in_model:
        raise RecipeError(f"--set {key}: both a training and a model key; write train.{key} or model_config.{key}")
    if in_train:
        return "train", key
    if in_model:
        return "model_config", key
    raise RecipeError(
        f"--set {key}: unknown key; training keys: {', '.join(sorted(train_types))}; "
        f"model keys: {', '.join(sorted(model_types)) or 'none'}"
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
    path = run_dir / "config.yaml"
    if not path.is_file():
        raise RunDirectoryError(f"{run_dir}: not a run directory (no config.yaml); nothing to resume")
    data = load_recipe(path)
    if not data.get("model"):
        raise InputError(path, None, "no 'model' key naming the backend")
    return resolve_config(model_name=data["model"], model_config_class=model_config_class_for(data["model"]),
                          recipe=data, where=str(path))
