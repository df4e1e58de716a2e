"""EM training of the DMV (objective ``em``) with the engine's run contract (``depinduce train --model dmv``).

EM is not a sequence of gradient steps, so the DMV does not go through the gradient loop; this loop has its own
setup and iterations and shares the run (:class:`~depinduce.training.trainrun.TrainingRun`) with it: the
recipe/config resolution, ``config.yaml``, ``vocab.json`` (here the class inventory of the token
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
from pathlib import Path
from typing import Any

import torch

from depinduce.data.punct import sentence_punct_mask
from depinduce.data.vocab import Vocab
from depinduce.errors import InputError, ModelError, RecipeError, UsageError
from depinduce.io.conllu_format import read_conllu
from depinduce.io.filenames import TRAIN_CONLLU, VOCAB_FILE
from depinduce.models.contracts import EMBackend
from depinduce.models.views import visible_sentence
from depinduce.structures.sentence import Sentence
from depinduce.training import batching, distributed
from depinduce.training.checkpoint import cpu_state_dict
from depinduce.training.evaluation import DevTreebank, check_selectable, parsing_metrics
from depinduce.training.options import TrainOptions, TrainResult
from depinduce.training.trainrun import Log, Progress, TrainingRun

# How EM words the ends of its own (the budgets and a stop on request end it as any run: trainrun.END_REASONS).
EM_ENDINGS = {
    "completed": "finished the EM iterations (train.epochs)",
    "early_stop": "converged (log-likelihood gain below model_config.tolerance)",
}




class EMLoop:
    """Batch EM over the training set, one iteration per "epoch" (see the module docstring)."""

    def __init__(self, options: TrainOptions, context: distributed.DistContext, log: Log) -> None:
        if context.distributed:
            raise UsageError("EM training (objective 'em') runs in one process; run it without torchrun")
        self.run = run = TrainingRun(options, context, log, data_file=TRAIN_CONLLU,
                                     made_by="`depinduce preprocess ptb` (or ud)")
        self.log, cfg, model_class = log, run.train_config, run.model_class

        train_file = run.data_dir / TRAIN_CONLLU
        # the words and tags ``parse`` shows the model: punctuation hidden by the same rule
        sentences = [visible_sentence(s, sentence_punct_mask(s)) for s in read_conllu(str(train_file))]
        max_length = cfg.batches.max_length
        sentences = [s for s in sentences if s.words and (max_length is None or len(s) <= max_length)]
        if not sentences:
            raise RecipeError(f"no training sentence has at most max_length={max_length} words")
        missing = [hook for hook in EMBackend.hooks if not hasattr(model_class, hook)]
        if not issubclass(model_class, EMBackend) and missing:
            raise ModelError(f"model '{run.config.model}' declares objective 'em' but lacks {', '.join(missing)}")
        model_config = model_class.config_class(**run.config.model_config)
        _check_tags(sentences, train_file, model_class.tag_column(model_config))
        if options.resume:
            self.vocab = Vocab.load(run.dir.vocab)
        else:
            self.vocab = model_class.build_vocab(sentences, model_config,
                                                 Vocab.load(run.data_dir / VOCAB_FILE).normalization)
        torch.manual_seed(cfg.execution.seed)  # EM itself draws nothing; the seed is recorded for the contract
        model = model_class.from_config(run.config.model_config, self.vocab, where=str(run.dir.config))
        self.model: Any = model.to(context.device)
        self.rows = self.model.classes(sentences)
        self.n_tokens = sum(len(r) for r in self.rows)
        self.batches = batching.eval_order([len(r) for r in self.rows], cfg.batches.batch_tokens)
        self.dev_treebank = DevTreebank.load(run.data_dir) if cfg.selection.dev_parse else DevTreebank()
        if model_class.tag_column(model_config) == "upos":  # dev.trees has Penn tags: no UF1 for UPOS
            self.dev_treebank = DevTreebank(self.dev_treebank.dependencies, None, self.dev_treebank.folder)
        self._check_selection()
        self.progress = Progress()
        self.previous_loss: float | None = None
        self.last_record: dict[str, Any] = {}
        self.fastest_e_step, self.longest_eval = float("inf"), 0.0  # this invocation's, for the time budget
        run.lay_out(vocab_json=self.vocab.to_json())
        if options.resume:
            self._resume()
        else:
            self.model.set_counts(self.model.initial_counts(self.rows))
        run.continue_clock(self.progress)

    def _check_selection(self) -> None:
        run = self.run
        run.check_decoder()
        select = run.train_config.selection.select
        if select in ("dev_loss", "dev_ppl"):
            raise RecipeError(f"select: {select} does not apply to model '{run.config.model}' (no dev text "
                              "loss); use train_loss (EM's likelihood) or a dev parsing metric")
        check_selectable(select, self.dev_treebank.available(run.model_class), has_dev_text=False)
        run.select = select

    def _resume(self) -> None:
        state, self.progress = self.run.read_checkpoint(self.model)
        self.previous_loss = (state.get("em") or {}).get("previous_loss")
        self.run.dir.trim_metrics(self.progress.step)
        self.log(f"resuming {self.run.dir.path} at EM iteration {self.progress.step + 1}")

    # -------------------------------------------------------------------------------------------- loop

    def train(self) -> TrainResult:
        run, cfg = self.run, self.run.train_config
        run.start(self.progress, self.dev_treebank)
        if run.options.resume and self.progress.stopped_early:
            reason = "early_stop"
        else:
            self.log(f"training {run.config.model} by EM ({len(self.vocab):,} classes) on "
                     f"{len(self.rows):,} sentences ({self.n_tokens:,} tokens), up to {cfg.budget.epochs} iterations")
            with run.stop.installed():
                reason = self._iterations()
        return run.finish(reason, self.progress, self.model, self.last_record,
                          done=f"after {self.progress.step} EM iterations", endings=EM_ENDINGS)

    def _iterations(self) -> str:
        cfg, progress = self.run.train_config, self.progress
        while progress.step < cfg.budget.epochs:
            started = time.monotonic()
            log_likelihood, counts = self._e_step()
            elapsed = time.monotonic() - started
            progress.step += 1
            progress.tokens_seen += self.n_tokens
            progress.train_seconds += elapsed
            loss = -log_likelihood / self.n_tokens
            self._evaluate(loss, elapsed)
            previous, self.previous_loss = self.previous_loss, loss
            if previous is not None and previous - loss < self.model.config.tolerance * abs(loss):
                progress.stopped_early = True
                self._checkpoint()
                return "early_stop"
            self.model.set_counts(counts)  # the M-step
            progress.epoch += 1
            self._checkpoint()
            reason = self.run.stop_reason(progress, self._reserve)
            if reason is not None:
                return reason
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

    def _reserve(self) -> float:
        """Seconds one more iteration (E-step, evaluation, checkpoint) takes: the fastest E-step so far (the
        first pays for warm-up) and the longest evaluation (with ``eval_every``, some parse dev and some do not),
        at most the run's share of the budget (:data:`~depinduce.training.budgets.RESERVE_SHARE`), so a slow
        first iteration cannot end a budget."""
        record = self.last_record
        self.fastest_e_step = min(self.fastest_e_step, float(record.get("iteration_s", 0.0)))
        self.longest_eval = max(self.longest_eval, float(record.get("eval_s", 0.0)))
        return self.run.kept_back(1.2 * (self.fastest_e_step + self.longest_eval) + 0.5)

    def _evaluate(self, loss: float, elapsed: float) -> None:
        """Record the E-step's parameters: train loss, dev parsing metrics (when due), model.pt when best."""
        run, cfg, progress = self.run, self.run.train_config, self.progress
        started = time.monotonic()
        record: dict[str, Any] = {"step": progress.step, "epoch": progress.step, "train_loss": loss,
                                  "train_tokens": self.n_tokens, "tokens_seen": progress.tokens_seen,
                                  "tokens_per_s": self.n_tokens / max(elapsed, 1e-9),
                                  "iteration_s": round(elapsed, 3)}
        every = cfg.selection.eval_every
        due = not every or progress.step % every == 0 or progress.step == cfg.budget.epochs
        if due and self.dev_treebank.available(run.model_class):
            self.model.eval()
            record.update(parsing_metrics(self.model, self.dev_treebank, decoder=cfg.selection.decoder,
                                          progress=not run.options.quiet))
        improved = run.judge(progress, record.get(run.select), self.model, missing_is_bad=False)
        progress.wall_seconds = run.wall_seconds()
        self.last_record = run.record_evaluation(record, progress, improved, time.monotonic() - started)

    def _checkpoint(self) -> None:
        """last.pt: the current (post-M-step) tables and where EM stands; the contract's other keys are empty
        because EM has no optimiser, schedule or random state."""
        self.run.write_checkpoint(self.progress, cpu_state_dict(self.model),
                                  position={"epoch": self.progress.epoch, "batches_done": 0},
                                  em={"previous_loss": self.previous_loss})


def _check_tags(sentences: list[Sentence], path: Path, view: str | None) -> None:
    """A tag view needs that column on every training token: the first sentence without is a located error."""
    if view is None:
        return
    for sentence in sentences:
        tags = sentence.upos if view == "upos" else sentence.xpos
        if tags is None or any(tag in ("_", "") for tag in tags):
            raise InputError(str(path), sentence.line, f"no {view.upper()} tags in the sentence starting here; "
                             f"model_config.view={view} trains on them (view=words needs none)")
