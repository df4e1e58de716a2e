"""Any language: UD treebanks without a train split (German, French, Chinese, Japanese GSD as shared here).

Each treebank is sliced to its first 60 dev and test sentences; the training view comes from ``--train-on dev,test``
(transductive) or from ``--extra-text`` (sentences 100-159 of the full test split, which the slice does not hold).
A tiny model trains for one epoch, parses the test slice (multiword tokens included) and is scored.
"""

from __future__ import annotations

import itertools
import json
import re
import unicodedata
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from conftest import REPO, SHARED
from depinduce.cli.main import cli
from depinduce.data.normalize import Normalization, fold_digit_runs
from depinduce.data.punct import is_punct_form
from depinduce.data.text import MAX_UNSPACED_TOKEN
from depinduce.data.ud import parse_train_on, training_view_note
from depinduce.errors import InputError, UsageError
from depinduce.io import read_sentences

UD = SHARED / "data" / "ud"
LOCAL_CORPUS_FIXTURES = ("treebank", "chinese")  # they skip without the shared treebanks: marked corpus
TREEBANKS = {"de": "UD_German-GSD", "fr": "UD_French-GSD", "zh": "UD_Chinese-GSD", "ja": "UD_Japanese-GSD"}
UNSPACED = ("zh", "ja")
SLICE = 60
# One tiny model per language keeps the module quick; both backends and both script kinds are covered.
MODELS = {"de": "structformer", "fr": "udgn", "zh": "udgn", "ja": "structformer"}
TINY = {
    "structformer": {"hidden_size": 16, "n_layers": 2, "n_heads": 4, "ff_size": 32, "conv_size": 3,
                     "max_positions": 64},
    "udgn": {"hidden_size": 16, "n_layers": 2, "n_heads": 4, "head_size": 6, "parser_layers": 2,
             "parser_hidden_size": 8},
}
RECIPES = {"structformer": "structformer-ptb-cpu", "udgn": "udgn-ud-cpu"}
MWT = re.compile(r"^\d+-\d+\t", re.M)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def blocks(path: Path) -> list[str]:
    return [b for b in path.read_text(encoding="utf-8").strip().split("\n\n") if b.strip()]


def word_lines(block: str) -> list[list[str]]:
    return [line.split("\t") for line in block.splitlines() if line and line.split("\t")[0].isdigit()]


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


class Treebank:
    """A 60+60-sentence slice of a shared treebank, with extra text (tokenised and raw) from beyond the slice."""

    def __init__(self, lang: str, root: Path) -> None:
        source = UD / TREEBANKS[lang]
        dev = next(source.glob("*-ud-dev.conllu"), None)
        test = next(source.glob("*-ud-test.conllu"), None)
        if dev is None or test is None:
            pytest.skip(f"needs {source} (the read-only ../shared data beside the checkout), which is absent")
        self.lang = lang
        self.folder = root / f"{TREEBANKS[lang]}-slice"
        self.folder.mkdir()
        self.test = self.folder / test.name
        (self.folder / dev.name).write_text("\n\n".join(blocks(dev)[:SLICE]) + "\n\n", encoding="utf-8")
        test_blocks = blocks(test)
        self.test.write_text("\n\n".join(test_blocks[:SLICE]) + "\n\n", encoding="utf-8")
        beyond = test_blocks[100:160]
        self.tokenized = root / f"{lang}.tok.txt"
        self.tokenized.write_text("".join(" ".join(c[1] for c in word_lines(b)) + "\n" for b in beyond),
                                  encoding="utf-8")
        self.raw = root / f"{lang}.raw.txt"
        self.raw.write_text("".join(re.search(r"^# text = (.*)$", b, re.M).group(1) + "\n" for b in beyond),
                            encoding="utf-8")


