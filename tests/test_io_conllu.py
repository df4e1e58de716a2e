"""CoNLL-U reading and writing: round trips, the parse-output path, and the UD validator at level 2."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import pytest
from conllu.models import TokenList
from hypothesis import given, settings
from hypothesis import strategies as st

from depinduce.structures.sentence import Sentence
from depinduce.io import format_conllu, parse_conllu_text, read_sentences, write_sentences
from depinduce.io.conllu_format import space_after_from_text

pytestmark = pytest.mark.lower_bounds  # conllu, quickly (scripts/check_lower_bounds.py)

DATA = Path(__file__).parent / "data" / "io"


def _udvalidate(path: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("udvalidate")
    if exe is None:
        pytest.skip("udvalidate (udtools) is not installed")
    return subprocess.run([exe, "--lang", "ud", "--level", "2", str(path)], capture_output=True, text=True)


def _assert_valid(path: Path) -> None:
    result = _udvalidate(path)
    assert result.returncode == 0, result.stdout + result.stderr


def _written(sentences: list[Sentence], fmt: str = "conllu-ud") -> str:
    out = io.StringIO()
    write_sentences(sentences, out, fmt)
    return out.getvalue()


def _ewt_slice(ewt_dir: Path, tmp_path: Path, n: int = 120) -> Path:
    """The first n sentences of EWT dev, copied to tmp_path (never into the repository)."""
    text = (ewt_dir / "en_ewt-ud-dev.conllu").read_text(encoding="utf-8")
    blocks = text.split("\n\n")[:n]
    path = tmp_path / "ewt_slice.conllu"
    path.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    return path


def _chain(n: int) -> list[int]:
    """Every word headed by the next one, the last word the root: a tree unlike any gold one."""
    return [i + 2 for i in range(n - 1)] + [0]


# ------------------------------------------------------------------------------------------------ reading


def test_reader_fills_sentence_fields_and_drops_multiword_and_empty_nodes():
    first, second = read_sentences(DATA / "mwt_no_text.conllu")
    assert first.words == ["do", "n't", "know", "!"]
    assert first.heads == [3, 3, 0, 3]
    assert first.deprels == ["aux", "advmod", "root", "punct"]
    assert first.upos == ["AUX", "PART", "VERB", "PUNCT"]
    assert first.xpos == ["VBP", "RB", "VB", "."]
    assert first.metadata == {"newdoc id": "d1"}
    assert first.sent_id is None and first.text is None
    assert (first.line, second.line) == (1, 9)
    assert isinstance(first.source, TokenList) and len(first.source) == 6  # MWT and empty node kept there
    assert second.words == ['"', "Yes", '"']


def test_unannotated_columns_become_none():
    text = "1\tHello\t_\t_\t_\t_\t_\t_\t_\t_\n2\tthere\t_\t_\t_\t_\t_\t_\t_\t_\n"
    (sentence,) = parse_conllu_text(text, "<test>")
    assert sentence.words == ["Hello", "there"]
    assert sentence.heads is None and sentence.deprels is None
    assert sentence.upos is None and sentence.xpos is None


def test_sloppy_but_valid_file_is_read(tmp_path):
    # CRLF, trailing spaces/tabs, three blank lines between sentences, no final newline, a BOM
    lines = [
        "\ufeff# sent_id = a", "# text = Hi there", "1\tHi\thi\tINTJ\tUH\t_\t2\tdiscourse\t_\t_ \t",
        "2\tthere\tthere\tADV\tRB\t_\t0\troot\t_\t_", "", "  ", "\t", "# sent_id = b", "# text = Go",
        "1\tGo\tgo\tVERB\tVB\t_\t0\troot\t_\t_",
    ]
    path = tmp_path / "sloppy.conllu"
    path.write_bytes("\r\n".join(lines).encode("utf-8"))
    a, b = read_sentences(path)
    assert (a.sent_id, a.words, a.heads, a.line) == ("a", ["Hi", "there"], [2, 0], 1)
    assert (b.sent_id, b.words, b.heads, b.line) == ("b", ["Go"], [0], 8)


# ------------------------------------------------------------------------------------------------ writing


def test_ewt_slice_round_trips_byte_for_byte_and_validates(ewt_dir, tmp_path):
    path = _ewt_slice(ewt_dir, tmp_path)
    sentences = read_sentences(path)
    out = tmp_path / "out.conllu"
    out.write_text(_written(sentences), encoding="utf-8")
    assert out.read_text(encoding="utf-8") == path.read_text(encoding="utf-8")
    _assert_valid(out)


def test_parse_output_keeps_every_column_but_head_and_deprel(ewt_dir, tmp_path):
    path = _ewt_slice(ewt_dir, tmp_path, n=60)
    sentences = read_sentences(path)
    before = [[dict(t) for t in s.source] for s in sentences]
    for s in sentences:  # the writer's part of `parse --input-format conllu`: new heads, no labels (parse also
        # drops the input's enhanced graph first: tests/test_parse_cli.py)
        s.heads = _chain(len(s.words))
        s.deprels = None
    out = tmp_path / "parsed.conllu"
    out.write_text(_written(sentences), encoding="utf-8")
    _assert_valid(out)
    assert [[dict(t) for t in s.source] for s in sentences] == before  # the caller's source is not mutated

    reread = read_sentences(out)
    original = path.read_text(encoding="utf-8").splitlines()
    written = out.read_text(encoding="utf-8").splitlines()
    assert len(original) == len(written)
    for old, new in zip(original, written):
        if old.startswith("#") or not old:
            assert old == new
            continue
        old_cols, new_cols = old.split("\t"), new.split("\t")
        keep = [0, 1, 2, 3, 4, 5, 8, 9]
        assert [old_cols[i] for i in keep] == [new_cols[i] for i in keep]
    for s, r in zip(sentences, reread):
        assert r.heads == s.heads
        assert r.deprels == ["root" if h == 0 else "dep" for h in s.heads]


def test_fresh_sentences_with_unicode_quotes_and_brackets_validate(tmp_path):
    sentences = [
        Sentence(words=["Olá", ",", "“", "mundo", "”", "(", "x", ")", "!"], heads=[0] + [1] * 8),
        Sentence(words=["Hello", ",", "world", "!"], text="Hello, world!", heads=[3, 1, 0, 3]),
        Sentence(words=["He", "said", '"', "hi", '"'], text='He said "hi"', heads=[2, 0, 4, 2, 4],
                 upos=["PRON", "VERB", "PUNCT", "INTJ", "PUNCT"], xpos=["PRP", "VBD", "``", "UH", "''"]),
        Sentence(words=["a", "b"], sent_id="dup", heads=[0, 1]),
        Sentence(words=["c"], sent_id="dup", heads=[0]),
        Sentence(words=["Straße", "[", "ß", "]", "{", "Ω", "}"], text="Straße [ß]{Ω}",
                 heads=[0, 1, 1, 1, 1, 1, 1]),
    ]
    out = tmp_path / "fresh.conllu"
    out.write_text(_written(sentences), encoding="utf-8")
    _assert_valid(out)
    reread = read_sentences(out)
    assert [r.words for r in reread] == [s.words for s in sentences]
    assert [r.sent_id for r in reread] == ["1", "2", "3", "dup", "dup-2", "6"]
    assert [r.text for r in reread] == [
        "Olá , “ mundo ” ( x ) !", "Hello, world!", 'He said "hi"', "a b", "c", "Straße [ß]{Ω}",
    ]
    assert reread[2].upos == ["PRON", "VERB", "PUNCT", "INTJ", "PUNCT"]
    assert reread[0].upos == ["X"] * 9


def test_text_rebuilt_from_multiword_tokens_and_space_after(tmp_path):
    sentences = read_sentences(DATA / "mwt_no_text.conllu")
    out = tmp_path / "mwt.conllu"
    out.write_text(_written(sentences), encoding="utf-8")
    _assert_valid(out)
    assert [s.text for s in read_sentences(out)] == ["don't know!", '"Yes"']


def test_text_that_the_words_do_not_spell_is_rebuilt_from_the_words():
    block = format_conllu(Sentence(words=["``", "Hi", "''"], text='"Hi"', heads=[2, 0, 2]))
    assert "# text = `` Hi ''\n" in block
    assert "SpaceAfter" not in block


def test_parse_pipeline_style_source_is_filled():
    """The parse command builds a TokenList source with HEAD unset; the writer fills HEAD/DEPREL."""
    from conllu.models import Token

    source = TokenList(
        [Token(id=1, form="Hi", lemma="_", upos="X", xpos=None, feats=None, head=None, deprel=None,
               deps=None, misc={"SpaceAfter": "No"}),
         Token(id=2, form="!", lemma="_", upos="X", xpos=None, feats=None, head=None, deprel=None,
               deps=None, misc=None)],
        metadata={"sent_id": "7", "text": "Hi!"},
    )
    block = format_conllu(Sentence(words=["Hi", "!"], heads=[0, 1], source=source))
    assert block == ("# sent_id = 7\n# text = Hi!\n1\tHi\t_\tX\t_\t_\t0\troot\t_\tSpaceAfter=No\n"
                     "2\t!\t_\tX\t_\t_\t1\tdep\t_\t_\n\n")


def test_writer_streams_a_generator_one_sentence_at_a_time():
    written: list[int] = []

    class Recorder(io.StringIO):
        def write(self, s: str) -> int:
            written.append(len(produced))
            return super().write(s)

    produced: list[int] = []

    def generate():
        for k in range(3):
            produced.append(k)
            yield Sentence(words=["w"], heads=[0])

    assert write_sentences(generate(), Recorder(), "conllu") == 3
    assert written == [1, 2, 3]  # each sentence is written before the next one is produced


def test_writer_refuses_unwritable_words():
    from depinduce.errors import DepinduceError

    with pytest.raises(DepinduceError, match="sentence 1"):
        format_conllu(Sentence(words=["a\tb"], heads=[0]))
    with pytest.raises(DepinduceError, match="empty sentence"):
        format_conllu(Sentence(words=[]))


# ------------------------------------------------------------------------------------------------ properties

_WORD = st.text(
    alphabet=st.sampled_from(list("abcXYZéßøΩж中()[]{}\"'“”.,;:!?-_#=|0123456789")), min_size=1, max_size=6
)


@st.composite
def _trees(draw):
    n = draw(st.integers(min_value=1, max_value=12))
    order = draw(st.permutations(list(range(1, n + 1))))
    heads = [0] * n
    for k, word in enumerate(order[1:], start=1):  # attach each word to one placed before it: always a tree
        heads[word - 1] = order[draw(st.integers(min_value=0, max_value=k - 1))]
    return heads


@settings(max_examples=60, deadline=None)
@given(words=st.lists(_WORD, min_size=12, max_size=12), heads=_trees(), spaces=st.lists(st.booleans(), min_size=12,
                                                                                       max_size=12))
def test_property_write_then_read_gives_back_words_heads_and_text(words, heads, spaces):
    n = len(heads)
    words = words[:n]
    text = "".join(w + (" " if space else "") for w, space in zip(words, spaces)).strip()
    (reread,) = parse_conllu_text(_written([Sentence(words=words, heads=heads, text=text)]), "<test>")
    assert reread.words == words
    assert reread.heads == heads
    assert reread.deprels == ["root" if h == 0 else "dep" for h in heads]
    assert reread.text == text


@given(words=st.lists(_WORD, min_size=1, max_size=8), spaces=st.lists(st.booleans(), min_size=8, max_size=8))
def test_property_space_after_reproduces_the_text(words, spaces):
    text = "".join(w + (" " if s else "") for w, s in zip(words, spaces)).strip()
    flags = space_after_from_text(words, text)
    assert flags is not None
    rebuilt = "".join(w + (" " if f else "") for w, f in zip(words, flags)).strip()
    assert rebuilt == text
