"""Test-only support for the training tests: a tiny masked-LM backend registered as a real plugin, and a tiny
synthetic data folder in the layout ``depinduce preprocess`` writes.

The backend is deliberately small (a few thousand parameters) so whole training runs take a second; its
``sleep`` option slows each training step; ``signal_at`` sends the process SIGTERM from inside a training step, so a
test stops a run in the middle of an epoch once training has installed its handler (a timer started beside
``train`` could fire before that on a loaded machine, and kill the test run); ``first_sleep`` and ``parse_sleep``
make a slow warm-up and a slow dev evaluation for the time-budget tests.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from torch import nn

from depinduce.structures.sentence import Sentence
from depinduce.data.vocab import Vocab
from depinduce.io import format_conllu
from depinduce.models.base import Capabilities, ParseScores
from depinduce.models.neural import MaskedLMBackend

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


@dataclass
class TinyConfig:
    hidden: int = 16
    dropout: float = 0.1
    sleep: float = 0.0  # seconds per training forward pass (lets a test kill a run mid-epoch)
    first_sleep: float = 0.0  # seconds more for the first training forward pass (a slow warm-up)
    parse_sleep: float = 0.0  # seconds per parsing batch (a slow dev evaluation)
    signal_at: int = 0  # SIGTERM to this process at this training forward pass (0: never)


class TinyMLM(MaskedLMBackend):
    """Embedding → neighbour mixing → one bilinear attention; heads and distances from the attention scores.

    Every parameter takes part in ``encode``, so DDP sees gradients for all of them.
    """

    name = "tiny-mlm"
    description = "test-only masked LM"
    capabilities = Capabilities(dependency=True, constituency=True, trainable=True, supervised=False,
                                objective="mlm")
    config_class = TinyConfig
    parser_modules = ("query", "key", "root")  # its "parser": what the attention-derived trees come from

    def __init__(self, config: TinyConfig, vocab: Vocab) -> None:
        super().__init__(config, vocab)
        h = config.hidden
        self.embed = nn.Embedding(len(vocab), h, padding_idx=vocab.pad_index)
        self.mix = nn.Linear(3 * h, h)
        self.query = nn.Linear(h, h)
        self.key = nn.Linear(h, h)
        self.root = nn.Linear(h, 1)
        self.norm = nn.LayerNorm(h)
        self.drop = nn.Dropout(config.dropout)
        self.warmed_up = False
        self.passes = 0  # training forward passes so far (signal_at)

    def _attention_scores(self, tokens: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.embed(tokens) * mask.unsqueeze(-1)
        left = torch.nn.functional.pad(x, (0, 0, 1, 0))[:, :-1]
        right = torch.nn.functional.pad(x, (0, 0, 0, 1))[:, 1:]
        h = torch.tanh(self.mix(torch.cat([left, x, right], dim=-1)))
        scores = self.query(h) @ self.key(h).transpose(1, 2) / h.shape[-1] ** 0.5
        scores = scores.masked_fill(~mask.unsqueeze(1), -1e9)
        return h, scores

    def encode(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.training and self.config.sleep:
            time.sleep(self.config.sleep)
        if self.training and self.config.first_sleep and not self.warmed_up:
            time.sleep(self.config.first_sleep)
            self.warmed_up = True
        if self.training:
            self.passes += 1
            if self.passes == self.config.signal_at:
                os.kill(os.getpid(), signal.SIGTERM)
        h, scores = self._attention_scores(tokens, mask)
        h = h + torch.softmax(scores, dim=-1) @ h * torch.sigmoid(self.root(h))
        return self.norm(self.drop(h))

    def output_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden @ self.embed.weight.t()

    def score_tensors(self, tokens: torch.Tensor, mask: torch.Tensor) -> list[ParseScores]:
        time.sleep(self.config.parse_sleep)
        h, scores = self._attention_scores(tokens, mask)
        root = self.root(h).squeeze(-1)
        out = []
        for b in range(tokens.shape[0]):
            n = int(mask[b].sum())
            heads = torch.full((n + 1, n + 1), -1e9)
            heads[1:, 1:] = scores[b, :n, :n]
            heads[1:, 0] = root[b, :n]
            heads[1:, 1:].fill_diagonal_(-1e9)
            heads[1:] = torch.log_softmax(heads[1:], dim=-1)
            distances = -torch.diagonal(scores[b, :n, :n], offset=1) if n > 1 else torch.zeros(0)
            out.append(ParseScores(heads=heads, distances=distances, heights=root[b, :n]))
        return out


# --------------------------------------------------------------------------------------------- plugin


def register_plugin(site: Path) -> None:
    """A dist-info in ``site`` that registers :class:`TinyMLM` as ``tiny-mlm`` (put ``site`` and tests/ on the
    path: in-process with ``monkeypatch.syspath_prepend``, for subprocesses with :func:`subprocess_env`)."""
    info = site / "tinymlm-1.0.dist-info"
    if info.exists():
        return
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tinymlm\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[depinduce.models]\ntiny-mlm = training_support:TinyMLM\n")


def subprocess_env(site: Path, **extra: str) -> dict[str, str]:
    paths = [str(site), str(TESTS), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p), OMP_NUM_THREADS="1")
    env.update(extra)
    return env


def depinduce_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "depinduce", *args]


# ----------------------------------------------------------------------------------------------- data

DETS = ["the", "a", "every", "some"]
NOUNS = ["dog", "cat", "bird", "man", "woman", "child", "car", "house", "tree", "river", "city", "book"]
VERBS = ["saw", "liked", "chased", "found", "heard", "took", "made", "knew"]
PREPS = ["near", "with", "in", "under"]
ADJS = ["big", "small", "old", "red"]


def _noun_phrase(rng: random.Random) -> tuple[list[str], list[str], str]:
    """Words, tags and the bracketed NP; the noun is the last word (head)."""
    words, tags = [rng.choice(DETS)], ["DT"]
    if rng.random() < 0.4:
        words.append(rng.choice(ADJS))
        tags.append("JJ")
    words.append(rng.choice(NOUNS))
    tags.append("NN")
    return words, tags, "(NP " + " ".join(f"({t} {w})" for w, t in zip(words, tags)) + ")"


def synthetic_sentence(rng: random.Random) -> tuple[list[str], list[str], list[int], str]:
    """A sentence with its tags, heads (1-based, 0 = root) and bracketed tree (with a final period)."""
    subj, subj_tags, subj_tree = _noun_phrase(rng)
    obj, obj_tags, obj_tree = _noun_phrase(rng)
    verb = rng.choice(VERBS)
    words = subj + [verb] + obj
    tags = subj_tags + ["VBD"] + obj_tags
    v = len(subj) + 1
    heads = [len(subj)] * (len(subj) - 1) + [v] + [0] + [v + len(obj)] * (len(obj) - 1) + [v]
    vp = f"(VP (VBD {verb}) {obj_tree}"
    if rng.random() < 0.5:
        prep = rng.choice(PREPS)
        pobj, pobj_tags, pobj_tree = _noun_phrase(rng)
        p = len(words) + 1
        words += [prep] + pobj
        tags += ["IN"] + pobj_tags
        heads += [v] + [p + len(pobj)] * (len(pobj) - 1) + [p]
        vp += f" (PP (IN {prep}) {pobj_tree})"
    vp += ")"
    words.append(".")
    tags.append(".")
    heads.append(v)
    return words, tags, heads, f"(S {subj_tree} {vp} (. .))"


def make_data(folder: Path, *, n_train: int = 300, n_dev: int = 40, seed: int = 0, gold_dev: bool = True) -> Path:
    """A data folder like ``preprocess ptb`` writes: train/dev .txt (punctuation removed), vocab.json and, with
    ``gold_dev``, dev.conllu (all tokens, gold heads) and dev.trees (punctuation removed)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    train = [synthetic_sentence(rng) for _ in range(n_train)]
    dev = [synthetic_sentence(rng) for _ in range(n_dev)]
    (folder / "train.txt").write_text("".join(" ".join(w[:-1]) + "\n" for w, _, _, _ in train))
    (folder / "dev.txt").write_text("".join(" ".join(w[:-1]) + "\n" for w, _, _, _ in dev))
    Vocab.build((w[:-1] for w, _, _, _ in train), min_freq=1).save(folder / "vocab.json")
    if gold_dev:
        blocks = []
        for i, (words, tags, heads, _) in enumerate(dev, start=1):
            sentence = Sentence(words=words, xpos=tags, upos=["PUNCT" if t == "." else "X" for t in tags],
                                heads=heads, deprels=["root" if h == 0 else "dep" for h in heads],
                                sent_id=f"dev:{i}", metadata={"sent_id": f"dev:{i}", "punct_rule": "ptb"})
            blocks.append(format_conllu(sentence))
        (folder / "dev.conllu").write_text("".join(blocks))
        (folder / "dev.trees").write_text("".join(tree.replace(" (. .)", "") + "\n" for _, _, _, tree in dev))
    return folder


