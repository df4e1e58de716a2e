"""``preprocess ptb``: the written dataset on NLTK's sample, its anchors, options, atomicity and bad input."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from nltk import Tree

from depinduce.cli.preprocess import preprocess
from depinduce.data.punct import punct_mask
from depinduce.errors import DepinduceError, InputError
from depinduce.io import read_sentences
from depinduce.structures.dependency import reattach
from depinduce.structures.spans import labelled_spans, scored_spans

OUTPUTS = {
    f"{name}.{ext}" for name in ("train", "dev", "test", "wsj10") for ext in ("conllu", "nopunct.conllu", "trees", "txt")
}


def run(*args: str) -> Result:
    return CliRunner().invoke(preprocess, ["ptb", "--quiet", *args])


@pytest.fixture(scope="module")
def sample_dir(nltk_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ptb") / "sample"
    result = run("--sample-only", "--out", str(out))
    assert result.exit_code == 0, result.output
    return out


def conllu_sentences(path: Path) -> list:
    return read_sentences(path, "conllu")


# ------------------------------------------------------------------------------------------ the dataset


def test_writes_every_output_with_checksums(sample_dir: Path) -> None:
    names = {p.name for p in sample_dir.iterdir()}
    assert names == OUTPUTS | {"vocab.json", "manifest.json"}
    manifest = json.loads((sample_dir / "manifest.json").read_text())
    assert set(manifest["files"]) == names - {"manifest.json"}
    for name, entry in manifest["files"].items():
        assert entry["sha256"] == hashlib.sha256((sample_dir / name).read_bytes()).hexdigest()
    assert manifest["source"]["kind"] == "nltk-sample"
    assert manifest["source"]["head_rules"] == "penn2malt"
    assert manifest["options"]["min_freq"] == 2
    assert not list(sample_dir.parent.glob(".sample.*")), "temporary folders left behind"


def test_split_sizes_and_reference_counts(sample_dir: Path) -> None:
    splits = json.loads((sample_dir / "manifest.json").read_text())["splits"]
    assert {s: splits[s]["sentences"] for s in splits} == {"train": 2794, "dev": 459, "test": 661}
    assert sum(splits[s]["sentences"] for s in splits) == 3914
    # docs/evaluation-protocol.md: the test split has 13,812 scored (punctuation-free) words.
    assert splits["test"]["words"] == 13812
    assert len((sample_dir / "test.txt").read_text().split()) == 13812
    for name in ("train", "dev", "test", "wsj10"):
        ids = re.findall(r"^# sent_id = (.*)$", (sample_dir / f"{name}.conllu").read_text(), re.M)
        stripped_ids = re.findall(r"^# sent_id = (.*)$", (sample_dir / f"{name}.nopunct.conllu").read_text(), re.M)
        trees = (sample_dir / f"{name}.trees").read_text().splitlines()
        txt = (sample_dir / f"{name}.txt").read_text().splitlines()
        assert ids == stripped_ids and len(ids) == len(trees) == len(txt) == len(set(ids))
    assert len(txt) == 555  # WSJ10: 542 sentences of 2-10 words (docs/evaluation-protocol.md) and 13 one-word ones


@pytest.mark.slow
def test_the_sample_gets_browns_text_by_default(nltk_data: Path, tmp_path: Path) -> None:
    """Without --sample-only, NLTK's Brown corpus joins the training view only (dev and test are the sample's,
    Brown's one sentence that is also in dev or test is dropped) and the vocabulary keeps its 10,000 most
    frequent words: the data the neural CPU recipes are measured on."""
    if not (nltk_data / "corpora" / "brown.zip").is_file() and not (nltk_data / "corpora" / "brown").is_dir():
        pytest.skip("needs NLTK's brown corpus beside the treebank sample")
    out = tmp_path / "ptb"
    result = run("--out", str(out))
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    splits = manifest["splits"]
    assert {s: splits[s]["sentences"] for s in ("train", "dev", "test")} == {"train": 59952, "dev": 459, "test": 661}
    assert splits["train"]["words"] == 1082116 and splits["train"]["gold_sentences"] == 2794
    assert splits["train"]["extra_text_read"] == 57340 and splits["train"]["extra_text_removed_overlap"] == 1
    assert manifest["training_view"]["extra_corpora"] == ["brown"] and manifest["options"]["max_vocab"] == 10000
    assert manifest["vocab"]["size"] == 10003
    assert splits["test"]["words"] == 13812  # the scored words do not change
    assert len((out / "train.conllu").read_text().split("\n\n")) - 1 == 2794  # gold trees: the sample's only
    brown = (out / "train.txt").read_text().splitlines()[2794:]
    assert brown[0].startswith("the fulton county grand jury said friday an investigation of atlanta 's recent")
    words = [word for line in brown for word in line.split()]
    assert words.count("'s") == 5865 and words.count("n't") == 2100  # Brown's clitics split as the PTB splits them
    assert not [word for word in words if re.fullmatch(r"[a-z]+'(s|m|re|ll|ve|d)|[a-z]+n't", word)]


def test_without_brown_the_default_says_how_to_get_it(nltk_data: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """NLTK data with the treebank but not Brown: one line naming both remedies, nothing written."""
    only_treebank = tmp_path / "nltk_data" / "corpora"
    only_treebank.mkdir(parents=True)
    shutil.copy(nltk_data / "corpora" / "treebank.zip", only_treebank / "treebank.zip")
    result = subprocess.run([sys.executable, "-m", "depinduce", "preprocess", "ptb", "--out", "out"], cwd=tmp_path,
                            capture_output=True, text=True, env={**os.environ, "NLTK_DATA": str(only_treebank.parent)})
    assert result.returncode == 2 and not (tmp_path / "out").exists()
    assert result.stderr.strip() == ("NLTK's brown corpus is not installed: run `python -m nltk.downloader brown` "
                                     "(or keep the sample alone: --sample-only)")


def test_views_trees_and_conllu_agree(sample_dir: Path) -> None:
    conllu = conllu_sentences(sample_dir / "dev.conllu")
    trees = (sample_dir / "dev.trees").read_text().splitlines()
    txt = (sample_dir / "dev.txt").read_text().splitlines()
    for sentence, tree_line, line in zip(conllu, trees, txt):
        keep = [not p for p in punct_mask(sentence.words, rule="ptb", xpos=sentence.xpos)]
        kept = [w for w, k in zip(sentence.words, keep) if k]
        assert Tree.fromstring(tree_line).leaves() == kept
        assert line.split() == _fold(kept)
        assert sentence.metadata.get("punct_rule") == "ptb"
        assert sentence.sent_id and sentence.sent_id.startswith("wsj_01")
    first = conllu[0]
    assert first.sent_id == "wsj_0125.mrg:1"
    assert first.text == " ".join(first.words)


def test_nopunct_conllu_is_the_reattached_tree_over_the_view(sample_dir: Path) -> None:
    full = conllu_sentences(sample_dir / "dev.conllu")
    stripped = conllu_sentences(sample_dir / "dev.nopunct.conllu")
    txt = (sample_dir / "dev.txt").read_text().splitlines()
    assert len(full) == len(stripped) == len(txt)
    repaired = 0
    for sentence, short, line in zip(full, stripped, txt):
        keep = [not p for p in punct_mask(sentence.words, rule="ptb", xpos=sentence.xpos)]
        assert short.sent_id == sentence.sent_id
        assert _fold(short.words) == line.split()
        expected = reattach(sentence.heads, keep)
        if expected.count(0) > 1:  # the root was punctuation: one root kept, the others attached to it
            repaired += 1
            first = expected.index(0) + 1
            expected = [first if h == 0 and i + 1 != first else h for i, h in enumerate(expected)]
        assert short.heads == expected
    splits = json.loads((sample_dir / "manifest.json").read_text())["splits"]
    assert repaired == splits["dev"]["nopunct_roots_repaired"] == 3


def _fold(words: list[str]) -> list[str]:
    return [re.sub(r"\d+", "N", w.lower()) for w in words]


def test_conllu_heads_are_the_nltk_conversion(sample_dir: Path, nltk_data: Path) -> None:
    from nltk.corpus import dependency_treebank

    gold = dependency_treebank.parsed_sents("wsj_0150.dp")
    ours = conllu_sentences(sample_dir / "test.conllu")[: len(gold)]
    for graph, sentence in zip(gold, ours):
        nodes = [graph.nodes[i] for i in range(1, len(graph.nodes))]
        assert sentence.words == [n["word"] for n in nodes]
        assert sentence.heads == [n["head"] for n in nodes]
        assert sentence.deprels == ["root" if n["head"] == 0 else "dep" for n in nodes]


def test_right_branching_anchor_on_the_written_test_split(sample_dir: Path) -> None:
    """docs/evaluation-protocol.md's right-branching baseline, recomputed from test.conllu: DDA 30.3, UDA 50.2."""
    correct = undirected = total = 0
    for sentence in conllu_sentences(sample_dir / "test.conllu"):
        keep = [not p for p in punct_mask(sentence.words, rule="ptb", xpos=sentence.xpos)]
        gold = reattach(sentence.heads, keep)
        n = len(gold)
        predicted = [i + 2 for i in range(n - 1)] + [0]
        correct += sum(p == g for p, g in zip(predicted, gold))
        gold_edges = {frozenset((i + 1, h)) for i, h in enumerate(gold)}
        undirected += sum(frozenset((i + 1, p)) in gold_edges for i, p in enumerate(predicted))
        total += n
    assert total == 13812
    assert round(100 * correct / total, 1) == 30.3
    assert round(100 * undirected / total, 1) == 50.2


