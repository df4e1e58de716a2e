"""The parse pipeline step by step (read → hide punctuation → score → decode → restore), and parse's default
decoder for a run whose own decoder does not always give a tree (issue 45, item 6)."""

from __future__ import annotations

from pathlib import Path

import conllu
import pytest
import torch
import yaml
from click.testing import CliRunner

import depinduce
from depinduce.cli.main import cli
from depinduce.data.vocab import Vocab
from depinduce.errors import InputError
from depinduce.models.base import ParseScores
from depinduce.models.registry import load_model
from depinduce.models.structformer.config import StructFormerConfig
from depinduce.models.structformer.model import StructFormer
from depinduce.pipeline import (
    ParseRequest, check_lengths, decode, decoder_for, hide_punctuation, parse, parse_default, read_text,
    restore_heads, restore_trees, score, text_sentence,
)
from depinduce.structures.dependency import is_tree


def test_the_steps_one_by_one_give_what_parse_gives(tmp_path: Path) -> None:
    text = tmp_path / "in.txt"
    text.write_text("Dogs bark , cats sleep .\n\n!\n")
    blank: list[list[int]] = []
    sentences = read_text(str(text), on_blank=blank.append)
    assert [s.words for s in sentences] == [["Dogs", "bark", ",", "cats", "sleep", "."], ["!"]] and blank == [[2]]
    backend = load_model("right-branching")
    batch = hide_punctuation(sentences, backend)
    assert batch.hidden == [[False, False, True, False, False, True], [True]] and batch.nonempty == [0]
    score(batch, backend, "in.txt")
    assert list(batch.scores) == [0] and batch.scores[0].fixed_heads == [2, 3, 4, 0]
    decode(batch, backend, decoder_for(backend, "mst"))
    assert batch.heads == {0: [2, 3, 4, 0]}
    restore_heads(batch, backend)
    restore_trees(batch)
    first, only_punct = batch.sentences
    # ',' attaches to the word before it, the final '.' to the root word; hidden tokens are marked punctuation
    assert first.heads == [2, 4, 2, 5, 0, 5] and first.deprels == ["dep", "dep", "punct", "dep", "root", "punct"]
    assert first.upos == ["_", "_", "PUNCT", "_", "_", "PUNCT"] and only_punct.heads == [0]
    whole = list(parse(read_text(str(text)), backend, ParseRequest(fmt="jsonl"), progress=False))
    assert [(s.heads, s.deprels, s.upos, str(s.tree)) for s in whole] == \
        [(s.heads, s.deprels, s.upos, str(s.tree)) for s in batch.sentences]


def test_the_length_limit_applies_to_backends_that_score_every_pair() -> None:
    long = [text_sentence("a b c d", 4)]
    for name, refused in (("random", True), ("right-branching", False)):
        backend = load_model(name)
        batch = hide_punctuation(long, backend)
        if refused:
            with pytest.raises(InputError, match=r"^in:4: sentence 4 has 4 words for the model; model 'random' "):
                check_lengths(batch, backend, 3, "in")
        else:
            check_lengths(batch, backend, 3, "in")  # a fixed tree needs no score matrix: any length parses


def test_structformer_argmax_roots_the_highest_word_where_others_take_the_best_head() -> None:
    neg = float("-inf")
    heads = torch.tensor([[neg, neg, neg, neg],
                          [-0.1, neg, -0.5, -3.0],
                          [-2.0, -0.2, neg, -0.3],
                          [-1.0, -0.9, -0.4, neg]])
    scores = ParseScores(heads=heads, heights=torch.tensor([0.1, 0.2, 3.0]))
    assert decoder_for(StructFormer, "argmax").decode([scores]) == [[2, 1, 0]]  # word 3 is the highest: the root
    assert decoder_for(load_model("random"), "argmax").decode([scores]) == [[0, 1, 2]]  # each word's best head
    assert not decoder_for(StructFormer, "argmax").gives_trees and decoder_for(StructFormer, "mst").gives_trees
    assert not decoder_for(StructFormer, "structformer-argmax").gives_trees


