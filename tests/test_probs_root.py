"""``parse --probs`` prints the distribution the chosen decoder read, ROOT included, and ROOT's column means
something per backend (docs/guide/parse.md, "Head probabilities").

- every backend and decoder: each visible word's row sums to 1, the printed HeadProb is its entry, and a one-word
  sentence's row is ROOT = 1;
- the argmax decoders (the shared ``argmax`` and the authors' ``*-argmax``): each head is its row's argmax, ROOT
  included (they may give no root or several: that is the argmax, and the rows say so);
- the tree decoders that add log scores (``mst``, ``eisner``, ``udgn-tree``): their tree is a best tree under the
  printed rows' logs, which tells apart every ROOT column but the one they read;
- Probabilistic Transformer without a ROOT node: ROOT is the received share normalised with the row (the chosen
  root no longer prints 0); StructFormer: ROOT is softmax(s1 · height), the model's distribution over the
  sentence's head, and its argmax decoders print the rows given the root they choose by height.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from depinduce.api.parser import Parser
from depinduce.io import read_sentences
from depinduce.structures.decode import decode_heads
from depinduce.structures.sentence import Sentence
from test_probs import _backends

NEURAL = ["structformer", "udgn", "probformer", "probformer-root", "dmv", "rngtr"]
ARGMAX = {"argmax", "structformer-argmax", "udgn-argmax", "probformer-argmax"}
# the decoders that pick the tree with the highest sum of log scores (exactly one root), and the shared decoder
# that finds that tree over any matrix (udgn-tree tries every root with Chu-Liu/Edmonds: the mst)
LOG_TREES = {"mst": "mst", "eisner": "eisner", "udgn-tree": "mst"}


@pytest.fixture(scope="module")
def sentences(ewt_dir: Path) -> list[Sentence]:
    """Forty real sentences of UD English EWT dev (punctuation and UPOS included), some with one visible word."""
    read = read_sentences(ewt_dir / "en_ewt-ud-dev.conllu", fmt="conllu")
    return [s for s in read if 2 <= len(s) <= 25][:40]


@pytest.fixture(scope="module")
def backends(sentences: list[Sentence]) -> dict[str, object]:
    return _backends(sentences)


def _decoders(backend: object) -> list[str]:
    return ["mst", "eisner", "argmax", *getattr(backend, "own_decoders", {})]


def _pairs() -> list[tuple[str, str]]:
    """(backend, decoder) for every decoder of every backend with a head distribution (built without data)."""
    from depinduce.models.probformer import ProbFormer
    from depinduce.models.rngtr import RNGTr
    from depinduce.models.structformer import StructFormer
    from depinduce.models.udgn import UDGN
    from depinduce.models.dmv import DMV

    classes = {"structformer": StructFormer, "udgn": UDGN, "probformer": ProbFormer, "probformer-root": ProbFormer,
               "dmv": DMV, "rngtr": RNGTr}
    return [(name, decoder) for name in NEURAL for decoder in ["mst", "eisner", "argmax", *classes[name].own_decoders]]


def _shown(item) -> list[int]:
    """The tokens the model saw (0-based): those with a printed row."""
    return [i for i, row in enumerate(item.sentence.head_probs) if row is not None]


def _visible(item) -> tuple[np.ndarray, list[int]]:
    """One parsed sentence's printed rows over ROOT and its visible words, (m+1)×(m+1) with row 0 zero, and the
    visible words' heads (0 = ROOT, j = the j-th visible word)."""
    sentence = item.sentence
    visible = _shown(item)
    columns = [0] + [i + 1 for i in visible]
    index = {token: k for k, token in enumerate(columns)}
    matrix = np.zeros((len(columns), len(columns)))
    for k, i in enumerate(visible, start=1):
        matrix[k] = np.asarray(sentence.head_probs[i])[columns]
    return matrix, [index[sentence.heads[i]] for i in visible]


def _parse(backend: object, sentences: list[Sentence], decoder: str) -> list:
    return list(Parser(backend).parse(sentences, decoder=decoder, probs=True))


@pytest.mark.parametrize(("name", "decoder"), _pairs())
def test_every_decoders_rows_sum_to_one_and_hold_its_head_probability(
        name: str, decoder: str, backends: dict[str, object], sentences: list[Sentence]) -> None:
    parsed = _parse(backends[name], sentences, decoder)
    rows = 0
    for item in parsed:
        matrix, heads = _visible(item)
        for k, (token, head) in enumerate(zip(_shown(item), heads), start=1):
            rows += 1
            assert matrix[k].sum() == pytest.approx(1.0, abs=1e-9) and matrix[k].min() >= 0.0
            assert matrix[k, k] == 0.0
            assert item.tokens[token].prob == pytest.approx(matrix[k, head])
        if decoder in ARGMAX:  # the decoded head is the row's argmax, ROOT included
            for k, head in enumerate(heads, start=1):
                assert matrix[k, head] == pytest.approx(matrix[k].max(), rel=1e-12, abs=1e-15), (k, matrix[k])
        if decoder in LOG_TREES and len(heads) > 1:  # a best tree under the printed rows' logs
            logs = np.log(np.maximum(matrix, 1e-300))
            logs[0] = -np.inf
            best = decode_heads(logs, LOG_TREES[decoder])
            score = sum(logs[k, h] for k, h in enumerate(heads, start=1))
            assert score >= sum(logs[k, h] for k, h in enumerate(best, start=1)) - 1e-6
    assert rows > 200


