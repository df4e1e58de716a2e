"""CoNLL-X, the word/tag/head format, JSON Lines, format detection and the read/write dispatch."""

from __future__ import annotations

import io
import json
import sys
import zipfile
from pathlib import Path

import pytest
from nltk import Tree

from depinduce.structures.sentence import Sentence
from depinduce.errors import DepinduceError, InputError
from depinduce.io import (
    detect_format,
    format_conllx,
    parse_conllx_text,
    read_sentences,
    write_sentences,
)

DATA = Path(__file__).parent / "data" / "io"


def _written(sentences: list[Sentence], fmt: str) -> str:
    out = io.StringIO()
    write_sentences(sentences, out, fmt)
    return out.getvalue()


# ------------------------------------------------------------------------------------------------ CoNLL-X


def test_conllx_output_is_what_malteval_reads():
    sentences = [
        Sentence(words=["The", "dog", "barks"], heads=[2, 3, 0], xpos=["DT", "NN", "VBZ"]),
        Sentence(words=["Hi", "!"], heads=[0, 1], upos=["INTJ", "PUNCT"], xpos=["UH", "."], deprels=["root", "_"]),
        Sentence(words=["(", "x", ")"], heads=[2, 0, 2], deprels=["punct", "root", "punct"]),
    ]
    text = _written(sentences, "conllx")
    assert text.endswith("\n\n") and not text.endswith("\n\n\n")  # exactly one empty line at the end
    blocks = text[:-2].split("\n\n")
    assert len(blocks) == 3  # exactly one empty line between sentences
    for block in blocks:
        for k, line in enumerate(block.split("\n"), start=1):
            cols = line.split("\t")
            assert len(cols) == 10 and all(cols)
            assert cols[0] == str(k) and cols[6].isdigit() and cols[7] != "_"
    assert blocks[0].split("\n")[0] == "1\tThe\t_\tDT\tDT\t_\t2\tdep\t_\t_"
    assert blocks[1].split("\n") == ["1\tHi\t_\tINTJ\tUH\t_\t0\troot\t_\t_", "2\t!\t_\tPUNCT\t.\t_\t1\tdep\t_\t_"]
    assert blocks[2].split("\n")[0] == "1\t(\t_\t_\t_\t_\t2\tpunct\t_\t_"


def test_conllx_from_conllu_drops_comments_multiwords_and_empty_nodes_and_keeps_lemmas():
    text = _written(read_sentences(DATA / "mwt_no_text.conllu"), "conllx")
    assert "#" not in text and "1-2\t" not in text and "3.1\t" not in text
    assert text.split("\n")[:2] == ["1\tdo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_", "2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_"]


def test_conllx_round_trip_and_tag_columns():
    sentences = read_sentences(DATA / "ptb.conllx")
    assert [s.words for s in sentences] == [["The", "dog", "barks"], ["OK"]]
    assert sentences[0].xpos == ["DT", "NN", "VBZ"] and sentences[0].upos is None  # CPOSTAG is not UD here
    assert sentences[0].deprels == ["NMOD", "SBJ", "ROOT"]
    assert (sentences[0].line, sentences[1].line) == (1, 5)
    assert _written(sentences, "conllx") == (  # lemmas are not kept by the CoNLL-X reader
        "1\tThe\t_\tDT\tDT\t_\t2\tNMOD\t_\t_\n2\tdog\t_\tNN\tNN\t_\t3\tSBJ\t_\t_\n"
        "3\tbarks\t_\tVBZ\tVBZ\t_\t0\tROOT\t_\t_\n\n1\tOK\t_\tUH\tUH\t_\t0\tROOT\t_\t_\n\n"
    )
    (ud,) = parse_conllx_text("1\tGo\tgo\tVERB\tVB\t_\t0\troot\t_\t_\n", "x")
    assert ud.upos == ["VERB"] and ud.xpos == ["VB"]
    (eight,) = parse_conllx_text("1\tGo\tgo\tV\tVB\t_\t0\tROOT\n2\tnow\tnow\tR\tRB\t_\t1\tADV\n", "x")
    assert eight.heads == [0, 1] and eight.upos is None and eight.xpos == ["VB", "RB"]


def test_conllx_writer_needs_heads():
    with pytest.raises(DepinduceError, match="sentence 1: has no heads"):
        format_conllx(Sentence(words=["a"]))


def test_conllx_reader_errors_are_located():
    with pytest.raises(InputError) as err:
        parse_conllx_text("1\ta\t_\tX\tX\t_\t0\troot\t_\t_\n\n1\tb\t_\tX\tX\t_\t0\troot\t_\n", "f.conllx")
    assert str(err.value) == "f.conllx:3: expected 10 tab-separated columns, found 9"
    with pytest.raises(InputError) as err:
        parse_conllx_text("1\ta\t_\tX\tX\t_\t0\troot\t_\t_\n2\tb\t_\tX\tX\t_\tx\troot\t_\t_\n", "f.conllx")
    assert str(err.value) == "f.conllx:2: HEAD 'x' is not a non-negative integer"


