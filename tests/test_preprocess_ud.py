"""``preprocess ud``: syntactic words only, punctuation by UPOS, a missing split, and located errors."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from depinduce.cli.preprocess import preprocess
from depinduce.data.ud import check_training_view, find_treebank_files, language_of, split_of
from depinduce.errors import DepinduceError, InputError, UsageError
from depinduce.io import read_sentences

CONLLU_OK = """# sent_id = a1
# text = Hello, world!
1	Hello	hello	INTJ	UH	_	3	discourse	_	SpaceAfter=No
2	,	,	PUNCT	,	_	3	punct	_	_
3	world	world	NOUN	NN	_	0	root	_	SpaceAfter=No
4	!	!	PUNCT	.	_	3	punct	_	_

"""


def run(*args: str) -> Result:
    return CliRunner().invoke(preprocess, ["ud", "--quiet", *args])


def blocks(path: Path) -> list[str]:
    return [b + "\n\n" for b in path.read_text(encoding="utf-8").strip().split("\n\n")]


@pytest.fixture(scope="module")
def ewt_slice(ewt_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 40 train and 30 dev sentences of EWT, plus the dev sentences with empty nodes; no test split."""
    folder = tmp_path_factory.mktemp("ewt") / "UD_English-Slice"
    folder.mkdir()
    train = blocks(ewt_dir / "en_ewt-ud-train.conllu")[:40]
    dev_all = blocks(ewt_dir / "en_ewt-ud-dev.conllu")
    with_empty = [b for b in dev_all if re.search(r"^\d+\.\d+\t", b, re.M)]
    (folder / "en_slice-ud-train.conllu").write_text("".join(train), encoding="utf-8")
    (folder / "en_slice-ud-dev.conllu").write_text("".join(dev_all[:30] + with_empty[:2]), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def ud_out(ewt_slice: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ud-out") / "data"
    result = run("--treebank", str(ewt_slice), "--out", str(out))
    assert result.exit_code == 0, result.output
    return out


def test_outputs_and_missing_test_split(ud_out: Path) -> None:
    assert {p.name for p in ud_out.iterdir()} == {
        f"{name}.{ext}" for name in ("train", "dev", "len10") for ext in ("conllu", "nopunct.conllu", "txt")
    } | {"vocab.json", "manifest.json"}
    manifest = json.loads((ud_out / "manifest.json").read_text())
    assert manifest["missing_splits"] == ["test"]
    assert any("no test split" in note for note in manifest["notes"])
    assert manifest["punct_rule"] == "ud"


def test_only_syntactic_words_and_labels_kept(ud_out: Path) -> None:
    text = (ud_out / "dev.conllu").read_text(encoding="utf-8")
    assert not re.search(r"^\d+-\d+\t", text, re.M), "multiword-token lines must be dropped"
    assert not re.search(r"^\d+\.\d+\t", text, re.M), "empty nodes must be dropped"
    sentences = read_sentences(ud_out / "dev.conllu", "conllu")
    didnt = next(s for s in sentences if "did" in s.words and "n't" in s.words)
    assert didnt.text is not None and "didn't" in didnt.text
    assert didnt.deprels is not None and "nsubj" in didnt.deprels
    labels = {d for s in sentences for d in (s.deprels or [])}
    assert "punct" in labels and "dep" not in labels


def test_model_view_drops_punct_by_upos(ud_out: Path) -> None:
    sentences = read_sentences(ud_out / "dev.conllu", "conllu")
    lines = (ud_out / "dev.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(sentences)
    for sentence, line in zip(sentences, lines):
        assert sentence.upos is not None
        expected = [w.lower() for w, u in zip(sentence.words, sentence.upos) if u != "PUNCT"]
        assert line.split() == [re.sub(r"\d+", "N", w) for w in expected]


def test_ud_output_passes_the_validator(ud_out: Path) -> None:
    validator = shutil.which("udvalidate")
    if validator is None:
        pytest.skip("udvalidate (udtools) is not installed")
    for name in ("train.conllu", "dev.conllu", "len10.conllu", "dev.nopunct.conllu"):
        result = subprocess.run([validator, "--lang", "ud", "--level", "2", str(ud_out / name)],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, name + result.stdout[-2000:] + result.stderr[-2000:]


def test_split_files_by_name(tmp_path: Path) -> None:
    train = tmp_path / "mine-train.conllu"
    dev = tmp_path / "x_dev.conllu"
    for p in (train, dev):
        p.write_text(CONLLU_OK)
    assert find_treebank_files([train, dev]) == {"train": train, "dev": dev}
    assert split_of(Path("en_ewt-ud-test.conllu")) == "test"
    assert split_of(Path("contest.conllu")) is None
    assert find_treebank_files([dev]) == {"dev": dev}
    with pytest.raises(UsageError, match=r"no training split .*--extra-text FILE.*--train-on dev,test"):
        check_training_view({"dev": dev}, (), ())
    check_training_view({"dev": dev}, ("dev",), ())
    check_training_view({"dev": dev}, (), ("more.txt",))
    with pytest.raises(UsageError, match="--train-on test: the treebank has no test split"):
        check_training_view({"dev": dev}, ("test",), ())
    other = tmp_path / "sub"
    other.mkdir()
    (other / "b-train.conllu").write_text(CONLLU_OK)
    with pytest.raises(DepinduceError, match="two files for the train split"):
        find_treebank_files([train, other])
    with pytest.raises(DepinduceError, match="cannot tell the split"):
        find_treebank_files([tmp_path / "mine-train.conllu", _write(tmp_path / "data.conllu", CONLLU_OK)])


def test_train_on_joins_a_treebank_that_has_a_train_split(tmp_path: Path) -> None:
    """With a train split, --train-on appends the named split's text after it (train.conllu stays the treebank's)."""
    train = _write(tmp_path / "t-ud-train.conllu", CONLLU_OK)
    dev = _write(tmp_path / "t-ud-dev.conllu", CONLLU_OK.replace("world", "there").replace("a1", "b1"))
    out = tmp_path / "out"
    result = run("--treebank", str(train), "--treebank", str(dev), "--train-on", "dev", "--out", str(out),
                 "--min-freq", "1")
    assert result.exit_code == 0, result.output
    assert (out / "train.txt").read_text() == "hello world\nhello there\n"
    assert len(read_sentences(out / "train.conllu", "conllu")) == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["training_view"] == {"treebank_train": True, "train_on": ["dev"], "extra_text": [],
                                         "transductive": True, "extra_text_pretokenized": False}
    assert manifest["splits"]["train"]["train_on_sentences"] == 1
    assert language_of({"dev": Path("de_gsd-ud-dev.conllu")}) == "de"
    assert language_of({"train": train}) is None


def _write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_explicit_files_work(tmp_path: Path) -> None:
    train = _write(tmp_path / "t-ud-train.conllu", CONLLU_OK * 1)
    out = tmp_path / "out"
    result = run("--treebank", str(train), "--out", str(out), "--min-freq", "1")
    assert result.exit_code == 0, result.output
    assert (out / "train.txt").read_text() == "hello world\n"
    assert json.loads((out / "manifest.json").read_text())["missing_splits"] == ["dev", "test"]


BAD = {
    "columns": (CONLLU_OK.replace("3\tworld\tworld\tNOUN", "3\tworld\tNOUN"), 5, "10 tab-separated columns"),
    "head": (CONLLU_OK.replace("\t3\tpunct\t_\t_", "\tx\tpunct\t_\t_"), 4, "not a non-negative integer"),
    # Hello -> world -> Hello, with the comma as the root.
    "cycle": (CONLLU_OK.replace("3\tworld\tworld\tNOUN\tNN\t_\t0\troot", "3\tworld\tworld\tNOUN\tNN\t_\t1\tdep")
              .replace("2\t,\t,\tPUNCT\t,\t_\t3\tpunct", "2\t,\t,\tPUNCT\t,\t_\t0\troot"), 3, "cycle"),
    "utf8": (CONLLU_OK.encode("utf-8").replace(b"world", b"w\xf6rld", 1), 2, "not valid UTF-8"),
    "empty": ("", 1, "empty file"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_conllu_is_one_located_error(case: str, tmp_path: Path) -> None:
    content, line, message = BAD[case]
    train = _write(tmp_path / "bad-ud-train.conllu", content)
    out = tmp_path / "out"
    result = run("--treebank", str(train), "--out", str(out))
    assert isinstance(result.exception, InputError), result.output
    error = str(result.exception)
    assert re.match(rf"{re.escape(str(train))}:\d+: ", error), error
    if line is not None:
        assert error.startswith(f"{train}:{line}: ")
    assert message in error and "\n" not in error
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad-ud-train.conllu"]


def test_multiword_tokens_keep_the_text_spelled(tmp_path: Path) -> None:
    from depinduce.io import parse_conllu_text
    from depinduce.data.ud import syntactic_tokens
    from depinduce.io.conllu_format import text_from_tokens

    spelled = (
        "# text = didn't go\n"
        "1-2\tdidn't\t_\t_\t_\t_\t_\t_\t_\t_\n1\tdid\tdo\tAUX\tVBD\t_\t3\taux\t3:aux\t_\n"
        "2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t3:advmod\t_\n3\tgo\tgo\tVERB\tVB\t_\t0\troot\t0:root\t_\n\n"
    )
    tokens = syntactic_tokens(parse_conllu_text(spelled, "x.conllu")[0].source)
    assert [t["id"] for t in tokens] == [1, 2, 3]
    assert tokens[0]["misc"] == {"SpaceAfter": "No"} and tokens[1]["misc"] is None
    assert all(t["deps"] is None for t in tokens)
    assert tokens.metadata["text"] == text_from_tokens(tokens) == "didn't go"
    assert "orig_text" not in tokens.metadata

    contracted = (
        "# text = zum Haus\n"
        "1-2\tzum\t_\t_\t_\t_\t_\t_\t_\t_\n1\tzu\tzu\tADP\tAPPR\t_\t3\tcase\t_\t_\n"
        "2\tdem\tder\tDET\tART\t_\t3\tdet\t_\t_\n3\tHaus\tHaus\tNOUN\tNN\t_\t0\troot\t_\t_\n\n"
    )
    tokens = syntactic_tokens(parse_conllu_text(contracted, "y.conllu")[0].source)
    assert tokens.metadata["text"] == "zu dem Haus" == text_from_tokens(tokens)
    assert tokens.metadata["orig_text"] == "zum Haus"