@pytest.mark.parametrize(("name", "decoder"), _pairs())
def test_a_one_word_sentence_has_root_probability_one(name: str, decoder: str,
                                                      backends: dict[str, object]) -> None:
    (item,) = _parse(backends[name], [Sentence(words=["time"], upos=["NOUN"])], decoder)
    assert item.sentence.heads == [0] and item.sentence.head_probs == [[1.0, 0.0]]
    # and beside longer sentences in the same batch
    pair = Sentence(words=["time", "flies"], upos=["NOUN", "VERB"])
    single, _ = _parse(backends[name], [Sentence(words=["flies"], upos=["VERB"]), pair], decoder)
    assert single.sentence.head_probs == [[1.0, 0.0]]


def test_probformer_roots_print_the_received_share_it_scores_them_by(
        backends: dict[str, object], sentences: list[Sentence]) -> None:
    """Without a ROOT node the shared decoders score ROOT → i by the share s_i of the head mass word i receives
    (a distribution over the words); the printed row is [s_i, Q̄_h[i, ·]] / (1 + s_i)."""
    model = backends["probformer"]
    for item in _parse(model, sentences, "mst"):
        matrix, heads = _visible(item)
        m = len(heads)
        if m < 2:
            continue
        words = [item.sentence.words[i] for i in _shown(item)]
        scores = model.parse_scores([words])[0].heads.double()
        share = scores[1:, 0].exp().numpy()
        q = scores[1:, 1:].exp().numpy()
        assert share.sum() == pytest.approx(1.0, abs=1e-5)
        np.testing.assert_allclose(matrix[1:, 0], share / (1 + share), rtol=1e-5)
        np.testing.assert_allclose(matrix[1:, 1:], q / (1 + share)[:, None], rtol=1e-5, atol=1e-30)
        assert item.tokens[_shown(item)[heads.index(0)]].prob > 0  # the chosen root's HeadProb


def test_probformer_authors_decoders_print_root_at_probability_zero(
        backends: dict[str, object], sentences: list[Sentence]) -> None:
    """Their decoders (no ROOT node) add probabilities with ROOT at 0: that is what prints with them."""
    for decoder in ("probformer-argmax", "probformer-nonprojective", "probformer-projective"):
        for item in _parse(backends["probformer"], sentences, decoder):
            matrix, heads = _visible(item)
            if len(heads) > 1:
                assert (matrix[1:, 0] == 0.0).all()


def test_structformer_root_column_is_the_sentence_head_distribution(
        backends: dict[str, object], sentences: list[Sentence]) -> None:
    """mst/eisner read (and print) ROOT = r_i = softmax(s1 · height)_i and the parent distribution P
    renormalised over the words, times 1 − r_i; r sums to 1 over the sentence and peaks at the highest word."""
    model = backends["structformer"]
    with torch.no_grad():
        model.log_sharpness[1] = 1.5  # s1 = e^1.5: r far from uniform
    try:
        s1 = float(model.log_sharpness.detach()[1].exp())
        checked = 0
        for item in _parse(model, sentences, "mst"):
            matrix, heads = _visible(item)
            m = len(heads)
            if m < 2:
                continue
            words = [item.sentence.words[i] for i in _shown(item)]
            found = model.parse_scores([words])[0]
            r = torch.softmax(s1 * found.heights.double(), dim=0).numpy()
            np.testing.assert_allclose(matrix[1:, 0], r, rtol=1e-5)
            assert matrix[1:, 0].sum() == pytest.approx(1.0, abs=1e-6)
            parent = found.heads[1:, 1:].double().exp().numpy()
            want = parent / parent.sum(axis=1, keepdims=True) * (1 - r)[:, None]
            np.testing.assert_allclose(matrix[1:, 1:], want, rtol=1e-4, atol=1e-12)
            checked += 1
        assert checked > 20
        # the authors' root (the highest word) is ROOT's most probable word
        for decoder in ("argmax", "structformer-argmax"):
            for item in _parse(model, sentences, decoder):
                matrix, heads = _visible(item)
                root_rows = [k for k, h in enumerate(heads, start=1) if h == 0]
                assert root_rows and all(matrix[k, 0] == 1.0 for k in root_rows)
                others = [k for k in range(1, len(heads) + 1) if k not in root_rows]
                assert all(matrix[k, 0] == 0.0 for k in others)
    finally:
        with torch.no_grad():
            model.log_sharpness[1] = 0.0


def test_structformer_mst_roots_the_highest_word_when_the_head_choice_is_sharp(
        backends: dict[str, object], sentences: list[Sentence]) -> None:
    """With a sharp head choice r puts (nearly) all root mass on the highest word, so mst roots the word the
    authors' decoder roots."""
    model = backends["structformer"]
    with torch.no_grad():
        model.log_sharpness[1] = math.log(200.0)
    try:
        mst = _parse(model, sentences, "mst")
        theirs = _parse(model, sentences, "structformer-argmax")
        roots = [([k for k, h in enumerate(_visible(a)[1]) if h == 0], [k for k, h in enumerate(_visible(b)[1])
                                                                     if h == 0]) for a, b in zip(mst, theirs)]
        agree = [ours == authors for ours, authors in roots if len(authors) == 1]
        assert len(agree) > 30 and all(agree)
    finally:
        with torch.no_grad():
            model.log_sharpness[1] = 0.0