TEXT = "".join(f"{line}\n" for line in (
    "the cat sat on the mat", "dogs bark at the big old cat", "a man saw a dog with the telescope",
    "the child knew the old man in the house near the river", "cats sleep", "every bird found some tree"))


def _structformer_run(folder: Path, decoder: str) -> Path:
    """An untrained StructFormer run directory whose config names ``decoder`` as its train.decoder."""
    folder.mkdir()
    words = sorted({w for line in TEXT.split() for w in line.split()})
    vocab = Vocab(words)
    vocab.save(folder / "vocab.json")
    config = {"hidden_size": 16, "n_layers": 1, "n_heads": 2, "ff_size": 16, "n_parser_layers": 1, "conv_size": 3}
    torch.manual_seed(3)
    torch.save(StructFormer(StructFormerConfig(**config), vocab).state_dict(), folder / "model.pt")
    (folder / "config.yaml").write_text(yaml.safe_dump({"model": "structformer", "model_config": config,
                                                        "train": {"decoder": decoder}}))
    return folder


def _parse(args: list[str]) -> tuple[str, str]:
    result = CliRunner().invoke(cli, ["parse", "--quiet", *args], input=TEXT, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout, result.stderr


def test_a_run_whose_own_decoder_gives_no_trees_parses_into_trees_by_default(tmp_path: Path) -> None:
    run = str(_structformer_run(tmp_path / "paper", "structformer-argmax"))
    own, own_err = _parse(["--model", run, "--decoder", "structformer-argmax", "-"])
    assert not all(is_tree([t["head"] for t in s]) for s in conllu.parse(own))  # the authors' parses: not trees
    default, said = _parse(["--model", run, "-"])
    assert default == _parse(["--model", run, "--decoder", "mst", "-"])[0] != own
    assert all(is_tree([t["head"] for t in s]) for s in conllu.parse(default))
    # said once, naming the run's decoder and how to ask for it; nothing when the user chose a decoder
    assert said.count("--decoder structformer-argmax parses with it") == 1 and "writing mst trees" in said
    assert "config.yaml" in said and own_err == ""
    # brackets come from the distances: no decoder is used, nothing is said
    assert _parse(["--model", run, "--format", "brackets", "-"])[1] == ""
    # the run still selects and reports with its own decoder; the Python API parses as the command line does
    parser = depinduce.load(run)
    assert parser.backend.default_decoder == "structformer-argmax" and parser.default_decoder == "mst"
    assert parse_default(parser.backend)[0] == "mst" and parser.decoder_note("conllu") in said
    assert "".join(p.to_conllu() for p in parser.parse(TEXT.splitlines())) == default


def test_a_run_whose_own_decoder_gives_trees_keeps_it(tmp_path: Path) -> None:
    run = str(_structformer_run(tmp_path / "projective", "eisner"))
    default, said = _parse(["--model", run, "-"])
    assert default == _parse(["--model", run, "--decoder", "eisner", "-"])[0] and said == ""
    parser = depinduce.load(run)
    assert parse_default(parser.backend) == ("eisner", None) and parser.decoder_note() is None


def test_the_text_reader_takes_any_tokenizer_and_locates_what_it_refuses(tmp_path: Path) -> None:
    from depinduce.io.text_input import read_text as read_lines

    def dashes(line: str) -> tuple[list[str], list[bool]]:
        if "!" in line:
            raise ValueError("no exclamations")
        forms = line.replace("-", " - ").split()
        return forms, [True] * len(forms)

    path = tmp_path / "in.txt"
    path.write_text("well-known words\n")
    (sentence,) = read_lines(str(path), dashes)
    assert sentence.words == ["well", "-", "known", "words"] and sentence.sent_id == "1"
    path.write_text("fine\nstop!\n")
    with pytest.raises(InputError, match=r"in\.txt:2: no exclamations$"):
        read_lines(str(path), dashes)