# ------------------------------------------------------------------------------------------------ tabular


def test_tabular_four_columns_and_words_that_look_like_comments_or_ids():
    first, second = read_sentences(DATA / "labelled.dp")
    assert (first.words, first.xpos, first.heads, first.deprels) == (
        ["The", "dog", "barks"], ["DT", "NN", "VBZ"], [2, 3, 0], ["NMOD", "SBJ", "ROOT"])
    assert (second.words, second.heads, second.line) == (["#", "1.5"], [2, 0], 5)


def test_nltk_dependency_treebank_files(nltk_data, tmp_path):
    with zipfile.ZipFile(nltk_data / "corpora" / "dependency_treebank.zip") as archive:
        data = archive.read("dependency_treebank/wsj_0001.dp")
    path = tmp_path / "wsj_0001.dp"
    path.write_bytes(data)
    assert detect_format(path) == "tabular"
    first, second = read_sentences(path)
    assert first.words[:3] == ["Pierre", "Vinken", ","] and first.xpos[:3] == ["NNP", "NNP", ","]
    assert first.heads[:3] == [2, 8, 2] and first.deprels is None
    assert second.line == len(first.words) + 2
    from nltk.corpus import dependency_treebank

    gold = dependency_treebank.parsed_sents("wsj_0001.dp")
    assert [s.words for s in (first, second)] == [[g.nodes[i]["word"] for i in range(1, len(g.nodes))] for g in gold]


# ------------------------------------------------------------------------------------------------ JSON Lines


def test_jsonl_one_object_per_sentence():
    sentences = [
        Sentence(words=["Olá", "mundo"], heads=[2, 0], sent_id="s1", tree=Tree("", ["Olá", "mundo"])),
        Sentence(words=["x"]),
    ]
    lines = _written(sentences, "jsonl").splitlines()
    assert "Olá" in lines[0]  # not \\u-escaped
    assert [json.loads(line) for line in lines] == [
        {"sent_id": "s1", "words": ["Olá", "mundo"], "heads": [2, 0], "deprels": None, "tree": "(Olá mundo)"},
        {"sent_id": "2", "words": ["x"], "heads": None, "deprels": None, "tree": None},
    ]


# ------------------------------------------------------------------------------------------------ detection


@pytest.mark.parametrize(
    "content, fmt",
    [
        ("# sent_id = 1\n1\tA\ta\tNOUN\tNN\t_\t0\troot\t_\t_\n", "conllu"),
        ("1\tA\ta\tNOUN\tNN\t_\t0\troot\t_\t_\n", "conllu"),  # no comment, but UD tags in column 4
        ("1-2\tAB\t_\t_\t_\t_\t_\t_\t_\t_\n1\tA\t_\tX\tX\t_\t0\troot\t_\t_\n2\tB\t_\tX\tX\t_\t1\tdep\t_\t_\n",
         "conllu"),
        ("1\tA\ta\tNN\tNN\t_\t0\tROOT\t_\t_\n", "conllx"),
        ("1\tA\ta\tNN\tNN\t_\t0\tROOT\n", "conllx"),
        ("A\tNN\t0\n", "tabular"),
        ("A\tNN\t0\tROOT\n", "tabular"),
        ("#\t#\t0\n", "tabular"),
        ("(\t-LRB-\t0\n", "tabular"),
        ("A NN 0\n", "tabular"),
        ("\n\n  (S (NP (NN a)))\n", "brackets"),
        ("((a b) c)\n", "brackets"),
    ],
)
def test_detect_format(tmp_path, content, fmt):
    path = tmp_path / "input"
    path.write_text(content, encoding="utf-8")
    assert detect_format(path) == fmt
    assert len(read_sentences(path)) == 1


def test_undetectable_format_names_the_line(tmp_path):
    path = tmp_path / "plain.txt"
    path.write_text("\nThis is plain text .\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        detect_format(path)
    assert str(err.value).startswith(f"{path}:2: cannot tell the format from a line of 5 columns")


def test_stdin_is_read_once_and_named_in_errors(monkeypatch):
    class FakeStdin:
        buffer = io.BytesIO(b"A\tNN\t2\nB\tNN\t0\n")

    monkeypatch.setattr(sys, "stdin", FakeStdin())
    (sentence,) = read_sentences("-")
    assert sentence.words == ["A", "B"] and sentence.heads == [2, 0]

    FakeStdin.buffer = io.BytesIO(b"A\tNN\t2\nB\tNN\t3\n")
    with pytest.raises(InputError) as err:
        read_sentences("-")
    assert str(err.value) == "<stdin>:2: HEAD 3 of word 2 is outside 0..2"


def test_unknown_format_names_are_refused():
    with pytest.raises(DepinduceError, match="unknown input format 'xml'"):
        read_sentences(DATA / "ptb.conllx", fmt="xml")
    with pytest.raises(DepinduceError, match="unknown output format 'xml'"):
        write_sentences([], io.StringIO(), "xml")
