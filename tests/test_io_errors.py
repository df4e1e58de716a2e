"""Every kind of malformed input is one InputError naming FILE:LINE — never a traceback or a silent guess."""

from __future__ import annotations

from pathlib import Path

import pytest

from depinduce.errors import InputError
from depinduce.io import parse_conllu_text, read_sentences

DATA = Path(__file__).parent / "data" / "io"


def _error(path: Path, **kwargs) -> str:
    with pytest.raises(InputError) as err:
        read_sentences(path, **kwargs)
    return str(err.value)


@pytest.mark.parametrize(
    "file, line, problem",
    [
        ("wrong_columns.conllu", 10, "expected 10 tab-separated columns, found 9"),
        ("bad_head.conllu", 8, "HEAD 'two' is not a non-negative integer"),
        ("head_out_of_range.conllu", 5, "HEAD 7 of word 3 is outside 0..3"),
        ("two_roots.conllu", 4, "not a tree: 2 words attached to ROOT (1, 2); a tree has exactly one"),
        ("cycle.conllu", 5, "not a tree: cycle through words 3 -> 4"),
        ("id_sequence.conllu", 4, "word ID 3 out of sequence; expected 2"),
        ("orphan_comments.conllu", 1, "comment lines not followed by any token line"),
        ("wrong_columns.dp", 6, "expected 3 columns like the first line, found 4"),
        ("negative_head.dp", 3, "HEAD '-1' is not a non-negative integer"),
        ("unclosed.txt", 2, "unbalanced brackets: '(' opened here is never closed"),
        ("extra_close.txt", 2, "unbalanced brackets: ')' without a matching '('"),
    ],
)
def test_malformed_files(file, line, problem):
    path = DATA / file
    assert _error(path) == f"{path}:{line}: {problem}"


@pytest.mark.parametrize("file", ["empty.conllu", "blank.txt"])
def test_empty_inputs_have_no_sentences(file):
    path = DATA / file
    assert _error(path) == f"{path}: no sentences (the input is empty or blank)"
    assert _error(path, fmt="conllu") == f"{path}: no sentences (the input is empty or blank)"


def test_non_utf8_byte_is_located(tmp_path):
    path = tmp_path / "latin1.conllu"
    good = "1\tIt\t_\tX\t_\t_\t0\troot\t_\t_\n\n"
    path.write_bytes(good.encode() + b"1\tCaf\xe9\t_\tX\t_\t_\t0\troot\t_\t_\n")
    assert _error(path) == f"{path}:3: not valid UTF-8: byte 0xe9 at byte 6 of the line"


def test_crlf_lines_are_numbered_like_lf_lines(tmp_path):
    path = tmp_path / "crlf.dp"
    path.write_bytes(b"a\tX\t2\r\nb\tX\t0\r\n\r\n\r\nc\tX\t0\r\nd\tX\t9\r\n")
    assert _error(path) == f"{path}:6: HEAD 9 of word 2 is outside 0..2"


def test_check_trees_false_accepts_non_trees_but_not_impossible_heads(tmp_path):
    (two_roots,) = read_sentences(DATA / "two_roots.conllu", check_trees=False)
    assert two_roots.heads == [0, 0, 2]
    (cycle,) = read_sentences(DATA / "cycle.conllu", check_trees=False)
    assert cycle.heads == [2, 0, 4, 3]
    path = DATA / "head_out_of_range.conllu"
    assert _error(path, check_trees=False) == f"{path}:5: HEAD 7 of word 3 is outside 0..3"


def test_tree_checks_in_the_other_formats(tmp_path):
    path = tmp_path / "loop.dp"
    path.write_text("a\tX\t0\nb\tX\t2\n", encoding="utf-8")
    assert _error(path) == f"{path}:2: not a tree: word 2 is its own head"
    path = tmp_path / "roots.conllx"
    path.write_text("1\ta\t_\tX\tX\t_\t0\tr\t_\t_\n2\tb\t_\tX\tX\t_\t0\tr\t_\t_\n", encoding="utf-8")
    expected = f"{path}:2: not a tree: 2 words attached to ROOT (1, 2); a tree has exactly one"
    assert _error(path, fmt="conllx") == expected


@pytest.mark.parametrize(
    "line, problem",
    [
        ("3\tA\t_\tX\t_\t_\t_\tdep\t_\t_", "HEAD is '_' although other words of the sentence have heads"),
        ("x\tA\t_\tX\t_\t_\t1\tdep\t_\t_", "invalid ID 'x'"),
        ("1\tA\t\tX\t_\t_\t1\tdep\t_\t_", "column LEMMA is empty (use '_' for no value)"),
        ("1\tA  B\t_\tX\t_\t_\t1\tdep\t_\t_", "column FORM contains two consecutive spaces"),
        ("1-3\tAB\t_\t_\t_\t_\t_\t_\t_\t_", "multiword token 1-3 must start at word 3"),
        ("3-3\tAB\t_\t_\t_\t_\t_\t_\t_\t_", "multiword token range 3-3 is not increasing"),
        ("5.1\tA\t_\tX\t_\t_\t_\t_\t_\t_", "empty node 5.1 must follow word 2"),
        ("2\tA\t_\tX\t_\t_\t1\tdep\t_\t_", "word ID 2 out of sequence; expected 3"),
    ],
)
def test_conllu_line_checks(line, problem):
    text = "# sent_id = 1\n1\tA\t_\tX\t_\t_\t0\troot\t_\t_\n2\tB\t_\tX\t_\t_\t1\tdep\t_\t_\n" + line + "\n"
    with pytest.raises(InputError) as err:
        parse_conllu_text(text, "f.conllu")
    assert str(err.value) == f"f.conllu:4: {problem}"


def test_multiword_token_past_the_last_word():
    text = "1-3\tABC\t_\t_\t_\t_\t_\t_\t_\t_\n1\tA\t_\tX\t_\t_\t0\troot\t_\t_\n2\tB\t_\tX\t_\t_\t1\tdep\t_\t_\n"
    with pytest.raises(InputError) as err:
        parse_conllu_text(text, "f.conllu")
    assert str(err.value) == "f.conllu:1: multiword token ends at word 3; the sentence has 2"
