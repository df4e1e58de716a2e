"""The vocabulary and the normalisation it records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from depinduce.data.normalize import Normalization, overlap_key
from depinduce.data.vocab import MASK, PAD, SPECIALS, UNK, Vocab
from depinduce.errors import DepinduceError, InputError

CORPUS = [["the", "cat", "sat"], ["the", "dog", "sat"], ["a", "cat"], ["the", "end"]]


def test_specials_first_then_by_frequency_and_alphabet() -> None:
    vocab = Vocab.build(CORPUS, min_freq=1)
    assert vocab.itos[:3] == [PAD, UNK, MASK] == list(SPECIALS)
    assert (vocab.pad_index, vocab.unk_index, vocab.mask_index) == (0, 1, 2)
    assert vocab.itos[3:] == ["the", "cat", "sat", "a", "dog", "end"]
    assert vocab.counts == [3, 2, 2, 1, 1, 1]


def test_min_freq_and_max_vocab() -> None:
    assert Vocab.build(CORPUS).itos[3:] == ["the", "cat", "sat"]
    assert Vocab.build(CORPUS, min_freq=1, max_vocab=2).itos[3:] == ["the", "cat"]
    assert len(Vocab.build(CORPUS, min_freq=3)) == 4
    with pytest.raises(DepinduceError, match="--min-freq"):
        Vocab.build(CORPUS, min_freq=0)
    with pytest.raises(DepinduceError, match="--max-vocab"):
        Vocab.build(CORPUS, max_vocab=0)


def test_a_special_in_the_text_is_not_added_twice() -> None:
    vocab = Vocab.build([["<unk>", "<unk>", "x", "x"]])
    assert vocab.itos == [PAD, UNK, MASK, "x"]


def test_encode_normalises_unless_told_not_to() -> None:
    vocab = Vocab.build([["the", "N", "cats"]] * 2)
    assert vocab.itos[3:] == ["N", "cats", "the"]  # equal counts: code-point order
    assert vocab.encode(["The", "1990", "Cats", "dogs"]) == [5, 3, 4, 1]
    assert vocab.encode(["The", "N"], normalize=False) == [1, 3]
    assert vocab.decode([5, 3, 1]) == ["the", "N", UNK]
    assert "cats" in vocab and "dogs" not in vocab


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    vocab = Vocab.build(CORPUS, min_freq=1, max_vocab=4, normalization=Normalization(lowercase=False))
    path = tmp_path / "vocab.json"
    vocab.save(path)
    data = json.loads(path.read_text())
    assert data["format"] == "depinduce-vocab" and data["size"] == 7
    loaded = Vocab.load(path)
    assert loaded.itos == vocab.itos and loaded.counts == vocab.counts
    assert loaded.normalization == Normalization(lowercase=False, fold_digits=True)
    assert (loaded.min_freq, loaded.max_vocab) == (1, 4)
    assert loaded.encode(["The"]) == [1]  # case kept, so "The" is unknown


@pytest.mark.parametrize(
    ("content", "message"),
    [("{\n  \"format\": ", "not valid JSON"), ("[1, 2]", "not a depinduce vocabulary"),
     ('{"format": "depinduce-vocab", "words": [1]}', "list of strings"),
     ('{"format": "depinduce-vocab", "words": ["a", "a"]}', "twice"),
     ('{"format": "depinduce-vocab", "words": [], "normalization": {"lowercase": "yes"}}', "normalization")],
)
def test_bad_vocab_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "vocab.json"
    path.write_text(content)
    with pytest.raises(InputError, match=message) as error:
        Vocab.load(path)
    assert str(error.value).startswith(str(path))


def test_bad_json_is_located(tmp_path: Path) -> None:
    path = tmp_path / "vocab.json"
    path.write_text('{\n  "format": "depinduce-vocab",\n  "words": [\n')
    with pytest.raises(InputError) as error:
        Vocab.load(path)
    assert str(error.value).startswith(f"{path}:4: ")


def test_normalization() -> None:
    assert Normalization().words(["The", "1,000", "U.S.", "a b"]) == ["the", "N,N", "u.s.", "a_b"]
    assert Normalization(lowercase=False, fold_digits=False).word("Year 1990") == "Year_1990"
    assert Normalization().word("9") == "N" and Normalization().word("No") == "no"
    assert overlap_key(["The", "$", "5", "million", ",", "''"]) == ("the", "N", "million")


def test_numbers_in_the_models_view_stay_numbers() -> None:
    """Text already normalised (a model-view ``.txt`` given as extra text or to ``parse --tokenized``) keeps its
    number placeholders: lower-casing "N.N" again would make every number the word "n.n"."""
    norm = Normalization()
    assert norm.words(["N", "N.N", "N,N", "$N", "N%", "-N"]) == ["N", "N.N", "N,N", "$N", "N%", "-N"]
    assert norm.word("２０２４年") == "N年" and norm.word("N年") == "N年"  # fused with uncased script: recognised
    assert norm.words(["Nancy", "No", "N'", "N’est", "NaN"]) == ["nancy", "no", "n'", "n’est", "nan"]  # words
    assert norm.word("1980s") == "Ns" and norm.word("Ns") == "ns"  # fused with letters: not recognised
    assert overlap_key(["N", "million"]) == overlap_key(["5", "million"])  # leak checks see the same sentence
    assert Normalization(fold_digits=False).word("N") == "n"  # no placeholders without folding
    vocab = Vocab.build([["rose", "N.N", "in", "N"]] * 2)  # parse --tokenized test.txt looks words up so
    assert vocab.encode(["N.N", "N"]) == vocab.encode(["3.5", "1990"])
    assert UNK not in vocab.decode(vocab.encode(["N.N", "N"]))


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="0123456789.,%$-/年月", min_size=1, max_size=8))
def test_normalising_numbers_twice_changes_nothing(word: str) -> None:
    norm = Normalization()
    once = norm.word(word)
    assert norm.word(once) == once


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.text(alphabet="abcXY1 ", min_size=1, max_size=5), max_size=6), max_size=8))
def test_every_training_word_above_the_threshold_round_trips(sentences: list[list[str]]) -> None:
    norm = Normalization()
    views = [norm.words(s) for s in sentences]
    vocab = Vocab.build(views, min_freq=1, normalization=norm)
    for raw, view in zip(sentences, views):
        assert vocab.decode(vocab.encode(raw)) == view
    assert len(vocab) == len(SPECIALS) + len({w for v in views for w in v} - set(SPECIALS))
