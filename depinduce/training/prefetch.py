"""Batches prepared ahead of the step: collated, masked and padded on a background thread, in pinned memory when
the device is a GPU, copied with ``non_blocking=True``.

Why: on a GPU the host's per-sentence work (collating, drawing masks) otherwise sits between two steps while
the device waits.  Determinism: the thread prepares the epoch's batches in their order, drawing the masks from
the run's mask generator, so a batch's masks are those the step would draw itself.  Because the thread runs
ahead, the generator is ahead of the step; :meth:`BatchFeed.pause` (before a checkpoint records the random
states) stops the thread and puts the generator back to its state before the first batch not yet taken, so a
resumed run draws exactly what the uninterrupted run draws.  See ``docs/guide/gpu.md``.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
import torch

Inputs = dict[str, torch.Tensor]
Prepare = Callable[[Sequence[int]], tuple[Inputs, int]]
DEPTH = 2  # batches prepared ahead: enough to hide the host's work, little memory


class BatchFeed:
    """The step loop's batches: ``start`` with the rows of the steps to come, ``take`` each step's (inputs on
    the device, real tokens); ``enabled`` False prepares each batch when it is taken, as the engine always did."""

    def __init__(self, prepare: Prepare, generator: torch.Generator, device: torch.device, *,
                 enabled: bool, depth: int = DEPTH) -> None:
        self.prepare = prepare
        self.generator = generator
        self.device = device
        self.enabled = enabled
        self.depth = depth
        self.pin = enabled and device.type == "cuda"
        self.pending: list[Sequence[int]] = []  # the rows of the batches not yet taken, in order
        self.thread: threading.Thread | None = None
        self.items: queue.Queue[tuple[Inputs, int]] = queue.Queue()
        self.halt = threading.Event()
        self.states: list[torch.Tensor] = []  # the generator's state before each batch the thread began
        self.taken = 0  # batches taken since the thread was launched
        self.error: BaseException | None = None

    def start(self, batches: Sequence[Sequence[int]]) -> None:
        """The rows of the next steps' batches, in order (replacing any not taken)."""
        self.pause()
        self.pending = [list(rows) for rows in batches]

    def take(self, rows: Sequence[int]) -> tuple[Inputs, int]:
        """The next batch, which must be ``rows``, on the device."""
        if not self.enabled or not self.pending or list(rows) != self.pending[0]:
            self.pause()  # not the batch expected: prepare it here, with the generator where the step is
            self.pending = []
            return self._to_device(*self.prepare(rows))
        if self.thread is None:
            self._launch()
        while True:
            try:
                inputs, tokens = self.items.get(timeout=0.1)
                break
            except queue.Empty:
                if self.error is not None or not self.thread.is_alive():
                    error = self.error or RuntimeError("the batch-preparing thread ended early")
                    self.pause()
                    raise error from None
        self.pending.pop(0)
        self.taken += 1
        return self._to_device(inputs, tokens)

    def pause(self) -> None:
        """Stop preparing ahead; the generator returns to its state before the first batch not yet taken."""
        if self.thread is None:
            return
        self.halt.set()
        self.thread.join()
        self.thread = None
        if len(self.states) > self.taken:  # the thread began that batch (or more): undo its draws
            self.generator.set_state(self.states[self.taken])

    def _launch(self) -> None:
        self.halt = threading.Event()
        self.items = queue.Queue(maxsize=self.depth)
        self.states, self.taken, self.error = [], 0, None
        self.thread = threading.Thread(target=self._work, args=(list(self.pending),), name="depinduce-prefetch",
                                       daemon=True)
        self.thread.start()

    def _work(self, batches: list[Sequence[int]]) -> None:
        halt, items = self.halt, self.items
        try:
            for rows in batches:
                if halt.is_set():
                    return
                self.states.append(self.generator.get_state())
                inputs, tokens = self.prepare(rows)
                if self.pin:
                    inputs = {key: value.pin_memory() for key, value in inputs.items()}
                while not halt.is_set():  # a bounded queue: wait for room, or for pause
                    try:
                        items.put((inputs, tokens), timeout=0.05)
                        break
                    except queue.Full:
                        continue
        except BaseException as error:  # noqa: BLE001 - handed to the step, which raises it
            self.error = error

    def _to_device(self, inputs: Inputs, tokens: int) -> tuple[Inputs, int]:
        return {key: value.to(self.device, non_blocking=True) for key, value in inputs.items()}, tokens