@pytest.fixture(scope="module", params=sorted(TREEBANKS))
def treebank(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Treebank:
    return Treebank(request.param, tmp_path_factory.mktemp(request.param))


@pytest.fixture(scope="module")
def transductive(treebank: Treebank, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("data") / treebank.lang
    result = invoke("preprocess", "ud", "--quiet", "--treebank", str(treebank.folder), "--train-on", "dev,test",
                    "--min-freq", "1", "--out", str(out))
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def trained(treebank: Treebank, transductive: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Result]:
    model = MODELS[treebank.lang]
    run = tmp_path_factory.mktemp("runs") / treebank.lang
    shrink = [f"model_config.{key}={value}" for key, value in TINY[model].items()]
    result = invoke("train", "--recipe", RECIPES[model], "--data", str(transductive), "--out", str(run),
                    "--threads", "1", *itertools.chain.from_iterable(("--set", s) for s in shrink),
                    "--set", "train.epochs=1", "--set", "train.batch_tokens=400", "--set", "train.eval_every=0")
    assert result.exit_code == 0, result.output
    return run, result


def test_transductive_view_is_the_dev_and_test_text(treebank: Treebank, transductive: Path) -> None:
    manifest = json.loads((transductive / "manifest.json").read_text(encoding="utf-8"))
    view = manifest["training_view"]
    assert view["train_on"] == ["dev", "test"] and view["transductive"] and not view["treebank_train"]
    assert manifest["source"]["training_view"] == view  # what every run's manifest copies
    assert manifest["missing_splits"] == ["train"]
    assert any(note.startswith("transductive:") for note in manifest["notes"])
    assert not (transductive / "train.conllu").exists(), "no gold trees may become training data"
    assert lines(transductive / "train.txt") == lines(transductive / "dev.txt") + lines(transductive / "test.txt")
    assert len(lines(transductive / "train.txt")) == 2 * SLICE
    vocab = json.loads((transductive / "vocab.json").read_text(encoding="utf-8"))
    words = {w for line in lines(transductive / "train.txt") for w in line.split()}
    assert set(vocab["words"]) - {"<pad>", "<unk>", "<mask>"} == words


def test_the_view_holds_the_treebank_words_without_punctuation(treebank: Treebank, transductive: Path) -> None:
    gold = read_sentences(transductive / "test.conllu", "conllu")
    norm = Normalization()
    expected = [" ".join(norm.words(w for w, u in zip(s.words, s.upos or []) if u != "PUNCT")) for s in gold]
    assert lines(transductive / "test.txt") == expected
    assert len(gold) == SLICE


def test_extra_text_is_the_training_view(treebank: Treebank, tmp_path: Path) -> None:
    out = tmp_path / "data"
    # --pretokenized is what the Chinese/Japanese treebanks imply; the others take it as an option
    pretokenized = () if treebank.lang in UNSPACED else ("--pretokenized",)
    result = invoke("preprocess", "ud", "--treebank", str(treebank.folder), "--extra-text", str(treebank.tokenized),
                    *pretokenized, "--min-freq", "1", "--out", str(out))
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    view = manifest["training_view"]
    assert view["train_on"] == [] and not view["transductive"]
    assert view["extra_text"] == [str(treebank.tokenized)]
    assert view["extra_text_pretokenized"]
    noted = [line for line in result.stderr.splitlines() if "pre-tokenised" in line]
    assert len(noted) == (1 if treebank.lang in UNSPACED else 0), result.stderr
    assert "transductive" not in result.stderr
    train = lines(out / "train.txt")
    assert manifest["splits"]["train"]["extra_text_sentences"] == len(train) > 0
    extra_words = {w for line in treebank.tokenized.read_text(encoding="utf-8").splitlines()
                   for w in Normalization().words(line.split())}
    vocab = set(json.loads((out / "vocab.json").read_text(encoding="utf-8"))["words"]) - {"<pad>", "<unk>", "<mask>"}
    assert vocab <= extra_words
    test_only = {w for line in lines(out / "test.txt") for w in line.split()} - extra_words
    assert test_only and not test_only & vocab, "test words that the extra text lacks must stay out of the vocabulary"
    # the tokens as given: a pre-tokenised line is its words minus punctuation, in order
    first = treebank.tokenized.read_text(encoding="utf-8").splitlines()[0].split()
    assert train[0].split() == Normalization().words(w for w in first if not is_punct_form(w))


def test_raw_extra_text_outside_english_is_tokenised_with_a_note(treebank: Treebank, tmp_path: Path) -> None:
    result = invoke("preprocess", "ud", "--treebank", str(treebank.folder), "--extra-text", str(treebank.raw),
                    "--one-per-line", "--min-freq", "1", "--out", str(tmp_path / "data"))
    if treebank.lang in UNSPACED:
        assert result.exit_code == 2 and "must come pre-tokenised" in result.stderr
        return
    assert result.exit_code == 0, result.output
    assert "English (Penn Treebank) rules" in result.stderr and "--pretokenized" in result.stderr
    train = lines(tmp_path / "data" / "train.txt")
    assert len(train) == len(treebank.raw.read_text(encoding="utf-8").splitlines())
    assert not any(w in {",", ".", "!", "?"} for line in train for w in line.split()), "punctuation by shape"


def test_train_says_it_is_transductive(treebank: Treebank, trained: tuple[Path, Result]) -> None:
    run, result = trained
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: transductive training")]
    assert len(notes) == 1 and "--train-on dev,test" in notes[0], result.stderr
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["data"]["preprocess"]["source"]["training_view"]["train_on"] == ["dev", "test"]
    assert "dev_uda" in (run / "metrics.jsonl").read_text(encoding="utf-8")


def test_parse_keeps_the_tokens_and_multiword_tokens(treebank: Treebank, trained: tuple[Path, Result],
                                                     tmp_path: Path) -> None:
    run, _ = trained
    plain = invoke("parse", "--model", str(run), "--input-format", "conllu", "--quiet", str(treebank.test))
    assert plain.exit_code == 0, plain.output
    full = invoke("parse", "--model", str(run), "--input-format", "conllu", "--full-ud", "--quiet",
                  str(treebank.test))
    assert full.exit_code == 0, full.output
    gold = blocks(treebank.test)
    syntactic = [[c[1] for c in word_lines(b)] for b in gold]
    predicted = [[c[1] for c in word_lines(b)] for b in plain.stdout.strip().split("\n\n")]
    assert predicted == syntactic
    assert not MWT.search(plain.stdout), "the MaltEval-safe default has syntactic words only"
    gold_mwt = [line.split("\t")[:2] for b in gold for line in b.splitlines() if MWT.match(line)]
    full_mwt = [line.split("\t")[:2] for line in full.stdout.splitlines() if MWT.match(line)]
    assert full_mwt == gold_mwt
    if treebank.lang in ("de", "fr"):
        assert gold_mwt, f"the {treebank.lang} slice should hold multiword tokens"
    pred = tmp_path / "pred.conllu"
    pred.write_text(plain.stdout, encoding="utf-8")
    scored = invoke("eval", "--gold", str(treebank.test), "--pred", str(pred), "--json")
    assert scored.exit_code == 0, scored.output
    metrics = json.loads(scored.stdout)
    words = sum(1 for b in gold for c in word_lines(b) if c[3] != "PUNCT")
    assert metrics["tokens"] == words and metrics["sentences"] == SLICE
    assert 0 <= metrics["metrics"]["dda"] <= metrics["metrics"]["uda"] <= 100
    table = invoke("eval", "--gold", str(treebank.test), "--pred", str(pred))
    assert table.exit_code == 0 and "DDA (UAS)" in table.output and "UDA (UUAS)" in table.output


# ------------------------------------------------------------------------------------------- hostile input


@pytest.fixture(scope="module")
def chinese(tmp_path_factory: pytest.TempPathFactory) -> Treebank:
    return Treebank("zh", tmp_path_factory.mktemp("zh-hostile"))


def test_unknown_train_on_split_is_a_usage_error(chinese: Treebank, tmp_path: Path) -> None:
    result = invoke("preprocess", "ud", "--treebank", str(chinese.folder), "--train-on", "dev,train",
                    "--out", str(tmp_path / "out"))
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    assert "--train-on: unknown split 'train'" in result.stderr and "dev,test" in result.stderr
    assert not (tmp_path / "out").exists()
    with pytest.raises(UsageError, match="unknown split ''"):
        parse_train_on("dev,")
    assert parse_train_on("test, DEV") == ("dev", "test")


def test_train_on_a_split_the_treebank_lacks(chinese: Treebank, tmp_path: Path) -> None:
    only_test = tmp_path / "tb"
    only_test.mkdir()
    (only_test / chinese.test.name).write_text(chinese.test.read_text(encoding="utf-8"), encoding="utf-8")
    result = invoke("preprocess", "ud", "--treebank", str(only_test), "--train-on", "dev",
                    "--out", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert "--train-on dev: the treebank has no dev split (found: test)" in result.stderr


def test_no_train_split_and_no_training_text_says_what_to_pass(chinese: Treebank, tmp_path: Path) -> None:
    result = invoke("preprocess", "ud", "--treebank", str(chinese.folder), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2
    message = result.stderr.strip()
    assert "\n" not in message and "no training split" in message
    assert "--extra-text FILE" in message and "--train-on dev,test" in message
    assert not (tmp_path / "out").exists()


def test_untokenised_chinese_extra_text_is_a_located_error(chinese: Treebank, tmp_path: Path) -> None:
    raw = chinese.raw.read_text(encoding="utf-8").splitlines()
    first_long = next(i for i, line in enumerate(raw, start=1)
                      if any(len(chunk) > MAX_UNSPACED_TOKEN and re.search("[\u4e00-\u9fff]", chunk)
                             for chunk in line.split()))
    result = invoke("preprocess", "ud", "--treebank", str(chinese.folder), "--extra-text", str(chinese.raw),
                    "--out", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert isinstance(result.exception, SystemExit)
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(f"{chinese.raw}:{first_long}: "), error
    assert "pre-tokenised" in error
    assert not (tmp_path / "out").exists()


def test_untokenised_cjk_line_in_a_spaced_language_is_refused_too(tmp_path: Path) -> None:
    from depinduce.data.preprocess import PreprocessOptions, preprocess_ud

    gold = tmp_path / "x-ud-test.conllu"
    gold.write_text("# text = Hallo Welt\n1\tHallo\thallo\tINTJ\t_\t_\t2\tdiscourse\t_\t_\n"
                    "2\tWelt\tWelt\tNOUN\t_\t_\t0\troot\t_\t_\n\n", encoding="utf-8")
    extra = tmp_path / "extra.txt"
    extra.write_text("Ein Satz auf Deutsch.\n他说这是一个很长的没有空格的中文句子。\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        preprocess_ud(tmp_path / "out", treebank=[gold], options=PreprocessOptions(extra_text=(str(extra),),
                                                                                  one_per_line=True))
    assert caught.value.line == 2 and caught.value.path.endswith("extra.txt")


# ----------------------------------------------------------------------------------------------- numbers


def test_digit_folding_is_unicode_nd_exactly() -> None:
    nd = "".join(chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Nd")
    assert len(nd) > 600 and fold_digit_runs(nd) == "N"
    numeric_not_decimal = "²①三Ⅻ½"
    assert all(ch.isnumeric() for ch in numeric_not_decimal)
    assert fold_digit_runs(numeric_not_decimal) == numeric_not_decimal
    assert Normalization().words(["٢٠٢٤", "２０２４年", "१२", "x²"]) == ["N", "N年", "N", "x²"]


def test_the_bundled_vocabulary_is_a_fixed_point_of_the_normalisation() -> None:
    """The bundled model's vocabulary is what its recorded settings make of its words: each word, its ``N``
    placeholders written as digits again, normalises back to itself, and no word holds a decimal digit of any
    script, so the Unicode digit rule parses new text for it exactly as before."""
    data = json.loads((REPO / "depinduce" / "bundled" / "default" / "vocab.json").read_text(encoding="utf-8"))
    norm = Normalization.from_dict(data["normalization"])
    assert norm == Normalization(lowercase=True, fold_digits=True)
    words = [w for w in data["words"] if w not in set(data["specials"].values())]
    assert any("N" in w for w in words)
    # a folded word comes back from any digit run standing where its placeholders are
    assert all(norm.word(w.replace("N", "7")) == w for w in words)
    assert not any(unicodedata.category(ch) == "Nd" for w in words for ch in w)


def test_training_view_note_reads_only_transductive_manifests(tmp_path: Path) -> None:
    assert training_view_note(tmp_path) is None
    (tmp_path / "manifest.json").write_text(json.dumps({"training_view": {"transductive": False, "train_on": []}}))
    assert training_view_note(tmp_path) is None
    (tmp_path / "manifest.json").write_text(json.dumps({"training_view": {"transductive": True,
                                                                          "train_on": ["test"]}}))
    note = training_view_note(tmp_path)
    assert note is not None and "--train-on test" in note