def right_branching_f1(trees_file: Path) -> tuple[int, float, float]:
    """Sentence- and corpus-level UF1 of right-branching trees against the written gold trees."""
    f1s, tp, n_pred, n_gold = [], 0, 0, 0
    for line in trees_file.read_text().splitlines():
        tree = Tree.fromstring(line)
        n = len(tree.leaves())
        if n < 2:
            continue
        gold = scored_spans(labelled_spans(tree), n)
        predicted = {(i, n) for i in range(1, n - 1)}
        hit = len(gold & predicted)
        precision = hit / len(predicted) if predicted else 1.0
        recall = hit / len(gold) if gold else 1.0
        f1s.append(0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall))
        tp, n_pred, n_gold = tp + hit, n_pred + len(predicted), n_gold + len(gold)
    corpus = 2 * tp / (n_pred + n_gold)
    return len(f1s), 100 * sum(f1s) / len(f1s), 100 * corpus


def test_constituency_anchors_on_the_written_trees(sample_dir: Path) -> None:
    assert right_branching_f1(sample_dir / "test.trees") == (658, pytest.approx(38.9, abs=0.05),
                                                            pytest.approx(36.2, abs=0.05))
    assert right_branching_f1(sample_dir / "wsj10.trees") == (542, pytest.approx(57.6, abs=0.05),
                                                             pytest.approx(55.0, abs=0.05))


