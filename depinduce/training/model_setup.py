"""What the gradient loop trains and reads, set up from the run's config: the vocabularies (the data folder's, a
supervised backend's own over every gold token, or a resumed run's), the data regime the objective asks for
(:mod:`.training_data`), and the model — seeded, checked against the objective and the precision, warm-started
from another run when asked — with its optimiser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from depinduce.data.files import VOCAB_MAX_BYTES, read_text_file
from depinduce.data.tags import TagVocab
from depinduce.data.vocab import Vocab
from depinduce.errors import ModelError, RecipeError
from depinduce.io.filenames import VOCAB_FILE
from depinduce.models.neural import NeuralBackend, load_state_dict
from depinduce.training.config import load_run_config
from depinduce.training.gold_data import GoldData, load_gold_data
from depinduce.training.objectives import Objective, StreamLM
from depinduce.training.optim import build_optimizer
from depinduce.training.precision import check_precision
from depinduce.training.run import RunDir
from depinduce.training.sentence_data import SentenceData
from depinduce.training.stream_data import StreamData
from depinduce.training.training_data import TrainingData
from depinduce.training.trainrun import TrainingRun, derived_seed, trainable_class
from depinduce.training.tree_data import TreeData, WordInputs


def vocabularies(run: TrainingRun) -> tuple[Vocab, TagVocab | None, GoldData | None]:
    """The word vocabulary, the tag vocabulary and the gold data of a supervised backend (which indexes every
    token of train.conllu, punctuation too, and reads UPOS/labels); a resumed run's are its own."""
    resume = run.options.resume
    if run.model_class.capabilities.objective == "supervised":
        gold = load_gold_data(run.data_dir, vocab=Vocab.load(run.dir.vocab) if resume else None,
                              tags=TagVocab.load(run.dir.tags) if resume else None)
        return gold.vocab, gold.tags, gold
    return Vocab.load(run.dir.vocab if resume else run.data_dir / VOCAB_FILE), None, None


def training_data_for(run: TrainingRun, objective: Objective, vocab: Vocab, gold: GoldData | None,
                      word_inputs: WordInputs) -> TrainingData:
    """The data regime of ``objective``: gold trees (supervised), one token stream (continuous LM), else
    sentences."""
    cfg = run.train_config
    if (cfg.start.init_train or cfg.start.init_dev) and not run.model_class.capabilities.refines:
        raise ModelError(f"model '{run.config.model}' does not refine a graph; init_train/init_dev "
                         "(--init-train/--init-dev) apply to refining backends (rngtr)")
    if gold is not None:
        return TreeData(gold, run.data_dir, objective, cfg, run.context, run.log, word_inputs)
    if isinstance(objective, StreamLM):
        return StreamData(run.data_dir, vocab, objective, cfg, run.context)
    return SentenceData(run.data_dir, vocab, objective, cfg, run.context, run.log)


def build_model(run: TrainingRun, objective: Objective, vocab: Vocab, tags: TagVocab | None) -> NeuralBackend:
    """The model on the run's device in training mode: initialised from the seed (the same on every rank),
    or from a warm start's weights."""
    cfg = run.train_config
    torch.manual_seed(derived_seed(cfg.execution.seed, "init"))
    model = run.model_class.from_config(run.config.model_config, vocab, where=str(run.dir.config), tags=tags)
    objective.check_model(model)
    check_precision(cfg.execution.precision, run.config.model, run.model_class.mixed_precision, run.context.device,
                    run.log)
    if cfg.start.warm_start and not run.options.resume:  # a resumed run has its own weights in last.pt
        warm_start(run, model, Path(cfg.start.warm_start), vocab, tags)
    model = model.to(run.context.device)
    model.train()
    return model


def warm_start(run: TrainingRun, model: NeuralBackend, source: Path, vocab: Vocab, tags: TagVocab | None) -> None:
    """Load another run's best weights: same backend, same vocabularies (else the indices mean other words)."""
    other = load_run_config(source, lambda name: trainable_class(name).config_class)
    if other.model != run.config.model:
        raise ModelError(f"{source}: a '{other.model}' run cannot warm-start a '{run.config.model}' model")
    source_dir = RunDir(source)
    pairs = [(source_dir.vocab, vocab.to_json())]
    if tags is not None:
        pairs.append((source_dir.tags, tags.to_json()))
    for path, ours in pairs:
        if not path.is_file() or read_text_file(path, "vocabulary", VOCAB_MAX_BYTES) != ours:
            raise ModelError(f"{path}: differs from this run's {path.name}; warm starts need the run's "
                             "data folder")
    try:
        model.load_state_dict(load_state_dict(source_dir.model))
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0]
        raise ModelError(f"{source_dir.model}: does not fit the configured model ({first})") from exc
    run.log(f"warm start from {source_dir.model}")


def optimiser(run: TrainingRun, model: NeuralBackend, params: list[torch.nn.Parameter]) -> Any:
    """The optimiser of ``params``, the parser's at a rate of its own when ``parser_lr`` asks for one."""
    cfg = run.train_config
    parser_params: list[torch.nn.Parameter] = []
    if cfg.optimiser.parser_lr is not None:
        parser_params = model.parser_parameters()
        if not parser_params:
            raise RecipeError(f"train.parser_lr: model '{run.config.model}' has no parser separate from the rest "
                              "of its network; leave parser_lr null")
    separate = {id(p) for p in parser_params}
    return build_optimizer([p for p in params if id(p) not in separate], cfg, parser_params)
