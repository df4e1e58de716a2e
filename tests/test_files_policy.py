"""Issue 46, part A: nothing lost, nothing trusted blindly.  The output policy (no overwrite without --force,
atomic writes, --force replaces only what depinduce made), bounded readers, escaping for terminals and
spreadsheets, messages that name the right file, and one-word bracket trees."""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import subprocess
from pathlib import Path

import pytest

import depinduce
from depinduce.display import csv_cell, latex_text, markdown_cell, printable, quote
from depinduce.errors import InputError, ResourceError, RunDirectoryError, UsageError
from depinduce.io import parse_brackets_text
from depinduce.io.outputs import atomic_write_text
from test_hostile_input import PTB_LIKE, one_line, run, tiny_run  # noqa: F401
from training_support import make_data, subprocess_env, tiny_plugin  # noqa: F401

MEMORY_CAP = 2 * 2**30  # a reader that takes /dev/zero whole fails here instead of swapping


def capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "in.txt").write_text("The dog barked .\nCats sleep soundly\n", encoding="utf-8")
    (tmp_path / "gold.conllu").write_text(PTB_LIKE, encoding="utf-8")
    return tmp_path


# ------------------------------------------------------------------------------------------ output policy


def test_preprocess_force_refuses_a_folder_of_the_users(work: Path) -> None:
    (work / "u" / "sub").mkdir(parents=True)
    (work / "u" / "notes.txt").write_text("notes\n")
    line = one_line(run(["preprocess", "text", "in.txt", "--out", "u", "--force"], work))
    assert line.startswith("u: not a dataset depinduce wrote (no depinduce manifest.json)")
    assert (work / "u" / "notes.txt").read_text() == "notes\n" and (work / "u" / "sub").is_dir()


def test_preprocess_force_replaces_its_dataset_but_not_what_the_user_added(work: Path) -> None:
    assert run(["preprocess", "text", "in.txt", "--out", "d"], work).returncode == 0
    assert json.loads((work / "d" / "manifest.json").read_text())["format"] == "depinduce-dataset"
    assert run(["preprocess", "text", "in.txt", "--out", "d", "--force"], work).returncode == 0
    (work / "d" / "notes.txt").write_text("mine\n")
    line = one_line(run(["preprocess", "text", "in.txt", "--out", "d", "--force"], work))
    assert "notes.txt" in line and (work / "d" / "notes.txt").exists()


def test_train_force_does_not_take_a_config_yaml_for_a_run(work: Path) -> None:
    data = make_data(work / "data", n_train=20, n_dev=5)
    (work / "mine").mkdir()
    (work / "mine" / "config.yaml").write_text("my: settings\n")
    line = one_line(run(["train", "--model", "structformer", "--data", str(data), "--out", "mine", "--force"], work))
    assert "not a run depinduce wrote" in line
    assert (work / "mine" / "config.yaml").read_text() == "my: settings\n"


def test_show_html_and_report_plot_refuse_an_existing_file(work: Path) -> None:
    (work / "page.html").write_text("mine")
    (work / "curves.png").write_text("mine")
    assert one_line(run(["show", "gold.conllu", "--html", "page.html"], work)) == (
        "page.html: already exists (use --force to overwrite it)")
    assert one_line(run(["report", "nowhere", "--plot", "curves.png"], work)) == (
        "curves.png: already exists (use --force to overwrite it)")
    assert (work / "page.html").read_text() == "mine" and (work / "curves.png").read_text() == "mine"
    assert run(["show", "gold.conllu", "--html", "page.html", "--force"], work).returncode == 0
    assert "<html" in (work / "page.html").read_text()


def test_api_write_is_all_or_nothing_and_refuses_an_existing_file(tmp_path: Path) -> None:
    from depinduce.io import read_sentences

    good = read_sentences(_gold(tmp_path))[0]
    target = tmp_path / "out.conllu"
    with pytest.raises(UsageError, match="item 2"):
        depinduce.write([good, None], target)
    assert not target.exists() and not list(tmp_path.glob(".out.conllu.*"))
    target.write_text("mine")
    with pytest.raises(RunDirectoryError, match="already exists"):
        depinduce.write([good], target)
    assert target.read_text() == "mine"
    assert depinduce.write([good], target, force=True) == 1


def _gold(folder: Path) -> Path:
    path = folder / "gold.conllu"
    path.write_text(PTB_LIKE, encoding="utf-8")
    return path


