"""``torchrun --nproc_per_node 2`` runs the same ``depinduce train`` command with DDP (gloo, CPU): each rank
takes its own batches, gradients are averaged, and the ranks end with identical parameters."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from depinduce.data.vocab import Vocab
from depinduce.training import batching
from depinduce.training.checkpoint import state_digest
from depinduce.training.objectives import MaskedLM, fixed_masks
from training_support import TinyConfig, TinyMLM, make_data, subprocess_env, tiny_plugin  # noqa: F401

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch built without distributed")


@pytest.mark.slow
def test_two_cpu_ranks_train_in_sync(tmp_path: Path, tiny_plugin: Path) -> None:
    data = make_data(tmp_path / "data", n_train=150, n_dev=20, gold_dev=False)
    run = tmp_path / "run"
    sets = ["epochs=2", "batch_tokens=150", "checkpoint_every=2", "lr=5e-3", "seed=11"]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "-m", "depinduce", "train", "--model", "tiny-mlm", "--data", str(data), "--out", str(run),
               "--device", "cpu", "--threads", "1", "--quiet"]
    for item in sets:
        command += ["--set", item]
    result = subprocess.run(command, env=subprocess_env(tiny_plugin), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]

    state = torch.load(run / "last.pt", map_location="cpu", weights_only=True)
    # every rank reported the digest of the parameters it held at the last checkpoint: all equal, and equal to
    # what rank 0 saved
    assert state["world_size"] == 2
    assert state["replicas"] == [state_digest(state["model"])] * 2
    # each rank drew its own masks (its own random stream), both saved for an exact resume
    assert len(state["rng"]) == 2 and not torch.equal(state["rng"][0]["mask"], state["rng"][1]["mask"])

    # each step consumed two different batches: an epoch has half the steps of one process, and the training
    # tokens summed over ranks are exactly those of the batches taken
    vocab = Vocab.load(data / "vocab.json")
    rows = batching.read_corpus(data / "train.txt", vocab)
    lengths = [len(r) for r in rows]
    order = batching.epoch_order(lengths, 150, seed=11, epoch=0)
    steps = len(order) // 2
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [steps, 2 * steps]
    assert metrics[0]["train_tokens"] == sum(lengths[i] for batch in order[: 2 * steps] for i in batch)

    # the dev loss was computed on two shards and summed: it equals a single-process evaluation of the model
    model = TinyMLM(TinyConfig(), vocab)
    model.load_state_dict(state["model"])
    model.eval()
    dev = batching.read_corpus(data / "dev.txt", vocab)
    masks = fixed_masks(dev, 0.3, 1234)
    objective = MaskedLM(0.3)
    batch = batching.collate(dev, range(len(dev)), vocab.pad_index)
    with torch.no_grad():
        out = objective.compute(model, **objective.prepare(batch.tokens, batch.mask, fixed=masks))
    assert metrics[-1]["dev_loss"] == pytest.approx(float(out.nll_sum / out.count), rel=1e-5)
