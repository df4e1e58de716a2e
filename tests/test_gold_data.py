"""Gold CoNLL-U → index rows for supervised backends (depinduce.training.gold_data)."""

from __future__ import annotations

from pathlib import Path

import pytest

from depinduce.data.normalize import Normalization
from depinduce.data.vocab import Vocab
from depinduce.errors import DepinduceError, InputError
from depinduce.data.tags import TagVocab
from depinduce.training.gold_data import (
    collate_gold,
    load_gold_data,
    read_initial_graphs,
)

TRAIN = """# sent_id = a
# text = The cat sat.
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tsat\tsit\tVERB\tVBD\t_\t0\troot\t_\tSpaceAfter=No
4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

# sent_id = b
# text = The dog was seen.
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tdog\tdog\tNOUN\tNN\t_\t4\tnsubj:pass\t_\t_
3\twas\tbe\tAUX\tVBD\t_\t4\taux:pass\t_\t_
4\tseen\tsee\tVERB\tVBN\t_\t0\troot\t_\tSpaceAfter=No
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_

"""

DEV = """# sent_id = c
# text = A cat sat!
1\tA\ta\tDET\tDT\t_\t2\tdet\t_\t_
2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tsat\tsit\tVERB\tVBD\t_\t0\troot\t_\tSpaceAfter=No
4\t!\t!\tPUNCT\t.\t_\t3\tpunct\t_\t_

# sent_id = d
# text = Wow
1\tWow\twow\tINTJ\tUH\t_\t0\troot\t_\t_

"""


def _folder(tmp_path: Path, train: str = TRAIN, dev: str | None = DEV) -> Path:
    (tmp_path / "train.conllu").write_text(train, encoding="utf-8")
    if dev is not None:
        (tmp_path / "dev.conllu").write_text(dev, encoding="utf-8")
    Vocab.build([["the", "cat"], ["the"]], min_freq=1, normalization=Normalization()).save(tmp_path / "vocab.json")
    return tmp_path


def test_rows_keep_every_token_with_gold_heads_and_labels(tmp_path):
    data = load_gold_data(_folder(tmp_path))
    first = data.train[0]
    assert len(first) == 4  # punctuation kept
    assert first.heads == [2, 3, 0, 3]
    assert data.tags.label_itos[first.labels[3]] == "punct"
    assert data.tags.upos_itos[first.upos[3]] == "PUNCT"
    # the word vocabulary covers punctuation (the data folder's vocab.json, built without it, does not)
    assert data.vocab.decode(first.words) == ["the", "cat", "sat", "."]
    # whole labels are kept; the dev-only label and tag map to the unseen ids
    assert "nsubj:pass" in data.tags.label_itos
    dev_wow = data.dev[1]
    assert dev_wow.labels == [data.tags.label_stoi["root"]]
    assert dev_wow.upos == [TagVocab.upos_unk_index]
    assert data.dev[0].words[3] == Vocab.unk_index  # '!' never seen in training


def test_word_vocab_follows_data_folder_normalisation_and_threshold(tmp_path):
    folder = _folder(tmp_path)
    Vocab.build([["the"]], min_freq=2, normalization=Normalization()).save(folder / "vocab.json")
    data = load_gold_data(folder)
    # min_freq 2 over all tokens: 'the' (2), '.' (2) kept; 'cat' (1) dropped
    assert set(data.vocab.itos[3:]) == {"the", "."}
    assert data.vocab.encode(["THE"]) == [data.vocab.index("the")]


def test_tag_vocab_round_trips_and_rejects_foreign_files(tmp_path):
    tags = load_gold_data(_folder(tmp_path)).tags
    tags.save(tmp_path / "tags.json")
    again = TagVocab.load(tmp_path / "tags.json")
    assert again.upos_itos == tags.upos_itos and again.label_itos == tags.label_itos
    assert tags.label_itos[0] == "<unk>" and tags.upos_itos[:2] == ["<pad>", "<unk>"]
    assert tags.decode_labels([0, tags.label_stoi["det"]]) == ["dep", "det"]
    (tmp_path / "bad.json").write_text('{"format": "other"}', encoding="utf-8")
    with pytest.raises(InputError, match="not a depinduce tag vocabulary"):
        TagVocab.load(tmp_path / "bad.json")