def test_a_failed_write_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(ResourceError, match=r"scores\.json: cannot write \(No space left on device\)"):
        atomic_write_text(tmp_path / "scores.json", "{}")
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------------ bounded readers


@pytest.mark.parametrize("args", [
    ["parse", "--model", "right-branching", "/dev/zero"],
    ["eval", "--gold", "/dev/zero", "--pred", "gold.conllu"],
    ["show", "/dev/zero"],
    ["preprocess", "text", "/dev/zero", "--out", "t"],
])
def test_dev_zero_as_data_is_one_line(work: Path, args: list[str]) -> None:
    line = one_line(run(args, work, preexec=capped, timeout=120))
    assert line.startswith("/dev/zero") and "longer than 1 MiB" in line
    assert not (work / "t").exists()


def test_dev_zero_as_a_recipe_is_one_line(work: Path) -> None:
    data = make_data(work / "data", n_train=20, n_dev=5)
    line = one_line(run(["train", "--model", "structformer", "--recipe", "/dev/zero", "--data", str(data), "--out", "r"],
                        work, preexec=capped, timeout=120))
    assert line == "/dev/zero: recipe is not a regular file (a FIFO or device)"


def _parse(run_dir: Path, env: dict[str, str], **kwargs) -> str:
    (run_dir.parent / "in.txt").write_text("the dog saw a cat\n")
    return one_line(run(["parse", "--model", "run", "in.txt"], run_dir.parent, env=env, **kwargs))


@pytest.mark.slow
def test_a_hostile_vocab_json_is_one_line_naming_it(tiny_run: tuple[Path, Path, dict[str, str]]) -> None:
    run_dir, _, env = tiny_run
    vocab = run_dir / "vocab.json"
    saved = json.loads(vocab.read_text())
    vocab.unlink()
    vocab.symlink_to("/dev/zero")
    assert _parse(run_dir, env, preexec=capped, timeout=120) == (
        "run/vocab.json: vocabulary is not a regular file (a FIFO or device)")
    vocab.unlink()
    os.mkfifo(vocab)  # a FIFO would block the reader's open forever
    assert _parse(run_dir, env, timeout=60) == "run/vocab.json: vocabulary is not a regular file (a FIFO or device)"
    vocab.unlink()
    vocab.write_text("[" * 100_000 + "]" * 100_000)
    assert _parse(run_dir, env) == "run/vocab.json: not a depinduce file: JSON nested too deeply"
    saved["words"] += ["zzz-one", "zzz-two"]
    saved["counts"] = (saved.get("counts") or []) + [1, 1] if saved.get("counts") else saved.get("counts")
    vocab.write_text(json.dumps(saved))
    line = _parse(run_dir, env)
    assert line.startswith("run/vocab.json: has ") and "not this run's vocabulary" in line


def test_a_yaml_alias_bomb_is_refused_at_once(work: Path, tiny_run: tuple[Path, Path, dict[str, str]]) -> None:
    run_dir, _, env = tiny_run
    bomb = "train:\n  epochs: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
        f"  x{k}: &a{k} [{', '.join([f'*a{k - 1}'] * 9)}]\n" for k in range(1, 9))
    (work / "bomb.yaml").write_text(bomb)
    line = one_line(run(["train", "--model", "structformer", "--recipe", "bomb.yaml", "--data", "data", "--out", "r"],
                        work, preexec=capped, timeout=60))
    assert line.startswith("bomb.yaml:2: not valid YAML: anchors and aliases")
    (run_dir / "config.yaml").write_text(bomb)
    result = run(["report", str(run_dir), "--test", "gold.conllu"], work, env=env, preexec=capped, timeout=60)
    assert "Traceback" not in result.stderr and "MemoryError" not in result.stderr


def test_a_huge_recipe_value_is_quoted_short(work: Path) -> None:
    data = make_data(work / "data", n_train=20, n_dev=5)
    (work / "big.yaml").write_text("train:\n  epochs: '" + "x" * 3_000_000 + "'\n")
    line = one_line(run(["train", "--model", "structformer", "--recipe", "big.yaml", "--data", str(data), "--out", "r"],
                        work, preexec=capped, timeout=120))
    assert len(line) < 400 and "…" in line