_UPOS = {"DT": "DET", "JJ": "ADJ", "NN": "NOUN", "VBD": "VERB", "IN": "ADP", ".": "PUNCT"}


def synthetic_labels(tags: list[str], heads: list[int]) -> list[str]:
    """Deterministic dependency labels of a synthetic sentence, read off its tags and heads."""
    labels = []
    for i, (tag, head) in enumerate(zip(tags, heads), start=1):
        if tag == "NN":
            head_tag = tags[head - 1] if head else ""
            labels.append("nmod" if head_tag == "IN" else "nsubj" if i < head else "obj")
        else:
            labels.append({"DT": "det", "JJ": "amod", "VBD": "root", "IN": "obl", ".": "punct"}[tag])
    return labels


def make_ud_data(folder: Path, *, n_train: int = 300, n_dev: int = 40, seed: int = 0) -> Path:
    """A data folder like ``preprocess ud`` writes, from synthetic sentences: train/dev ``.conllu`` with every
    token, UPOS, gold heads and labels, the punctuation-free train/dev ``.txt`` and ``vocab.json``."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("dev", n_dev)):
        sentences = [synthetic_sentence(rng) for _ in range(n)]
        blocks = []
        for i, (words, tags, heads, _) in enumerate(sentences, start=1):
            sentence = Sentence(words=words, xpos=tags, upos=[_UPOS[t] for t in tags], heads=heads,
                                deprels=synthetic_labels(tags, heads), sent_id=f"{split}:{i}",
                                metadata={"sent_id": f"{split}:{i}"})
            blocks.append(format_conllu(sentence))
        (folder / f"{split}.conllu").write_text("".join(blocks))
        (folder / f"{split}.txt").write_text("".join(" ".join(w[:-1]) + "\n" for w, _, _, _ in sentences))
        if split == "train":
            Vocab.build((w[:-1] for w, _, _, _ in sentences), min_freq=1).save(folder / "vocab.json")
    return folder


# -------------------------------------------------------------------------------------------- fixtures


@pytest.fixture
def tiny_plugin(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``tiny-mlm`` registered for this process (import this fixture into a test module to use it)."""
    site = tmp_path_factory.mktemp("site")
    register_plugin(site)
    monkeypatch.syspath_prepend(str(site))
    return site


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Single-threaded torch for the test (bitwise-reproducible runs); the previous setting is restored."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
