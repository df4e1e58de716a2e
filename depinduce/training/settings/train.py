""":class:`TrainConfig`: a recipe's ``train`` section, its settings nested by concern, its ranges checked.

Recipes, ``--set`` and ``config.yaml`` write flat keys (``lr: 1e-3``); a recipe may also write a group as a
section (``optimiser: {lr: 1e-3}``).  :func:`flatten` turns either into the flat form the checks name
(``train.lr``), and :class:`TrainConfig` takes flat keys too, placing each in its group.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from depinduce.display import quote
from depinduce.errors import RecipeError
from depinduce.training.settings.groups import (
    FLAT_KEYS, GROUP_OF, GROUPS, STRICT, Batches, Budget, Execution, LrSchedule, MaskedLM, NextWord, Optimiser,
    Records, Selection, Start,
)
from depinduce.training.settings.rules import FieldRules

# The train section's keys and types (the groups' fields under their flat names).
TRAIN_RULES = FieldRules("train", {key: GROUPS[GROUP_OF[key]].model_fields[key].annotation for key in FLAT_KEYS})
_RANGES = "train_ranges"  # the pydantic error type of the range checks


def flatten(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A ``train`` mapping with group sections (``optimiser: {lr: …}``) as flat keys; keys that are neither
    stay as given for :meth:`FieldRules.check` to name (a group's unknown key as ``group.key``)."""
    flat: dict[str, Any] = {}
    written: dict[str, str] = {}  # flat key -> as the recipe wrote it
    for key, value in values.items():
        if key in GROUPS and not isinstance(value, Mapping):
            raise RecipeError(f"{where}: train.{key} must be a mapping of its keys "
                              f"({', '.join(GROUPS[key].model_fields)}), not {quote(value)}")
        items = value.items() if key in GROUPS else [(None, value)]
        for name, item in items:
            spelt = key if name is None else f"{key}.{name}"
            flat_key = spelt if name is None or GROUP_OF.get(name) != key else name
            if flat_key in flat:
                raise RecipeError(f"{where}: train.{flat_key} is given twice "
                                  f"(as {written[flat_key]} and as {spelt})")
            flat[flat_key], written[flat_key] = item, spelt
    return flat


class TrainConfig(BaseModel):
    """Optimisation settings by concern; the defaults are StructFormer's paper setting (see
    docs/models-reference.md).  ``TrainConfig(lr=1e-3)`` places flat keys in their groups."""

    model_config = STRICT

    budget: Budget = Budget()
    batches: Batches = Batches()
    optimiser: Optimiser = Optimiser()
    lr_schedule: LrSchedule = LrSchedule()
    selection: Selection = Selection()
    records: Records = Records()
    masked_lm: MaskedLM = MaskedLM()
    next_word: NextWord = NextWord()
    start: Start = Start()
    execution: Execution = Execution()

    @classmethod
    def from_values(cls, values: Mapping[str, Any], where: str) -> TrainConfig:
        """A recipe's ``train`` mapping (flat keys or group sections) checked: unknown keys, types, then
        ranges, each failure one :class:`RecipeError` line blamed on ``where``."""
        checked = TRAIN_RULES.check(flatten(values, where), where)
        try:
            return cls.model_validate(checked)
        except ValidationError as exc:
            raise RecipeError(f"{where}: {_problems(exc)}") from None

    def flat(self) -> dict[str, Any]:
        """Every setting under its flat key, in the order ``config.yaml`` writes them."""
        return {key: getattr(getattr(self, GROUP_OF[key]), key) for key in FLAT_KEYS}

    @model_validator(mode="before")
    @classmethod
    def _nest(cls, data: Any) -> Any:
        """Flat keys into their groups (a group given as a model or a mapping stays as it is)."""
        if not isinstance(data, Mapping) or not any(key in GROUP_OF for key in data):
            return data
        nested = {key: value for key, value in data.items() if key not in GROUP_OF}
        for key, value in data.items():
            group = GROUP_OF.get(key)
            if group is None:
                continue
            section = nested.get(group, {})
            if not isinstance(section, Mapping) or key in section:
                raise ValueError(f"{key} is given flat and in the {group} group too")
            nested[group] = {**section, key: value}
        return nested

    @model_validator(mode="after")
    def _ranges(self) -> TrainConfig:
        """Range checks the types cannot express, all reported at once, in one line."""
        problems = range_problems(self)
        if problems:
            raise PydanticCustomError(_RANGES, "{problems}", {"problems": "; ".join(problems)})
        return self


