"""The groups of training settings, one pydantic model per concern; the defaults are StructFormer's paper
setting (see docs/models-reference.md).

Each field keeps the flat name recipes use, so a flat key names its group unambiguously (:data:`GROUP_OF`).  The
types are checked strictly (a bool is not an int; ints widen to floats); ranges, which may span groups, are
checked by :class:`depinduce.training.settings.train.TrainConfig`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

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

# strict: a recipe's true is not an epoch count; frozen: a run's settings do not change under it
STRICT = ConfigDict(strict=True, frozen=True, extra="forbid")


class Group(BaseModel):
    """One concern's settings."""

    model_config = STRICT


class Budget(Group):
    """How long the run trains: whichever of its limits comes first ends it."""

    epochs: int = 100
    # Minutes this recipe is sized for: training stops cleanly (evaluated, checkpointed) within them; --max-time
    # overrides it; null: no budget (the epochs decide).  Per invocation, as --max-time.
    max_time: float | None = None
    # Training tokens (the words of the training batches, summed over ranks) the whole run may read: it stops
    # cleanly (evaluated, checkpointed) once it has read them, on any machine; --max-tokens overrides it; null: no
    # token budget.  Counted over the run, resumes included (unlike max_time).
    max_tokens: int | None = None


class Batches(Group):
    """Which training sentences each step reads."""

    # Padded tokens per batch (sentences x longest sentence); a longer sentence than this forms its own batch.
    batch_tokens: int = 4096
    # Training sentences longer than this many words are skipped (dev is never filtered).
    max_length: int | None = None
    # Length curriculum (off: null): epoch e trains only on sentences of at most curriculum_start + e *
    # curriculum_step words (never more than max_length), so the first epochs are short sentences only — the
    # Compound PCFG's schedule (start 30, +1 per epoch; Kim et al. 2019), Spitkovsky et al.'s "baby steps".
    curriculum_start: int | None = None
    curriculum_step: int = 1


class Optimiser(Group):
    """The optimiser and its gradient clipping."""

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
    # torch's fused Adam/AdamW (one op per step for every parameter, CPU and CUDA): the same update to float
    # round-off; false: torch's default (a loop over the parameters on the CPU, foreach ops on CUDA).
    fused_adam: bool = True


class LrSchedule(Group):
    """How the learning rate moves: plateau: ReduceLROnPlateau on the dev loss after each evaluation; linear:
    warmup then linear decay to min_lr at the last step; constant: no schedule."""

    schedule: Literal["plateau", "linear", "constant"] = "plateau"
    plateau_factor: float = 0.5
    plateau_patience: int = 2
    warmup_steps: int = 0
    min_lr: float = 0.0


class Selection(Group):
    """How dev is measured and which model is kept."""

    # The metric that picks model.pt; patience = evaluations without improvement before stopping (null: never).
    select: SelectMetric = "dev_ppl"
    patience: int | None = None
    # Evaluate every N optimiser steps as well as after every epoch (0: after epochs only).
    eval_every: int = 0
    # Parsing metrics on dev (when dev has gold trees): the decoder, and whether to compute them at all.
    # mst, eisner, argmax or the backend's own (the authors') decoder, checked against the backend when training
    # starts (``Backend.own_decoders``).
    decoder: str = "mst"
    dev_parse: bool = True
    # Dev masks are drawn once from this seed, so dev perplexity is comparable across epochs and runs.
    dev_mask_seed: int = 1234


class Records(Group):
    """What the run writes down as it goes, beside model selection."""

    # The training loss over the last N optimiser steps, every N steps, in metrics.jsonl ("train_log": true) and
    # train.log (0: none).
    log_every: int = 100
    # Write last.pt every N optimiser steps as well as after every epoch (0: after epochs only).
    checkpoint_every: int = 0
    # Learning-curve points: each time the run has read another multiple of this many training tokens, dev is
    # measured and recorded in metrics.jsonl ("curve": true) without touching the schedule, model selection or
    # patience — the run trains exactly as without them (null: none).
    curve_every_tokens: int | None = None
    # TensorBoard event files in RUN_DIR/tensorboard with every number of metrics.jsonl (the tensorboard extra).
    tensorboard: bool = False


class MaskedLM(Group):
    """The masked language model's objective."""

    mask_rate: float = 0.3
    # Split each batch into this many runs of consecutive sentences and minimise the sum of their mean losses,
    # each with the regularizer, as the Probabilistic Transformer's trainer does (4 chunks of 16 sentences per
    # 64-sentence batch: gradients 4x a mean's); null: the batch's mean loss.
    loss_chunks: int | None = None


