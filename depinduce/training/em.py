"""EM training of the DMV (objective ``em``) with the engine's run contract (``depinduce train --model dmv``).

EM is not a sequence of gradient steps, so the DMV does not go through the engine's optimiser loop; this trainer
is the engine's :class:`~depinduce.training.engine.Trainer` with its own setup and loop and everything else
shared: the recipe/config resolution, ``config.yaml``, ``vocab.json`` (here the class inventory of the token
view), ``metrics.jsonl``, ``manifest.json`` (data checksums, outcome), ``model.pt`` and ``last.pt`` written
atomically by :mod:`depinduce.training.checkpoint`, ``--resume``, ``--max-time``, SIGTERM/SIGINT, ``select`` and
the dev evaluation through the parse pipeline (:func:`~depinduce.training.evaluation.parsing_metrics`).

Data: ``train.conllu`` of the data folder with punctuation hidden exactly as ``parse`` hides it, sentences of at
most ``train.max_length`` words (WSJ10: 10).  One "epoch" = one EM iteration (batch EM over the whole training
set): an E-step (inside-outside by autograd, :meth:`DMV.expected_counts`) whose log-likelihood is recorded as
``train_loss`` (negative log-likelihood per token) with the dev metrics of those same parameters, then the M-step.
``train.epochs`` caps the iterations; EM stops for good ("early_stop") when the loss improves by less than
``model_config.tolerance`` relative to it.  ``train.eval_every`` N > 0 parses dev only every N iterations (the
E-step takes well under a second, parsing dev several).  The first parameters come from the harmonic
initialiser (:meth:`DMV.harmonic_counts`).  EM is deterministic: a resumed run ends where an uninterrupted one
does.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from depinduce.data.punct import sentence_punct_mask
from depinduce.data.vocab import Vocab
from depinduce.errors import InputError, ModelError, RecipeError, UsageError
from depinduce.io.conllu_format import read_conllu
from depinduce.parsing import visible_sentence
from depinduce.structures.decode import DECODERS
from depinduce.structures.sentence import Sentence
from depinduce.training import batching, distributed
from depinduce.training.checkpoint import (
    FORMAT, VERSION, atomic_torch_save, cpu_state_dict, load_train_state, save_model,
)
from depinduce.training.config import LOWER_IS_BETTER
from depinduce.training.engine import (
    Log, Progress, Trainer, TrainOptions, TrainResult, _StopSignal, _fmt, _summary, capped_reserve,
)
from depinduce.training.evaluation import DevTreebank, check_selectable, parsing_metrics
from depinduce.training.run import clear_run_files, command_line

_ENDINGS = {
    "completed": "finished the EM iterations (train.epochs)",
    "early_stop": "converged (log-likelihood gain below model_config.tolerance)",
    "max_time": "stopped at the --max-time budget",
    "max_tokens": "stopped at the --max-tokens budget",
    "signal": "stopped on request",
}


# What a backend with objective "em" provides (the DMV does): build_vocab(sentences, config, normalization) and
# tag_column(config) on the class; classes(sentences), tables(), expected_counts(rows) -> (log Z, counts),
# initial_counts(rows) and set_counts(counts) (the M-step) on the model.  Found through the registry, never by name.
EM_HOOKS = ("build_vocab", "tag_column", "classes", "tables", "expected_counts", "initial_counts", "set_counts")


class EMTrainer(Trainer):
    """Batch EM over the training set, one iteration per "epoch" (see the module docstring)."""

    def __init__(self, options: TrainOptions, context: distributed.DistContext, log: Log) -> None:
        if context.distributed:
            raise UsageError("EM training (objective 'em') runs in one process; run it without torchrun")
        self._open_run(options, context, log, "train.conllu", "`depinduce preprocess ptb` (or ud)")
        cfg = self.train_config
        train_file = self.data_dir / "train.conllu"
        # the words and tags ``parse`` shows the model: punctuation hidden by the same rule
        sentences = [visible_sentence(s, sentence_punct_mask(s)) for s in read_conllu(str(train_file))]
        sentences = [s for s in sentences if s.words and (cfg.max_length is None or len(s) <= cfg.max_length)]
        if not sentences:
            raise RecipeError(f"no training sentence has at most max_length={cfg.max_length} words")
        missing = [hook for hook in EM_HOOKS if not hasattr(self.model_class, hook)]
        if missing:
            raise ModelError(f"model '{self.config.model}' declares objective 'em' but lacks {', '.join(missing)}")
        model_config = self.model_class.config_class(**self.config.model_config)
        self._check_tags(sentences, train_file, self.model_class.tag_column(model_config))
        if options.resume:
            self.vocab = Vocab.load(self.run_dir.vocab)
        else:
            self.vocab = self.model_class.build_vocab(sentences, model_config,
                                                      Vocab.load(self.data_dir / "vocab.json").normalization)
        torch.manual_seed(cfg.seed)  # EM itself draws nothing; the seed is recorded for the contract
        model = self.model_class.from_config(self.config.model_config, self.vocab, where=str(self.run_dir.config))
        self.model: Any = model.to(context.device)
        self.rows = self.model.classes(sentences)
        self.n_tokens = sum(len(r) for r in self.rows)
        self.batches = batching.eval_order([len(r) for r in self.rows], cfg.batch_tokens)
        self.params = list(self.model.parameters())
        self.dev_rows = None
        self.dev_treebank = DevTreebank.load(self.data_dir) if cfg.dev_parse else DevTreebank()
        if self.model_class.tag_column(model_config) == "upos":  # dev.trees has Penn tags: no UF1 for UPOS
            self.dev_treebank = DevTreebank(self.dev_treebank.dependencies, None)
        self._check_selection()
        self.progress = Progress()
        self.previous_loss: float | None = None
        self.last_record: dict[str, Any] = {}
        self.fastest_e_step, self.longest_eval = float("inf"), 0.0  # this invocation's, for the time budget
        self.stop = _StopSignal()
        self._prepare_em_run_dir()
        if options.resume:
            self._resume_em()
        else:
            self.model.set_counts(self.model.initial_counts(self.rows))
        self.wall_base = self.progress.wall_seconds

    @staticmethod
    def _check_tags(sentences: list[Sentence], path: Path, view: str | None) -> None:
        """A tag view needs that column on every training token: the first sentence without is a located error."""
        if view is None:
            return
        for sentence in sentences:
            tags = sentence.upos if view == "upos" else sentence.xpos
            if tags is None or any(tag in ("_", "") for tag in tags):
                raise InputError(str(path), sentence.line, f"no {view.upper()} tags in the sentence starting here; "
                                 f"model_config.view={view} trains on them (view=words needs none)")

    def _check_selection(self) -> None:
        cfg = self.train_config
        if cfg.decoder not in (*DECODERS, *self.model_class.own_decoders):
            raise RecipeError(f"train.decoder: '{cfg.decoder}' does not apply to model '{self.config.model}'; "
                              "choose one of "
                              f"{', '.join((*DECODERS, *self.model_class.own_decoders))}")
        if cfg.select in ("dev_loss", "dev_ppl"):
            raise RecipeError(f"select: {cfg.select} does not apply to model '{self.config.model}' (no dev text "
                              "loss); use "
                              "train_loss (EM's likelihood) or a dev parsing metric")
        check_selectable(cfg.select, self.dev_treebank.available(self.model_class), has_dev_text=False)
        self.select = cfg.select

    def _prepare_em_run_dir(self) -> None:
        if not self.options.resume:
            if self.options.force and self.run_dir.path.is_dir():
                clear_run_files(self.run_dir.path)
            self.run_dir.create(self.config.to_yaml(), self.data_dir, vocab_json=self.vocab.to_json())

    def _resume_em(self) -> None:
        state = load_train_state(self.run_dir.last)
        try:
            self.model.load_state_dict(state["model"])
            self.progress = Progress(**state["progress"])
        except (RuntimeError, TypeError) as exc:
            first = str(exc).strip().splitlines()[0]
            raise ModelError(f"{self.run_dir.last}: does not fit the configured model ({first})") from exc
        self.previous_loss = (state.get("em") or {}).get("previous_loss")
        self.run_dir.trim_metrics(self.progress.step)
        self.log(f"resuming {self.run_dir.path} at EM iteration {self.progress.step + 1}")

    # -------------------------------------------------------------------------------------------- loop

    def run(self) -> TrainResult:
        cfg = self.train_config
        self.run_dir.start_manifest(
            model=self.config.model, seed=cfg.seed, data_dir=self.data_dir,
            command=self.options.command or command_line(), device=str(self.context.device), world_size=1,
            threads=torch.get_num_threads(), resumed_from_step=self.progress.step if self.options.resume else None,
            settings=self.told())
        self._record_baseline()
        if self.options.resume and self.progress.stopped_early:
            reason = "early_stop"
        else:
            self.log(f"training {self.config.model} by EM ({len(self.vocab):,} classes) on "
                     f"{len(self.rows):,} sentences ({self.n_tokens:,} tokens), up to {cfg.epochs} iterations")
            with self.stop.installed():
                reason = self._em_loop()
        if not self.run_dir.model.is_file():
            save_model(self.run_dir.model, cpu_state_dict(self.model))
        result = TrainResult(self.run_dir.path, reason, self.progress.step, self.progress.epoch, self.select,
                             self.progress.best, self.last_record)
        self.run_dir.finish_manifest(self._outcome(result))
        self.log(f"{_ENDINGS[reason]} after {result.step} EM iterations; best {self.select}: {_fmt(result.best)}; "
                 f"run saved in {self.run_dir.path}")
        return result

    def _em_loop(self) -> str:
        cfg, progress = self.train_config, self.progress
        while progress.step < cfg.epochs:
            started = time.monotonic()
            log_likelihood, counts = self._e_step()
            elapsed = time.monotonic() - started
            progress.step += 1
            progress.tokens_seen += self.n_tokens
            progress.train_seconds += elapsed
            loss = -log_likelihood / self.n_tokens
            self._evaluate_em(loss, elapsed)
            previous, self.previous_loss = self.previous_loss, loss
            if previous is not None and previous - loss < self.model.config.tolerance * abs(loss):
                progress.stopped_early = True
                self._checkpoint_em()
                return "early_stop"
            self.model.set_counts(counts)  # the M-step
            progress.epoch += 1
            self._checkpoint_em()
            if self.stop.received is not None:
                return "signal"
            if self.deadline is not None and time.monotonic() + self._em_reserve() >= self.deadline:
                return "max_time"
            if self._tokens_spent():
                return "max_tokens"
        return "completed"

    def _e_step(self) -> tuple[float, dict[str, torch.Tensor]]:
        """Σ log P(sentence) and the summed expected counts over every training sentence."""
        total = 0.0
        counts = {name: torch.zeros_like(table) for name, table in self.model.tables().items()}
        for batch in self.batches:
            log_z, batch_counts = self.model.expected_counts([self.rows[k] for k in batch])
            total += log_z
            for name, value in batch_counts.items():
                counts[name] += value
        return total, counts

    def _em_reserve(self) -> float:
        """Seconds one more iteration (E-step, evaluation, checkpoint) takes: the fastest E-step so far (the
        first pays for warm-up) and the longest evaluation (with ``eval_every``, some parse dev and some do not),
        at most the engine's share of the budget (:data:`~depinduce.training.engine.RESERVE_SHARE`), so a slow
        first iteration cannot end a budget."""
        record = self.last_record
        self.fastest_e_step = min(self.fastest_e_step, float(record.get("iteration_s", 0.0)))
        self.longest_eval = max(self.longest_eval, float(record.get("eval_s", 0.0)))
        return capped_reserve(1.2 * (self.fastest_e_step + self.longest_eval) + 0.5, self.started, self.deadline)

    def _evaluate_em(self, loss: float, elapsed: float) -> None:
        """Record the E-step's parameters: train loss, dev parsing metrics (when due), model.pt when best."""
        cfg, progress = self.train_config, self.progress
        started = time.monotonic()
        record: dict[str, Any] = {"step": progress.step, "epoch": progress.step, "train_loss": loss,
                                  "train_tokens": self.n_tokens, "tokens_seen": progress.tokens_seen,
                                  "tokens_per_s": self.n_tokens / max(elapsed, 1e-9),
                                  "iteration_s": round(elapsed, 3)}
        due = not cfg.eval_every or progress.step % cfg.eval_every == 0 or progress.step == cfg.epochs
        if due and self.dev_treebank.available(self.model_class):
            self.model.eval()
            record.update(parsing_metrics(self.model, self.dev_treebank, decoder=cfg.decoder,
                                          progress=not self.options.quiet))
        value = record.get(self.select)
        lower = self.select in LOWER_IS_BETTER
        improved = value is not None and (progress.best is None
                                          or (value < progress.best if lower else value > progress.best))
        if improved:
            progress.best, progress.best_step, progress.bad_evals = value, progress.step, 0
            save_model(self.run_dir.model, cpu_state_dict(self.model))
        elif value is not None:
            progress.bad_evals += 1
        progress.evaluations += 1
        progress.wall_seconds = self._wall_seconds()
        record.update({"select": self.select, "best": improved, "best_value": progress.best,
                       "eval_s": round(time.monotonic() - started, 3), "train_s": round(progress.train_seconds, 3),
                       "wall_s": round(progress.wall_seconds, 3)})
        self.last_record = record
        self.run_dir.append_metrics(record)
        self.log(_summary(record, self.select))

    def _checkpoint_em(self) -> None:
        """last.pt: the current (post-M-step) tables and where EM stands; the contract's other keys are empty
        because EM has no optimiser, schedule or random state."""
        self.progress.wall_seconds = self._wall_seconds()
        state = {
            "format": FORMAT, "version": VERSION, "model": cpu_state_dict(self.model), "optimizer": {},
            "schedule": {}, "rng": [], "position": {"epoch": self.progress.epoch, "batches_done": 0},
            "progress": asdict(self.progress), "world_size": 1, "em": {"previous_loss": self.previous_loss},
        }
        atomic_torch_save(state, self.run_dir.last)