def test_saved_vocabularies_are_reused(tmp_path):
    folder = _folder(tmp_path)
    tags = TagVocab(["VERB"], ["root"])
    data = load_gold_data(folder, tags=tags)
    assert data.tags is tags
    assert data.train[0].labels == [0, 0, 1, 0]


def test_missing_upos_or_train_is_a_one_line_error(tmp_path):
    with pytest.raises(DepinduceError, match="no train.conllu"):
        load_gold_data(tmp_path)
    no_upos = TRAIN.replace("\tNOUN\t", "\t_\t", 1)
    with pytest.raises(InputError, match="UPOS is '_'"):
        load_gold_data(_folder(tmp_path, train=no_upos))


def test_missing_dev_is_none(tmp_path):
    data = load_gold_data(_folder(tmp_path, dev=None))
    assert data.dev is None and data.dev_sentences is None


def test_initial_graphs_are_read_and_checked(tmp_path):
    data = load_gold_data(_folder(tmp_path))
    unlabelled = DEV.replace("\tdet\t", "\tdep\t").replace("\tnsubj\t", "\tdep\t")
    (tmp_path / "init.conllu").write_text(unlabelled, encoding="utf-8")
    graphs = read_initial_graphs(tmp_path / "init.conllu", data.dev_sentences, data.tags)
    assert graphs[0][0] == [2, 3, 0, 3]
    assert graphs[0][1][:2] == [TagVocab.label_unk_index, TagVocab.label_unk_index]
    assert graphs[0][1][2] == data.tags.label_stoi["root"]
    (tmp_path / "other.conllu").write_text(DEV.replace("\tcat\t", "\tdog\t"), encoding="utf-8")
    with pytest.raises(InputError, match="sentence 1 differs from the input at token 2: 'dog'"):
        read_initial_graphs(tmp_path / "other.conllu", data.dev_sentences, data.tags)
    with pytest.raises(InputError, match="has 2 sentences, the input has 1"):
        read_initial_graphs(tmp_path / "init.conllu", data.dev_sentences[:1], data.tags)


def test_collate_pads_and_masks(tmp_path):
    data = load_gold_data(_folder(tmp_path))
    initial = [(r.heads, r.labels) for r in data.train]
    batch = collate_gold(data.train, data.vocab.pad_index, initial)
    assert batch["tokens"].shape == (2, 5)
    assert batch["mask"].sum(dim=1).tolist() == [4, 5]
    assert batch["heads"][0].tolist() == [2, 3, 0, 3, 0]
    assert batch["upos"][0, 4].item() == TagVocab.upos_pad_index
    assert batch["init_heads"].equal(batch["heads"]) and batch["init_labels"].equal(batch["labels"])


def test_ewt_reads_every_token_with_punctuation(ewt_dir: Path, tmp_path: Path) -> None:
    """Real UD data through `preprocess ud`: the gold rows keep every token (punctuation included), with UPOS."""
    from click.testing import CliRunner

    from depinduce.cli.main import cli

    treebank = tmp_path / "tb"
    treebank.mkdir()
    for split, n in (("train", 300), ("dev", 100)):
        blocks = (ewt_dir / f"en_ewt-ud-{split}.conllu").read_text(encoding="utf-8").split("\n\n")[:n]
        (treebank / f"en_ewt-ud-{split}.conllu").write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["preprocess", "ud", "--treebank", str(treebank), "--out",
                                      str(tmp_path / "data"), "--quiet"])
    assert result.exit_code == 0, result.output
    data = load_gold_data(tmp_path / "data")
    written = (tmp_path / "data" / "dev.conllu").read_text(encoding="utf-8")
    token_lines = [line for line in written.splitlines() if line and line[0].isdigit()]
    assert len(data.dev) == written.count("# sent_id")
    assert sum(len(r) for r in data.dev) == len(token_lines)  # punctuation included
    punct = data.tags.upos_stoi["PUNCT"]
    assert sum(r.upos.count(punct) for r in data.dev) == sum(line.split("\t")[3] == "PUNCT" for line in token_lines)
    assert "punct" in data.tags.label_itos and data.vocab.stoi.get(",") is not None