def _problems(exc: ValidationError) -> str:
    """A :class:`ValidationError` of :class:`TrainConfig` in one line: the range problems, or else pydantic's
    first complaint with where it is."""
    errors = exc.errors()
    for error in errors:
        if error["type"] == _RANGES:
            return str(error["ctx"]["problems"])
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"train.{where}: {first['msg']}" if where else first["msg"]


def range_problems(cfg: TrainConfig) -> list[str]:
    """What is out of range in ``cfg``, in words (the checks span groups: bptt and batch_tokens, …)."""
    budget, batches, optimiser, schedule = cfg.budget, cfg.batches, cfg.optimiser, cfg.lr_schedule
    selection, records, masked_lm, next_word = cfg.selection, cfg.records, cfg.masked_lm, cfg.next_word
    problems = []
    for name, value in (("epochs", budget.epochs), ("batch_tokens", batches.batch_tokens), ("bptt", next_word.bptt)):
        if value < 1:
            problems.append(f"{name} must be at least 1")
    if batches.max_length is not None and batches.max_length < 1:
        problems.append("max_length must be at least 1 (or null)")
    if not 0.0 < masked_lm.mask_rate < 1.0:
        problems.append("mask_rate must be between 0 and 1")
    if not (optimiser.lr > 0 and math.isfinite(optimiser.lr)):
        problems.append("lr must be positive")
    if optimiser.parser_lr is not None and not (optimiser.parser_lr > 0 and math.isfinite(optimiser.parser_lr)):
        problems.append("parser_lr must be positive (or null for lr)")
    if batches.curriculum_start is not None and batches.curriculum_start < 1:
        problems.append("curriculum_start must be at least 1 word (or null for no curriculum)")
    if batches.curriculum_step < 0:
        problems.append("curriculum_step must not be negative")
    if batches.curriculum_start is not None and next_word.lm_mode == "continuous":
        problems.append("a length curriculum picks sentences; lm_mode continuous reads the text as one stream "
                        "(add --set curriculum_start=null)")
    if records.curve_every_tokens is not None and records.curve_every_tokens < 1:
        problems.append("curve_every_tokens must be a positive number of training tokens (or null)")
    if not (0 <= optimiser.beta1 < 1 and 0 <= optimiser.beta2 < 1):
        problems.append("beta1 and beta2 must be in [0, 1)")
    if optimiser.eps <= 0 or optimiser.weight_decay < 0 or schedule.min_lr < 0:
        problems.append("eps must be positive; weight_decay and min_lr must not be negative")
    if optimiser.clip is not None and optimiser.clip <= 0:
        problems.append("clip must be positive (or null for no clipping)")
    if masked_lm.loss_chunks is not None and masked_lm.loss_chunks < 1:
        problems.append("loss_chunks must be at least 1 (or null for the batch's mean loss)")
    if not 0 < schedule.plateau_factor < 1 or schedule.plateau_patience < 0:
        problems.append("plateau_factor must be in (0, 1) and plateau_patience at least 0")
    for name, value in (("warmup_steps", schedule.warmup_steps), ("eval_every", selection.eval_every),
                        ("checkpoint_every", records.checkpoint_every), ("log_every", records.log_every)):
        if value < 0:
            problems.append(f"{name} must not be negative")
    if budget.max_time is not None and not (budget.max_time > 0 and math.isfinite(budget.max_time)):
        problems.append("max_time must be a positive number of minutes (or null)")
    if budget.max_tokens is not None and budget.max_tokens < 1:
        problems.append("max_tokens must be a positive number of training tokens (or null)")
    if selection.patience is not None and selection.patience < 1:
        problems.append("patience must be at least 1 (or null)")
    if next_word.lm_mode == "continuous" and batches.batch_tokens < next_word.bptt:
        problems.append(f"continuous text needs batch_tokens ({batches.batch_tokens}) of at least one bptt "
                        f"({next_word.bptt}): batch_tokens // bptt streams are read in parallel")
    return problems

