"""``train.txt`` read as one continuous text (next-word LMs with ``lm_mode: continuous``): ``batch_tokens // bptt``
streams side by side (each rank its own), chunks in text order, the recurrent state carried from chunk to chunk
and kept in ``last.pt``, so a resumed run reads on exactly where it stopped."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from depinduce.data.vocab import Vocab
from depinduce.io.filenames import DEV_TXT, TRAIN_TXT
from depinduce.training import batching, distributed
from depinduce.training.config import TrainConfig
from depinduce.training.corpus_loss import stream_loss
from depinduce.training.objectives import LossModule, StreamLM


class StreamData:
    """The :class:`~.training_data.TrainingData` of one continuous token stream."""

    parse_init = None

    def __init__(self, data_dir: Path, vocab: Vocab, objective: StreamLM, cfg: TrainConfig,
                 context: distributed.DistContext) -> None:
        self.objective, self.context = objective, context
        self.train_rows = batching.read_corpus(data_dir / TRAIN_TXT, vocab)
        self.train_stream = self._stream(self.train_rows, len(vocab), cfg)
        self.n_batches = self.train_stream.n_chunks * context.world_size
        dev_path = data_dir / DEV_TXT
        self.dev_rows = batching.read_corpus(dev_path, vocab) if dev_path.is_file() else None
        self.dev_stream = None if self.dev_rows is None else self._stream(self.dev_rows, len(vocab), cfg)

    def _stream(self, rows: list[list[int]], vocab_size: int, cfg: TrainConfig) -> batching.TokenStream:
        bptt = cfg.next_word.bptt
        return batching.TokenStream(rows, vocab_size, cfg.batches.batch_tokens // bptt, bptt,
                                    rank=self.context.rank, world_size=self.context.world_size)

    def epoch_order(self, epoch: int) -> list[list[int]]:
        """The chunks in text order: one entry per rank and step, each rank reading the same chunk index of its
        own streams."""
        return [[k] for k in range(self.train_stream.n_chunks) for _ in range(self.context.world_size)]

    def inputs(self, rows: Sequence[int], generator: torch.Generator) -> tuple[dict[str, torch.Tensor], int]:
        if rows[0] == 0:  # a new pass over the text starts from a zero state
            self.objective.reset("train")
        self.objective.use("train")
        inputs = self.train_stream.chunk(rows[0])
        return inputs, inputs["targets"].numel()

    def dev_loss(self, loss_module: LossModule, device: torch.device,
                 generator: torch.Generator) -> tuple[float, float]:
        assert self.dev_stream is not None
        return stream_loss(loss_module, self.dev_stream, device=device, name="dev")

    def carried_state(self) -> Any:
        return self.objective.state_dict()

    def restore_carried(self, states: list[Any]) -> None:
        """Every rank's streams as saved; a checkpoint from another number of ranks starts them from zero."""
        if len(states) == self.context.world_size:
            self.objective.load_state_dict(states[self.context.rank], self.context.device)
