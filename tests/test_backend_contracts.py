"""The backend contract in types: one contract class per objective, input views, and Capabilities derived from both."""

from __future__ import annotations

import pytest
import torch

from depinduce.errors import DepinduceError, InputError
from depinduce.models.base import Backend, Capabilities, Induces, ParseScores
from depinduce.models.contracts import (
    CONTRACTS, EMBackend, LikelihoodBackend, MaskedLMBackend, NextWordLMBackend, RefinerBackend, StreamingLMBackend,
    require_contract,
)
from depinduce.models.registry import backend_class
from depinduce.models.views import TaggedWords, VisibleWords, WholeSentences, visible_sentence
from depinduce.structures.sentence import Sentence
from depinduce.training.objectives import objective_for

# Each built-in backend's contract and the capabilities `depinduce models` showed before they were derived.
BUILT_IN = {
    "structformer": ((MaskedLMBackend,), dict(dependency=True, constituency=True, objective="mlm")),
    "udgn": ((MaskedLMBackend,), dict(dependency=True, constituency=False, objective="mlm")),
    "probformer": ((MaskedLMBackend,), dict(dependency=True, constituency=False, objective="mlm")),
    "prpn": ((NextWordLMBackend, StreamingLMBackend), dict(dependency=False, constituency=True, objective="lm")),
    "cpcfg": ((LikelihoodBackend,), dict(dependency=False, constituency=True, objective="likelihood")),
    "dmv": ((EMBackend,), dict(dependency=True, constituency=False, objective="em", reads_tags=True)),
    "rngtr": ((RefinerBackend,), dict(dependency=True, constituency=False, objective="supervised", supervised=True,
                                      whole_sentences=True, refines=True)),
    "right-branching": ((), dict(dependency=True, constituency=True, trainable=False, fixed_tree=True)),
    "left-branching": ((), dict(dependency=True, constituency=True, trainable=False, fixed_tree=True)),
    "random": ((), dict(dependency=True, constituency=True, trainable=False)),
}


@pytest.mark.parametrize("name", sorted(BUILT_IN))
def test_every_backend_subclasses_the_contract_of_its_objective(name: str) -> None:
    cls = backend_class(name)
    contracts, fields = BUILT_IN[name]
    expected = dict(dependency=False, constituency=False, trainable=True, supervised=False, objective="none",
                    whole_sentences=False, reads_tags=False, refines=False, fixed_tree=False) | fields
    assert cls.capabilities == Capabilities(**expected)
    assert cls.objective == expected["objective"]
    assert [c for c in CONTRACTS if c in cls.__mro__] == list(contracts)
    view = {"dmv": TaggedWords, "rngtr": WholeSentences}.get(name, VisibleWords)
    assert type(cls.input_view) is view


def test_a_contract_names_what_is_missing_and_refuses_to_be_built_without_it() -> None:
    class Half(MaskedLMBackend):  # encode, but no output_logits
        name = "half"
        config_class = dict

        def encode(self, tokens, mask):
            return tokens

        def score_tensors(self, tokens, mask):
            return []

    with pytest.raises(TypeError, match="output_logits"):
        Half({}, None)  # type: ignore[arg-type]

    class Encoder(torch.nn.Module):
        name = "encoder"

        def encode(self, tokens, mask):
            return tokens

    with pytest.raises(DepinduceError, match=r"^model 'encoder' declares objective 'mlm' but lacks output_logits, "
                                             r"regularizer\(\)$"):
        require_contract(Encoder(), MaskedLMBackend)
    with pytest.raises(TypeError, match="objectives likelihood, mlm"):
        type("Both", (MaskedLMBackend, LikelihoodBackend), {})


class _StandIn(torch.nn.Module):
    """A test stand-in with the hooks of the next-word objective, subclassing nothing of depinduce."""

    def lm_hidden(self, tokens, mask):
        return tokens

    def output_logits(self, hidden):
        return hidden

    def regularizer(self):
        return None


def test_a_class_with_every_hook_counts_as_the_contract_but_sets_no_objective() -> None:
    assert isinstance(_StandIn(), NextWordLMBackend) and not isinstance(_StandIn(), StreamingLMBackend)
    objective_for("lm", mask_rate=0.3, vocab_size=5).check_model(_StandIn())
    with pytest.raises(DepinduceError, match=r"lacks lm_stream\(\)$"):
        objective_for("lm", mask_rate=0.3, vocab_size=5, lm_mode="continuous").check_model(_StandIn())
    assert not hasattr(_StandIn, "objective")  # only subclassing declares how a backend learns


def test_a_backend_declaring_capabilities_gets_the_view_they_describe() -> None:
    """A plugin written before input views declares flags; its view, and its subclasses', follow from them."""

    class Old(Backend):
        name = "old"
        capabilities = Capabilities(dependency=True, constituency=False, trainable=False, supervised=False,
                                    whole_sentences=True, refines=True)

        @classmethod
        def load(cls, run_dir, *, device="cpu", seed=0):
            return cls()

        def parse_scores(self, sentences):
            return []

    class OldChild(Old):
        pass

    class NewChild(Old):
        induces = Induces(dependency=True, constituency=True)
        input_view = VisibleWords(pairwise=False)

    assert type(Old.input_view) is WholeSentences and Old.input_view.refines
    assert OldChild.capabilities is Old.capabilities and OldChild.input_view is Old.input_view
    assert NewChild.capabilities.constituency and NewChild.capabilities.fixed_tree
    assert not NewChild.capabilities.whole_sentences


def test_input_views_hide_what_the_backend_does_not_read() -> None:
    sentence = Sentence(words=["Dogs", "bark", ",", "cats", "sleep", "."], upos=["NOUN", "VERB", "PUNCT", "NOUN",
                                                                                  "VERB", "PUNCT"], line=3)
    hidden = VisibleWords().hidden(sentence)
    assert hidden == [False, False, True, False, False, True]
    assert WholeSentences().hidden(sentence) == [False] * 6
    assert visible_sentence(sentence, hidden).upos == ["NOUN", "VERB", "NOUN", "VERB"]

    class Recorder:
        name = "recorder"

        def parse_scores(self, sentences):
            self.words = sentences
            return [ParseScores() for _ in sentences]

        def parse_sentences(self, sentences, init=None):
            self.sentences, self.init = sentences, init
            return [ParseScores() for _ in sentences]

    backend = Recorder()
    VisibleWords().score(backend, [sentence], [hidden], None)
    assert backend.words == [["Dogs", "bark", "cats", "sleep"]]
    TaggedWords().score(backend, [sentence], [hidden], None)
    assert backend.sentences[0].words == ["Dogs", "bark", "cats", "sleep"] and backend.init is None
    WholeSentences(refines=True).score(backend, [sentence], [[False] * 6], [([0] * 6, ["dep"] * 6)])
    assert backend.sentences == [sentence] and backend.init == [([0] * 6, ["dep"] * 6)]
    assert VisibleWords().reads_text and not WholeSentences().reads_text
    untagged = Sentence(words=["a", "b"], upos=["DET", "_"], line=7)
    with pytest.raises(InputError, match=r"^in.conllu:7: token 2 \('b'\) of the sentence starting here has no UPOS"):
        WholeSentences().check(backend, [untagged], "in.conllu")
    VisibleWords().check(backend, [untagged], "in.conllu")  # words need no tags
