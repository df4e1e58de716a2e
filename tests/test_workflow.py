"""The workflow README opens with, run as a new user would — ``preprocess ptb``, ``train --model
structformer``, ``parse input.txt > out.conllu`` into MaltEval — and the defaults, bundled model, MaltEval-safe
output, punctuation marks and blank-line warnings that make it work."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SHARED
from malteval_reader import MaltEvalError, is_tree, read_malteval
from depinduce.checksum import sha256_file
from depinduce.models.bundled import bundled_dir, model_card, newest_finished_run
from depinduce.training.defaults import bundled_recipe_names, fresh_run_dir, recipe_path

FRENCH_DEV = SHARED / "data" / "ud" / "UD_French-GSD" / "fr_gsd-ud-dev.conllu"


def run(args: list[str], cwd: Path, stdin: str | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "depinduce", *args], cwd=cwd, input=stdin, capture_output=True,
                          text=True, timeout=timeout)


def one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


# ------------------------------------------------------------------------------------- the four lines


def test_the_four_lines_as_written(tmp_path: Path, nltk_data: Path) -> None:
    """preprocess ptb → train --model structformer → parse input.txt > out.conllu → a MaltEval-readable file,
    parsed by the run just trained (stderr says so)."""
    prep = run(["preprocess", "ptb", "--quiet"], tmp_path)
    assert prep.returncode == 0, prep.stderr
    assert (tmp_path / "data" / "ptb" / "train.txt").is_file()
    again = run(["preprocess", "ptb"], tmp_path)  # an existing target is refused, and the message says where
    assert one_line_error(again) == "data/ptb already exists; use --force to replace it"

    train = run(["train", "--model", "structformer", "--max-time", "0.4", "--threads", "1",
                 "--set", "eval_every=5", "--set", "batch_tokens=1024"], tmp_path)
    assert train.returncode == 0, train.stderr
    chosen = train.stderr.splitlines()[0]
    assert chosen.startswith("train structformer: data data/ptb, recipe structformer-ptb-cpu")
    assert "run directory runs/structformer" in chosen and "time budget 0.4 minutes" in chosen
    assert (tmp_path / "runs" / "structformer" / "model.pt").is_file()

    (tmp_path / "input.txt").write_text("The company said it expects profits to rise .\n"
                                        "Shares fell sharply in early trading , analysts said .\n", encoding="utf-8")
    parse = subprocess.run(f"{sys.executable} -m depinduce parse input.txt > out.conllu", shell=True,
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert parse.returncode == 0, parse.stderr
    assert "parse: using runs/structformer (the most recently finished run under runs/)" in parse.stderr
    sentences = read_malteval((tmp_path / "out.conllu").read_text(encoding="utf-8"))
    assert [len(s) for s in sentences] == [9, 10]
    assert all(is_tree([head for _, head, _ in s]) for s in sentences)
    # the tokens hidden from the model are marked, so MaltEval's --ExcludeDeprels punct leaves them out
    assert [(form, rel) for form, _, rel in sentences[1] if rel == "punct"] == [(",", "punct"), (".", "punct")]

    # a second train --model structformer never reuses the first run's folder
    assert fresh_run_dir("structformer", tmp_path / "runs") == tmp_path / "runs" / "structformer-2"


# ---------------------------------------------------------------------------------------------- defaults


def test_train_without_data_says_how_to_make_it(tmp_path: Path) -> None:
    result = run(["train", "--model", "structformer"], tmp_path)
    assert one_line_error(result) == ("data/ptb: no data folder here; run `depinduce preprocess ptb` first "
                                      "(or pass --data DIR)")
    assert not (tmp_path / "runs").exists()


def test_recipes_by_name_are_bundled_for_every_trainable_backend() -> None:
    names = bundled_recipe_names()
    for model in ("structformer", "udgn", "prpn", "probformer", "rngtr"):
        assert f"{model}-ptb-cpu" in names or f"{model}-ud-cpu" in names
    assert recipe_path("udgn-ud-cpu").parent.parent == Path(__file__).resolve().parents[1] / "depinduce"
    from depinduce.errors import DepinduceError

    with pytest.raises(DepinduceError, match="no bundled recipe of that name"):
        recipe_path("udgn-nonexistent")


def test_preprocess_default_outputs(tmp_path: Path, ewt_dir: Path) -> None:
    treebank = tmp_path / "UD_Tiny-Test"
    treebank.mkdir()
    blocks = (ewt_dir / "en_ewt-ud-dev.conllu").read_text(encoding="utf-8").split("\n\n")
    (treebank / "tiny-ud-train.conllu").write_text("\n\n".join(blocks[:60]) + "\n\n", encoding="utf-8")
    (treebank / "tiny-ud-dev.conllu").write_text("\n\n".join(blocks[60:80]) + "\n\n", encoding="utf-8")
    result = run(["preprocess", "ud", "--treebank", str(treebank), "--quiet"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "data" / "UD_Tiny-Test" / "vocab.json").is_file()
    (tmp_path / "notes.txt").write_text("A first sentence here. And a second one.\n", encoding="utf-8")
    result = run(["preprocess", "text", "notes.txt", "--quiet"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "data" / "notes" / "train.txt").read_text(encoding="utf-8").count("\n") == 2
    result = run(["preprocess", "text", "-"], tmp_path, stdin="Some text .\n")
    assert one_line_error(result).endswith("give --out DIR")


# ------------------------------------------------------------------------------------ the bundled model


def test_bundled_model_matches_its_card_and_parses_trees(tmp_path: Path) -> None:
    card = model_card()
    assert sha256_file(bundled_dir() / "model.pt") == card["model_sha256"]
    assert (bundled_dir() / "model.pt").stat().st_size <= 10 * 1024 * 1024
    for result in card["results"]:  # the card's claim: above right-branching on DDA and UDA
        assert result["model"]["dda"] > result["right-branching"]["dda"]
        assert result["model"]["uda"] > result["right-branching"]["uda"]
    text = ("The quick brown fox jumps over the lazy dog .\n"
            "I would like to book a flight to Boston tomorrow morning , please .\n"
            "Unsupervised parsers learn syntax from raw text .\n")
    result = run(["parse", "-"], tmp_path, stdin=text)
    assert result.returncode == 0, result.stderr
    assert "using the bundled default model" in result.stderr
    sentences = read_malteval(result.stdout)
    assert [len(s) for s in sentences] == [10, 14, 8]
    assert all(is_tree([head for _, head, _ in s]) for s in sentences)
    # a neural model, not a baseline: its trees are not all right- or left-branching
    heads = [[h for _, h, _ in s] for s in sentences]
    assert any(h[:-1] != list(range(2, len(h))) + [0] for h in heads)
    # the decoder on its card is its default; naming another changes the trees
    assert card["decoder"] in ("mst", "eisner")
    explicit = run(["parse", "--model", "default", "--decoder", card["decoder"], "-"], tmp_path, stdin=text)
    assert explicit.stdout == result.stdout


def test_bundled_model_refuses_a_changed_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "default"
    shutil.copytree(bundled_dir(), copy)
    with (copy / "model.pt").open("ab") as stream:
        stream.write(b"\0")
    import depinduce.models.bundled as bundled
    from depinduce.errors import DepinduceError

    monkeypatch.setattr(bundled, "bundled_dir", lambda: copy)
    with pytest.raises(DepinduceError, match="does not match its card's sha256"):
        bundled.verified_bundled_dir()


def test_unfinished_runs_are_not_chosen(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for name, finished in (("a", True), ("b", False)):
        (runs / name).mkdir(parents=True)
        (runs / name / "config.yaml").write_text("model: udgn\n")
        (runs / name / "model.pt").write_bytes(b"")
        entry = {"started": "x", **({"finished": "y"} if finished else {})}
        manifest = {"format": "depinduce-run", "model": "udgn", "data": {"dir": "data/ptb"}, "runs": [entry]}
        (runs / name / "manifest.json").write_text(json.dumps(manifest))
    assert newest_finished_run(runs) == runs / "a"
    assert newest_finished_run(tmp_path / "none") is None


# --------------------------------------------------------------------------------- MaltEval-safe output


def test_default_conllu_is_malteval_safe_and_full_ud_validates(tmp_path: Path) -> None:
    """CoNLL-U input with multiword tokens (French GSD): the default output has only syntactic words and no
    comments; --full-ud keeps the UD form, which passes the UD validator."""
    if not FRENCH_DEV.is_file():
        pytest.skip(f"needs {FRENCH_DEV} (../shared), which is absent")
    blocks = FRENCH_DEV.read_text(encoding="utf-8").split("\n\n")
    sample = "\n\n".join(b for b in blocks[:40] if b.strip()) + "\n\n"
    assert "\n1-2\t" in sample or any("-" in line.split("\t")[0] for line in sample.splitlines() if "\t" in line)
    (tmp_path / "fr.conllu").write_text(sample, encoding="utf-8")
    plain = run(["parse", "--model", "right-branching", "--input-format", "conllu", "fr.conllu"], tmp_path)
    assert plain.returncode == 0, plain.stderr
    sentences = read_malteval(plain.stdout)
    assert len(sentences) == sample.count("# sent_id")
    assert not any(line.startswith("#") for line in plain.stdout.splitlines())
    full = run(["parse", "--model", "right-branching", "--input-format", "conllu", "--full-ud", "fr.conllu"],
               tmp_path)
    assert full.returncode == 0, full.stderr
    with pytest.raises(MaltEvalError):
        read_malteval(full.stdout)
    (tmp_path / "full.conllu").write_text(full.stdout, encoding="utf-8")
    check = subprocess.run(["udvalidate", "--lang", "ud", "--level", "2", str(tmp_path / "full.conllu")],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    # the same words, heads and labels either way
    words_full = [line.split("\t") for line in full.stdout.splitlines() if line and line.split("\t")[0].isdigit()]
    words_plain = [line.split("\t") for line in plain.stdout.splitlines() if line]
    assert [c[1:8] for c in words_full] == [c[1:8] for c in words_plain]


def test_punctuation_is_marked_and_blank_lines_are_named(tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("Hello , world !\n\nGood morning .\n\n\n", encoding="utf-8")
    result = run(["parse", "--model", "right-branching", "in.txt"], tmp_path)
    assert result.returncode == 0
    assert result.stderr.strip() == ("warning: in.txt: lines 2, 4, 5 held no sentence and were skipped; the output "
                                     "has one sentence per non-blank line (sent_id = its input line number in the "
                                     "full UD form)")
    rows = [line.split("\t") for line in result.stdout.splitlines() if line]
    assert [(r[1], r[3], r[7]) for r in rows] == [
        ("Hello", "X", "dep"), (",", "PUNCT", "punct"), ("world", "X", "root"), ("!", "PUNCT", "punct"),
        ("Good", "X", "dep"), ("morning", "X", "root"), (".", "PUNCT", "punct"),
    ]
    conllx = run(["parse", "--model", "right-branching", "--format", "conllx", "in.txt"], tmp_path)
    assert [line.split("\t")[7] for line in conllx.stdout.splitlines() if line].count("punct") == 3
    # full UD form: sent_id is the input line number, so the output can be matched back
    full = run(["parse", "--model", "right-branching", "--full-ud", "in.txt"], tmp_path)
    assert [line for line in full.stdout.splitlines() if line.startswith("# sent_id")] == [
        "# sent_id = 1", "# sent_id = 3"]
    wrong = run(["parse", "--model", "right-branching", "--full-ud", "--format", "brackets", "in.txt"], tmp_path)
    assert one_line_error(wrong) == "--full-ud applies to --format conllu, not brackets"
