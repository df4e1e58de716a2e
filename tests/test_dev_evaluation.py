"""Training's dev evaluation parses the dev set once where the bracket trees derive from the heads, with the
metrics of parsing dev.conllu and dev.trees separately; the DMV computes only the chart its decoder reads."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import depinduce.pipeline
from depinduce.data.normalize import Normalization
from depinduce.data.punct import sentence_punct_mask
from depinduce.io import read_conllu
from depinduce.models.base import Backend
from depinduce.models.dmv import DMV
from depinduce.models.dmv.config import DMVConfig
from depinduce.models.dmv.model import build_class_vocab
from depinduce.models.registry import load_model
from depinduce.pipeline import ParseRequest, parse, visible_sentence
from depinduce.structures.sentence import Sentence
from depinduce.training.evaluation import DevTreebank, parsing_metrics


@pytest.fixture(scope="module")
def dev(ptb_sample: Path) -> DevTreebank:
    return DevTreebank.load(ptb_sample)


@pytest.fixture(scope="module")
def dmv(ptb_sample: Path) -> DMV:
    """A DMV after one EM iteration from the harmonic initialiser on the sample's short training sentences."""
    sentences = [visible_sentence(s, sentence_punct_mask(s)) for s in read_conllu(str(ptb_sample / "train.conllu"))]
    sentences = [s for s in sentences if 0 < len(s) <= 10]
    config = DMVConfig(view="xpos")
    model = DMV(config, build_class_vocab(sentences, config, Normalization(lowercase=False, fold_digits=False)))
    rows = model.classes(sentences)
    model.set_counts(model.harmonic_counts(rows))
    model.set_counts(model.expected_counts(rows)[1])
    return model.eval()


def two_parses(backend: Backend, dev: DevTreebank, decoder: str) -> dict[str, float | None]:
    """The reference: dev.conllu parsed for DDA/UDA and dev.trees parsed as brackets for UF1, separately."""
    return {**parsing_metrics(backend, DevTreebank(dev.dependencies, None), decoder=decoder),
            **parsing_metrics(backend, DevTreebank(None, dev.trees), decoder=decoder)}


def counted_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The output format of every parse the dev evaluation runs."""
    formats: list[str] = []
    real = depinduce.pipeline.parse

    def counting(sentences: list[Sentence], backend: Backend, request: ParseRequest, **kw: Any) -> Iterator[Sentence]:
        formats.append(request.fmt)
        return real(sentences, backend, request, **kw)

    monkeypatch.setattr(depinduce.pipeline, "parse", counting)
    return formats


@pytest.mark.parametrize("decoder", ["dmv-viterbi", "mst"])
def test_the_dmv_parses_the_dev_set_once_with_the_metrics_of_two_parses(
        dmv: DMV, dev: DevTreebank, decoder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    reference = two_parses(dmv, dev, decoder)
    formats = counted_parses(monkeypatch)
    assert parsing_metrics(dmv, dev, decoder=decoder) == reference
    assert formats == ["conllu"] and reference["dev_uf1"] is not None


def test_a_neural_dependency_backend_parses_the_dev_set_once_with_the_metrics_of_two_parses(
        dev: DevTreebank, monkeypatch: pytest.MonkeyPatch) -> None:
    udgn = load_model("default")
    reference = two_parses(udgn, dev, udgn.default_decoder)
    formats = counted_parses(monkeypatch)
    assert parsing_metrics(udgn, dev, decoder=udgn.default_decoder) == reference
    assert formats == ["conllu"]


def test_a_backend_with_its_own_constituency_trees_parses_twice(dev: DevTreebank,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    baseline = load_model("right-branching")
    reference = two_parses(baseline, dev, baseline.default_decoder)
    formats = counted_parses(monkeypatch)
    assert parsing_metrics(baseline, dev, decoder=baseline.default_decoder) == reference
    assert formats == ["conllu", "brackets"]


@pytest.mark.parametrize(("decoder", "probs", "semirings"), [
    ("dmv-viterbi", False, ["max"]), ("mst", False, ["log"]), ("eisner", False, ["log"]),
    ("dmv-viterbi", True, ["max", "log"]),  # --probs reads the marginals whatever the decoder
])
def test_the_dmv_computes_only_the_chart_its_decoder_reads(dmv: DMV, dev: DevTreebank, decoder: str, probs: bool,
                                                           semirings: list[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    computed: list[str] = []
    real = DMV.chart_gradients

    def recording(self: DMV, *args: Any) -> Any:
        computed.append(args[2])
        return real(self, *args)

    monkeypatch.setattr(DMV, "chart_gradients", recording)
    assert dev.dependencies is not None
    sentences = [Sentence(words=list(s.words), xpos=s.xpos, upos=s.upos, metadata=dict(s.metadata))
                 for s in dev.dependencies[:5]]
    parsed = list(parse(sentences, dmv, ParseRequest(decoder=decoder, probs=probs), progress=False))
    assert computed == semirings  # one batch: each chart once
    assert all(s.heads is not None and len(s.heads) == len(s.words) for s in parsed)


def test_a_backend_reading_whole_sentences_is_not_scored_on_dev_trees(dev: DevTreebank) -> None:
    """RNGTr reads every token with its UPOS, which dev.trees (words and Penn tags) lacks: on a data folder of
    ``preprocess ptb`` its dev metrics are the dependency ones, not a refusal to train."""
    from depinduce.models.registry import backend_class

    cls = backend_class("rngtr")
    assert dev.trees and dev.dependencies and cls.capabilities.whole_sentences
    wanted = dev.available(cls)
    assert "dev_uf1" not in wanted and "dev_dda" in wanted and "dev_las" in wanted
    assert "dev_uf1" in dev.available(backend_class("structformer"))
