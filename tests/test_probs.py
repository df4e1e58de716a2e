"""``parse --probs`` / ``probs=True``: each word's head distribution, read from what each backend computes.

Per backend (untrained small models are enough for these properties, the bundled model too): every visible word's
distribution over ROOT and the other words is non-negative and sums to 1, a word never heads itself, punctuation
(attached by rule) has none, and with the argmax decoder the decoded head is the distribution's argmax, ROOT
included.  What ROOT's column means per backend and decoder: tests/test_probs_root.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from depinduce.api.parser import Parser
from depinduce.data.tags import TagVocab
from depinduce.data.vocab import Normalization, Vocab
from depinduce.errors import ModelError, UsageError
from depinduce.io import read_sentences
from depinduce.models.baselines import LeftBranching, RandomBaseline, RightBranching
from depinduce.models.cpcfg import CPCFG
from depinduce.models.cpcfg.config import CPCFGConfig
from depinduce.models.dmv import DMV
from depinduce.models.dmv.config import DMVConfig
from depinduce.models.probformer import ProbFormer
from depinduce.models.probformer.config import ProbFormerConfig
from depinduce.models.prpn import PRPN
from depinduce.models.prpn.config import PRPNConfig
from depinduce.models.registry import load_model
from depinduce.models.rngtr import RNGTr
from depinduce.models.rngtr.config import RNGTrConfig
from depinduce.models.structformer import StructFormer
from depinduce.models.structformer.config import StructFormerConfig
from depinduce.models.udgn import UDGN
from depinduce.models.udgn.config import UDGNConfig
from depinduce.structures.sentence import Sentence
from training_support import depinduce_command


@pytest.fixture(scope="module")
def ewt(ewt_dir: Path) -> list[Sentence]:
    """Twelve real sentences of UD English EWT dev (with punctuation, UPOS and SpaceAfter=No)."""
    sentences = read_sentences(ewt_dir / "en_ewt-ud-dev.conllu", fmt="conllu")
    return [s for s in sentences if 4 <= len(s) <= 25][:12]


def _vocab(sentences: list[Sentence]) -> Vocab:
    return Vocab.build([s.words for s in sentences], min_freq=1)


def _backends(sentences: list[Sentence]) -> dict[str, object]:
    torch.manual_seed(0)
    vocab = _vocab(sentences)
    dmv = DMV(DMVConfig(view="words"), Vocab.build([s.words for s in sentences], min_freq=1,
                                                   normalization=Normalization(False, False))).double()
    dmv.set_counts({name: torch.rand_like(table) * 3 + 0.1 for name, table in dmv.tables().items()})
    tags = TagVocab(sorted({t for s in sentences for t in s.upos or []}),
                    sorted({r for s in sentences for r in s.deprels or []}))
    rngtr = RNGTr(RNGTrConfig(hidden_size=16, n_layers=2, n_heads=2, ff_size=32, arc_mlp_size=12, label_mlp_size=6,
                              dropout=0.0, mlp_dropout=0.0, iterations=2), vocab, tags)
    for name, p in rngtr.named_parameters():  # the biaffine weights start at zero: make every score informative
        if p.dim() >= 2 and "rel_" not in name:
            torch.nn.init.normal_(p, std=0.3)
    return {
        "structformer": StructFormer(StructFormerConfig(hidden_size=16, n_layers=2, n_heads=4, ff_size=32,
                                                        conv_size=3, max_positions=64), vocab),
        "udgn": UDGN(UDGNConfig(hidden_size=16, n_layers=2, n_heads=4, head_size=6, parser_layers=2), vocab),
        "probformer": ProbFormer(ProbFormerConfig(d=8, n_channels=3, n_iter=2, rank=4, distance_threshold=1), vocab),
        "probformer-root": ProbFormer(ProbFormerConfig(d=8, n_channels=3, n_iter=2, rank=4, distance_threshold=1,
                                                       root=True), vocab),
        "dmv": dmv,
        "rngtr": rngtr,
        "right-branching": RightBranching(),
        "left-branching": LeftBranching(),
        "random": RandomBaseline(),
    }


BACKENDS = ["structformer", "udgn", "probformer", "probformer-root", "dmv", "rngtr", "right-branching",
            "left-branching", "random"]


@pytest.fixture(scope="module")
def backends(ewt: list[Sentence]) -> dict[str, object]:
    return _backends(ewt)


def _check_distributions(parsed, *, argmax: bool) -> int:
    """Every visible word's distribution sums to 1 and (argmax decoder) peaks at the decoded head, ROOT
    included; returns how many words were checked."""
    checked = 0
    for item in parsed:
        sentence = item.sentence
        assert sentence.head_probs is not None and len(sentence.head_probs) == len(sentence)
        for i, (row, head) in enumerate(zip(sentence.head_probs, sentence.heads)):
            if row is None:
                assert sentence.deprels[i] in ("punct", "root")  # hidden punctuation, attached by rule
                continue
            checked += 1
            assert len(row) == len(sentence) + 1
            assert min(row) >= 0.0 and row[i + 1] == 0.0
            assert sum(row) == pytest.approx(1.0, abs=1e-5)
            assert item.tokens[i].prob == pytest.approx(row[head])
            if argmax:
                assert row[head] == pytest.approx(max(row), abs=1e-9)
    return checked


@pytest.mark.parametrize("name", BACKENDS)
def test_every_word_gets_a_head_distribution_that_sums_to_one_and_peaks_at_the_argmax_head(
        name: str, backends: dict[str, object], ewt: list[Sentence]) -> None:
    parser = Parser(backends[name])
    # every backend's argmax: the printed rows are what it read (StructFormer's given its height-chosen root,
    # the probformer's without a ROOT node with the received share it scores ROOT by, normalised)
    parsed = list(parser.parse(ewt, decoder="argmax", probs=True))
    checked = _check_distributions(parsed, argmax=True)
    assert checked > 100
    assert _check_distributions(parser.parse(ewt, decoder="mst", probs=True), argmax=False) == checked
    if name in ("right-branching", "left-branching", "random"):  # the baselines decide: probability 1
        assert {t.prob for p in parsed for t in p if t.prob is not None} == {1.0}
    else:
        assert len({round(t.prob, 6) for p in parsed for t in p if t.prob is not None}) > 20


def test_the_bundled_model_gives_probabilities_with_every_decoder(ewt: list[Sentence]) -> None:
    parser = Parser(load_model("default"))
    argmaxed = list(parser.parse(ewt, decoder="argmax", probs=True))
    assert _check_distributions(argmaxed, argmax=True) > 100
    for decoder in ("mst", "eisner"):
        again = list(parser.parse(ewt, decoder=decoder, probs=True))
        # the shared decoders read the model's distribution: only the chosen heads differ
        assert [p.sentence.head_probs for p in again] == [p.sentence.head_probs for p in argmaxed]
    for decoder in ("udgn-tree", "udgn-argmax"):  # the authors' read p between words only: their own rows
        own = list(parser.parse(ewt, decoder=decoder, probs=True))
        assert _check_distributions(own, argmax=decoder == "udgn-argmax") > 100
        assert [p.sentence.head_probs for p in own] != [p.sentence.head_probs for p in argmaxed]
    assert all(p.sentence.head_probs is None for p in parser.parse(ewt[:2]))  # off by default


def test_span_models_refuse_probabilities_in_one_line(ewt: list[Sentence]) -> None:
    vocab = _vocab(ewt)
    cpcfg = CPCFG(CPCFGConfig(nt=4, t=4, state_dim=8, z_dim=3, word_dim=6, lstm_dim=5), vocab)
    prpn = PRPN(PRPNConfig(emb_size=12, hidden_size=16, n_layers=2, n_slots=4, lookback=2), vocab)
    for model in (cpcfg, prpn):
        with pytest.raises(ModelError, match=f"model '{model.name}' computes no head distribution"):
            Parser(model).parse(ewt, probs=True)
    with pytest.raises(UsageError, match="brackets"):
        Parser(RightBranching()).parse(ewt, probs=True, fmt="brackets")


@pytest.mark.slow
def test_conllu_appends_headprob_to_misc_and_jsonl_carries_the_distributions(tmp_path: Path) -> None:
    text = tmp_path / "in.txt"
    text.write_text("I saw Sarah, with a telescope.\nDon't go!\n", encoding="utf-8")
    run = [*depinduce_command("parse", "--model", "default", "--quiet", str(text))]
    plain = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    probs = subprocess.run([*run, "--probs"], capture_output=True, text=True, check=True).stdout
    assert "HeadProb" not in plain  # off by default: the output is unchanged
    for before, after in zip(plain.splitlines(), probs.splitlines()):
        if not before:
            assert not after
            continue
        cols, new = before.split("\t"), after.split("\t")
        assert new[:9] == cols[:9]
        if cols[7] == "punct":
            assert new[9] == cols[9]  # punctuation has none
        else:
            kept = [] if cols[9] == "_" else cols[9].split("|")
            prob = new[9].split("|")[-1]
            assert new[9].split("|")[:-1] == kept  # SpaceAfter=No kept, HeadProb appended
            assert prob.startswith("HeadProb=") and 0.0 < float(prob[9:]) <= 1.0 and len(prob[9:]) == 6
    assert "SpaceAfter=No|HeadProb=" in probs
    lines = subprocess.run([*run, "--probs", "--format", "jsonl"], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    record = json.loads(lines[0])
    assert len(record["head_probs"]) == len(record["words"])
    for row, head in zip(record["head_probs"], record["heads"]):
        if row is not None:
            assert sum(row) == pytest.approx(1.0, abs=1e-4) and row[head] > 0
    refused = subprocess.run([*run, "--probs", "--format", "brackets"], capture_output=True, text=True)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip().splitlines() == ["--probs writes to --format conllu or --format jsonl, not brackets"]
