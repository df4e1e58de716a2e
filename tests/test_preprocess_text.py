"""``preprocess text``: rule-based sentence splitting, tokenisation, shape-based punctuation, raw-text errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st

from depinduce.cli.preprocess import preprocess
from depinduce.data.text import read_nltk_corpus, read_text_file, split_sentences, tokenize
from depinduce.errors import DepinduceError, InputError


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(preprocess, ["text", "--quiet", *args], input=input)


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("Mr. Smith went to Washington. He met J. Doe there.",
         ["Mr. Smith went to Washington.", "He met J. Doe there."]),
        ("The U.S. Army said no. It left on Jan. 5 at noon!", ["The U.S. Army said no.", "It left on Jan. 5 at noon!"]),
        ('"Why?" he asked. "Because." She smiled.', ['"Why?" he asked.', '"Because."', "She smiled."]),
        ("It costs 5.5 million... Really. (Yes.) Then it ended.",
         ["It costs 5.5 million...", "Really.", "(Yes.)", "Then it ended."]),
        ("Apple Inc. reported a loss. Shares fell 3.2 percent.",
         ["Apple Inc. reported a loss.", "Shares fell 3.2 percent."]),
        ("no capital after this. so it continues", ["no capital after this. so it continues"]),
        ("A line\nthat wraps. And ends.\n\nA new paragraph without a period\n\nLast one",
         ["A line that wraps.", "And ends.", "A new paragraph without a period", "Last one"]),
    ],
)
def test_rule_based_sentence_splitting(text: str, sentences: list[str]) -> None:
    assert split_sentences(text) == sentences


def test_one_per_line() -> None:
    assert split_sentences("First. Second.\n\n  third line \n", one_per_line=True) == ["First. Second.", "third line"]


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("Ab1 .!?\"'()\n")), max_size=80))
def test_splitting_loses_no_characters(text: str) -> None:
    """Splitting only chooses boundaries: the non-space characters come back unchanged and in order."""
    def squash(s: str) -> str:
        return re.sub(r"\s+", "", s)

    assert squash("".join(split_sentences(text))) == squash(text)
    assert all(s == s.strip() and s for s in split_sentences(text))


def test_treebank_tokenization() -> None:
    assert tokenize('"I don\'t know," she said (maybe).') == [
        "``", "I", "do", "n't", "know", ",", "''", "she", "said", "(", "maybe", ")", "."
    ]


def test_cli_on_a_file_and_on_stdin(tmp_path: Path) -> None:
    source = tmp_path / "story.txt"
    source.write_text("The cat sat. The cat ran 10 miles!\n\nA dog barked, twice.\n", encoding="utf-8")
    out = tmp_path / "out"
    result = run(str(source), "--out", str(out), "--min-freq", "1")
    assert result.exit_code == 0, result.output
    assert (out / "train.txt").read_text().splitlines() == ["the cat sat", "the cat ran N miles", "a dog barked twice"]
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "train.txt", "vocab.json"]
    vocab = json.loads((out / "vocab.json").read_text())
    assert vocab["words"][:2] == ["cat", "the"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["splits"]["train"]["sentences"] == 3 and manifest["punct_rule"] == "shape"

    piped = tmp_path / "piped"
    result = run("-", "--out", str(piped), "--one-per-line", "--cased", input="One line. Still one.\nTwo\n")
    assert result.exit_code == 0, result.output
    assert (piped / "train.txt").read_text().splitlines() == ["One line Still one", "Two"]


def test_read_text_file_keeps_lines(tmp_path: Path) -> None:
    source = tmp_path / "a.txt"
    source.write_text("First one.\n\nSecond\nspans lines. Third.\n", encoding="utf-8")
    sentences = read_text_file(str(source))
    assert [s.line for s in sentences] == [1, 3, 4]
    assert sentences[1].words == ["Second", "spans", "lines", "."]


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [(b"", 1, "empty file"), (b"  \n\n", 1, "empty file"), (b"fine\nbad \xff byte\n", 2, "not valid UTF-8"),
     (b"text\n\x00\x01binary", 2, "NUL byte")],
)
def test_bad_text_is_one_located_error(tmp_path: Path, content: bytes, line: int, message: str) -> None:
    source = tmp_path / "in.txt"
    source.write_bytes(content)
    out = tmp_path / "out"
    result = run(str(source), "--out", str(out))
    assert isinstance(result.exception, InputError)
    assert str(result.exception).startswith(f"{source}:{line}: ") and message in str(result.exception)
    assert not out.exists()


def test_text_needs_an_input(tmp_path: Path) -> None:
    result = run("--out", str(tmp_path / "out"))
    assert isinstance(result.exception, DepinduceError) and "--nltk-corpus" in str(result.exception)


def test_brown_corpus(nltk_data: Path) -> None:
    sentences = read_nltk_corpus("brown")
    assert len(sentences) == 57340
    assert sentences[0].words[:4] == ["The", "Fulton", "County", "Grand"]
    assert sentences[0].sent_id == "brown/ca01:1"
    with pytest.raises(DepinduceError, match="unknown NLTK corpus"):
        read_nltk_corpus("gutenberg")