def test_deep_yaml_names_the_file(tmp_path: Path) -> None:
    from depinduce.training.config import load_recipe

    (tmp_path / "deep.yaml").write_text("train: " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(InputError, match=r"deep\.yaml.*nested"):
        load_recipe(tmp_path / "deep.yaml")


# ------------------------------------------------------------------------------------------ escaping


def test_show_never_sends_a_tokens_escape_sequence_to_the_terminal(work: Path) -> None:
    evil = "1\tB\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07\t_\tNOUN\tNN\t_\t0\troot\t_\t_\n\n"
    (work / "evil.conllu").write_text(evil, encoding="utf-8")
    result = run(["show", "evil.conllu", "--color"], work)
    assert result.returncode == 0, result.stderr
    assert "]0;" not in result.stdout.replace("\\e]0;", "") and "\x07" not in result.stdout
    assert "\\e]0;pwned\\x07" in result.stdout


def test_an_error_message_shows_a_tokens_control_characters_escaped(work: Path) -> None:
    (work / "pred.conllu").write_text(PTB_LIKE.replace("\tdog\t", "\tB\x1b[2J\x1b[H\t"), encoding="utf-8")
    line = one_line(run(["eval", "--gold", "gold.conllu", "--pred", "pred.conllu"], work))
    assert "\x1b" not in line and "B\\e[2J\\e[H" in line


def test_cells_are_safe_for_spreadsheets_markdown_and_latex() -> None:
    assert [csv_cell(v) for v in ("=1+1", "+x", "-y", "@z", "\tt", "ok", -1.5)] == [
        "'=1+1", "'+x", "'-y", "'@z", "'\\tt", "ok", -1.5]
    assert markdown_cell("a|b\nc") == "a\\|b\\nc"
    assert latex_text(r"a\b{c}$&#^_%~|<>") == (
        r"a\textbackslash{}b\{c\}\$\&\#\textasciicircum{}\_\%\textasciitilde{}\textbar{}\textless{}\textgreater{}")
    assert printable("x\x1b]52;c;\x07\u202e") == "x\\e]52;c;\\x07\\u202e"
    assert quote("y" * 1000) == "'" + "y" * 60 + "…'"


def test_report_csv_and_latex_cells_are_escaped() -> None:
    from depinduce.api.reporting.render import _csv, latex_escape

    class Group:  # the attributes rendering reads
        label, model, test, test_label, n = "=HYPERLINK(\"x\")", "dmv", Path("a\nb|c"), "a\nb|c", 1
        stats: dict = {}
        paper: dict = {"dda": type("F", (), {"value": 1.0, "sd": None, "source": "@x"})()}

    text = _csv([Group()])  # type: ignore[list-item]
    assert "'=HYPERLINK" in text and "'@x" in text
    assert latex_escape("a|b<c>") == r"a\textbar{}b\textless{}c\textgreater{}"


# ------------------------------------------------------------------------------------------ wrong words


def test_a_fifo_model_pt_is_not_a_regular_file(tiny_run: tuple[Path, Path, dict[str, str]]) -> None:
    run_dir, _, env = tiny_run
    (run_dir / "model.pt").unlink()
    os.mkfifo(run_dir / "model.pt")
    assert _parse(run_dir, env, timeout=60) == (
        "run/model.pt: is not a regular file (a FIFO, device or folder); a checkpoint is a file")


def test_a_decoder_from_the_runs_config_is_blamed_on_it(tiny_run: tuple[Path, Path, dict[str, str]]) -> None:
    run_dir, _, env = tiny_run
    config = run_dir / "config.yaml"
    text = re.sub(r"(?m)^  decoder: .*$", "  decoder: nonsense", config.read_text())
    assert "decoder: nonsense" in text
    config.write_text(text)
    assert _parse(run_dir, env).startswith(
        "run/config.yaml: train.decoder, the decoder this run's config.yaml names, cannot parse: ")


# ------------------------------------------------------------------------------------------ unary chains


def test_a_file_of_one_word_trees_reads_its_words() -> None:
    sentences = parse_brackets_text("(NP (NP (NNS Markets)))\n( (S (NNP IBM)) )\n", "x.trees")
    assert [s.words for s in sentences] == [["Markets"], ["IBM"]]
    assert [s.xpos for s in sentences] == [["NNS"], ["NNP"]]
    assert parse_brackets_text("(a (b (c d)))\n", "x")[0].words == ["a", "b", "c", "d"]