class NextWord(Group):
    """Next-word language models (PRPN): ``sentences`` trains on each sentence alone (state reset per sentence);
    ``continuous`` reads the training text as one stream, batch_tokens // bptt streams in parallel, with truncated
    backpropagation every ``bptt`` tokens (the paper's language-model mode)."""

    lm_mode: Literal["sentences", "continuous"] = "sentences"
    bptt: int = 35


class Start(Group):
    """What training starts from besides fresh weights."""

    # Refining backends (RNGTr): CoNLL-U parses of train.conllu / dev.conllu (same sentences, same order) whose
    # graphs the first pass reads — `depinduce train --init-train/--init-dev` set them (absolute paths); null:
    # start from no graph.
    init_train: str | None = None
    init_dev: str | None = None
    # Start from the weights (model.pt) of another run of the same backend on the same vocabulary, e.g. RNGTr
    # from a trained SynTr — `depinduce train --warm-start RUN_DIR` sets it (absolute path).
    warm_start: str | None = None


class Execution(Group):
    """How the steps are computed: the seed of every random draw, the numbers' precision, DDP."""

    seed: int = 0
    # fp32: the authors' function to round-off.  bf16: each step's forward pass under bfloat16 autocast (weights,
    # optimiser, loss, evaluation and parsing stay float32; StructFormer and UDGN only) — faster on CPUs with
    # bfloat16 instructions and on GPUs, numbers rounded differently (training/precision.py).
    # tf32: float32 storage with TF32 matrix products and convolutions on CUDA (refused on the CPU).
    precision: Literal["fp32", "tf32", "bf16"] = "fp32"
    # DDP only: set when the backend has parameters that some batches do not use.
    find_unused_parameters: bool = False
    # GPU speed (docs/guide/gpu.md): torch.compile of the step (forward, loss, backward; reduce-overhead also
    # captures CUDA graphs; cudagraphs captures them without inductor; backends not checked under the compiler
    # refuse it); static_shapes pads batches to a few shapes (auto: when compiled; on CUDA the loss gathers by an
    # index made on the CPU either way, never a read of the device); prefetch prepares batches on a background
    # thread (auto: on CUDA).  None of them changes the function trained.  on/off (or true/false) are taken and
    # kept as words: on is ``default`` for compile.
    compile: Literal["off", "on", "default", "reduce-overhead", "cudagraphs"] | bool = "off"
    static_shapes: Literal["auto", "on", "off"] | bool = "auto"
    prefetch: Literal["auto", "on", "off"] | bool = "auto"

    @field_validator("compile", "static_shapes", "prefetch", mode="before")
    @classmethod
    def _words(cls, value: object, info: ValidationInfo) -> object:
        """A boolean (YAML 1.1's bare on/off) or the word ``on`` as the setting's word: true and ``on`` are ``on``
        (``default`` for compile), false ``off``."""
        if isinstance(value, bool):
            value = "on" if value else "off"
        return "default" if info.field_name == "compile" and value == "on" else value


# The groups under their attribute names on TrainConfig (cfg.optimiser.lr), in the order the docs list them.
GROUPS: dict[str, type[Group]] = {
    "budget": Budget, "batches": Batches, "optimiser": Optimiser, "lr_schedule": LrSchedule,
    "selection": Selection, "records": Records, "masked_lm": MaskedLM, "next_word": NextWord, "start": Start,
    "execution": Execution,
}
# Every flat key, in the order config.yaml has always written them (a run's config.yaml stays byte-identical).
FLAT_KEYS = (
    "epochs", "batch_tokens", "max_length", "curriculum_start", "curriculum_step", "mask_rate", "dev_mask_seed",
    "optimizer", "lr", "parser_lr", "beta1", "beta2", "eps", "weight_decay", "clip", "loss_chunks", "schedule",
    "plateau_factor", "plateau_patience", "warmup_steps", "min_lr", "select", "patience", "eval_every",
    "curve_every_tokens", "checkpoint_every", "log_every", "tensorboard", "decoder", "dev_parse", "seed", "lm_mode",
    "bptt", "init_train", "init_dev", "warm_start", "max_time", "max_tokens", "precision", "find_unused_parameters",
    "compile", "static_shapes", "prefetch", "fused_adam",
)
# flat key -> the group that holds it
GROUP_OF: dict[str, str] = {key: name for name, group in GROUPS.items() for key in group.model_fields}