def test_conllu_passes_the_ud_validator(sample_dir: Path) -> None:
    validator = shutil.which("udvalidate")
    if validator is None:
        pytest.skip("udvalidate (udtools) is not installed")
    for name in ("dev.conllu", "wsj10.conllu", "dev.nopunct.conllu"):
        result = subprocess.run([validator, "--lang", "ud", "--level", "2", str(sample_dir / name)],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        assert "PASSED" in result.stdout + result.stderr


def test_vocabulary_comes_from_train_only(sample_dir: Path) -> None:
    vocab = json.loads((sample_dir / "vocab.json").read_text())
    train_counts: dict[str, int] = {}
    for line in (sample_dir / "train.txt").read_text().splitlines():
        for word in line.split():
            train_counts[word] = train_counts.get(word, 0) + 1
    expected = sorted((w for w, c in train_counts.items() if c >= 2), key=lambda w: (-train_counts[w], w))
    assert vocab["words"] == expected
    assert vocab["normalization"] == {"lowercase": True, "fold_digits": True}


# ---------------------------------------------------------------------------------- LDC tree and options


@pytest.fixture()
def ldc_tree(nltk_data: Path, tmp_path: Path) -> Path:
    """A fake LDC tree: 12 sample files spread over sections 02, 21 (train), 22 (dev) and 23 (test)."""
    from nltk.corpus import treebank

    layout = {"02": 4, "21": 4, "22": 2, "23": 2}
    k = 0
    for section, count in layout.items():
        (tmp_path / "wsj" / section).mkdir(parents=True)
        for j in range(count):
            k += 1
            with treebank.abspath(f"wsj_{k:04d}.mrg").open() as stream:
                (tmp_path / "wsj" / section / f"wsj_{section}{j:02d}.mrg").write_bytes(stream.read())
    return tmp_path / "wsj"


def test_ptb_dir_serial_and_parallel_give_identical_files(ldc_tree: Path, tmp_path: Path) -> None:
    serial, parallel = tmp_path / "serial", tmp_path / "parallel"
    assert run("--ptb-dir", str(ldc_tree), "--out", str(serial), "--workers", "1").exit_code == 0
    assert run("--ptb-dir", str(ldc_tree), "--out", str(parallel), "--workers", "2").exit_code == 0
    for path in sorted(serial.iterdir()):
        assert path.read_bytes() == (parallel / path.name).read_bytes(), path.name
    manifest = json.loads((serial / "manifest.json").read_text())
    assert manifest["source"]["kind"] == "ldc"
    assert manifest["source"]["files"] == {"train": 8, "dev": 2, "test": 2}
    first_test = (serial / "test.conllu").read_text().split("\n", 1)[0]
    assert first_test == "# sent_id = wsj_2300.mrg:1"


def test_options_change_the_view(ldc_tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "raw"
    result = run("--ptb-dir", str(ldc_tree), "--out", str(out), "--keep-punct", "--cased", "--keep-digits",
                 "--max-length", "20", "--max-vocab", "50", "--min-freq", "1")
    assert result.exit_code == 0, result.output
    train = (out / "train.txt").read_text().splitlines()
    assert all(len(line.split()) <= 20 for line in train)
    dev = (out / "dev.txt").read_text().splitlines()
    assert any(len(line.split()) > 20 for line in dev), "--max-length must not touch dev"
    text = " ".join(train + dev)
    assert "," in text.split() and any(c.isupper() for c in text) and any(c.isdigit() for c in text)
    vocab = json.loads((out / "vocab.json").read_text())
    distinct = {w for line in train for w in line.split()}
    assert len(distinct) > 50
    assert vocab["size"] == 53 and len(vocab["words"]) == 50 and set(vocab["words"]) <= distinct
    trees = (out / "dev.trees").read_text()
    assert "(, ,)" in trees, "--keep-punct keeps punctuation in the trees too"
    assert not list(out.glob("*.nopunct.conllu")), "with --keep-punct the full tree is the model's tree"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["splits"]["train"]["dropped_too_long"] > 0


def test_collins_rules_give_other_heads(ldc_tree: Path, tmp_path: Path) -> None:
    assert run("--ptb-dir", str(ldc_tree), "--out", str(tmp_path / "p"), "--workers", "1").exit_code == 0
    assert run("--ptb-dir", str(ldc_tree), "--out", str(tmp_path / "c"), "--workers", "1",
               "--head-rules", "collins").exit_code == 0
    penn = conllu_sentences(tmp_path / "p" / "dev.conllu")
    collins = conllu_sentences(tmp_path / "c" / "dev.conllu")
    assert [s.words for s in penn] == [s.words for s in collins]
    assert [s.heads for s in penn] != [s.heads for s in collins]


def test_extra_text_goes_to_train_without_dev_or_test_sentences(ldc_tree: Path, tmp_path: Path) -> None:
    base = tmp_path / "base"
    assert run("--ptb-dir", str(ldc_tree), "--out", str(base)).exit_code == 0
    dev_text = conllu_sentences(base / "dev.conllu")[0].text
    extra = tmp_path / "extra.txt"
    # The dev sentence comes back detokenised and differently cased: it must still be recognised.
    extra.write_text(f"{dev_text.upper().replace(' ,', ',')}\nA fresh sentence about 42 cats.\n")
    out = tmp_path / "extra"
    result = run("--ptb-dir", str(ldc_tree), "--out", str(out), "--extra-text", str(extra), "--one-per-line")
    assert result.exit_code == 0, result.output
    train = (out / "train.txt").read_text().splitlines()
    assert train[:-1] == (base / "train.txt").read_text().splitlines()
    assert train[-1] == "a fresh sentence about N cats"
    counts = json.loads((out / "manifest.json").read_text())["splits"]["train"]
    assert counts["extra_text_removed_overlap"] == 1 and counts["extra_text_sentences"] == 1
    assert (out / "train.conllu").read_bytes() == (base / "train.conllu").read_bytes()


def test_extra_text_already_in_the_models_view_keeps_its_numbers(ldc_tree: Path, tmp_path: Path) -> None:
    """A model-view file (``preprocess text``'s ``train.txt``) as extra text: its numbers stay the placeholders the
    treebank's numbers fold to, not the word "n"."""
    extra = tmp_path / "view.txt"
    extra.write_text("prices rose N.N to N in N\nRaw text says 3.5 to 1,200 in 1990\n")
    out = tmp_path / "extra"
    result = run("--ptb-dir", str(ldc_tree), "--out", str(out), "--extra-text", str(extra), "--one-per-line")
    assert result.exit_code == 0, result.output
    assert (out / "train.txt").read_text().splitlines()[-2:] == ["prices rose N.N to N in N",
                                                                "raw text says N.N to N,N in N"]


# ------------------------------------------------------------------------------- atomicity and bad input


def test_existing_output_needs_force(ldc_tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    result = run("--ptb-dir", str(ldc_tree), "--out", str(out))
    assert isinstance(result.exception, DepinduceError) and "--force" in str(result.exception)
    assert (out / "keep.txt").read_text() == "mine"
    # --force replaces only a dataset depinduce wrote: a folder of the user's is refused even then (issue 46)
    result = run("--ptb-dir", str(ldc_tree), "--out", str(out), "--force")
    assert isinstance(result.exception, DepinduceError) and "not a dataset depinduce wrote" in str(result.exception)
    assert (out / "keep.txt").read_text() == "mine"
    (out / "keep.txt").unlink()
    assert run("--ptb-dir", str(ldc_tree), "--out", str(out), "--force").exit_code == 0
    assert run("--ptb-dir", str(ldc_tree), "--out", str(out), "--force").exit_code == 0
    assert (out / "manifest.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "wsj"]


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        (b"( (S (NN a)) )\n( (S (NN b) )\n( (S (NN c)) )\n", 2, "unbalanced brackets"),
        (b"( (S (NN a)) )\n(S (NN b)) ))\n", 2, "closes nothing"),
        (b"( (S (NN caf\xe9)) )\n", 1, "not valid UTF-8"),
        (b"", 1, "empty file"),
    ],
)
def test_bad_mrg_is_one_located_error_and_nothing_is_written(
    ldc_tree: Path, tmp_path: Path, content: bytes, line: int, message: str
) -> None:
    bad = ldc_tree / "22" / "wsj_2201.mrg"
    bad.write_bytes(content)
    out = tmp_path / "out"
    result = run("--ptb-dir", str(ldc_tree), "--out", str(out), "--workers", "2")
    assert isinstance(result.exception, InputError)
    assert str(result.exception).startswith(f"{bad}:{line}: ")
    assert message in str(result.exception)
    assert "\n" not in str(result.exception)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wsj"]


def test_an_endless_treebank_file_is_one_line_not_all_of_memory(ldc_tree: Path, tmp_path: Path) -> None:
    endless = ldc_tree / "23" / "wsj_2300.mrg"
    with endless.open("r+b") as stream:  # sparse: 65 MiB that take no disk
        stream.truncate(65 * 2**20)
    out = tmp_path / "out"
    result = run("--ptb-dir", str(ldc_tree), "--out", str(out))
    assert isinstance(result.exception, InputError), result.output
    assert str(result.exception) == f"{endless}: more than 64 MiB, too large for a treebank file"
    assert not out.exists()

    endless.unlink()
    endless.symlink_to("/dev/zero")
    result = run("--ptb-dir", str(ldc_tree), "--out", str(out))
    assert isinstance(result.exception, InputError), result.output
    assert str(result.exception).startswith(f"{endless}: ") and "\n" not in str(result.exception)
    assert not out.exists()
