"""A hostile-input harness (issue 46): generated variants of every file kind depinduce reads, and faults while it
writes.  The promise checked is the same everywhere: a command either succeeds or exits 2 with one line on
stderr — never a traceback, never a partial output — and a fault leaves the old state or a clean one.

Generated inputs run the command in this process (hypothesis, a few dozen examples a property); faults run it
in a subprocess under a memory cap, so a reader that takes a hostile input whole fails here instead of swapping.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from depinduce.cli.main import main
from test_hostile_input import PTB_LIKE
from training_support import make_data, subprocess_env, tiny_plugin  # noqa: F401

MEMORY_CAP = 2 * 2**30
FUZZ = settings(max_examples=30, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

RECIPE = b"""model: structformer
train:
  epochs: 1
  batch_tokens: 200
  lr: 0.001
model_config:
  hidden_size: 16
"""
BRACKETS = b"(S (NP (DT The) (NN dog)) (VP (VBD barked)))\n(NP (NP (NNS Markets)))\n((S (NNS Cats) (VBP sleep)))\n"


def cli(*args: str) -> tuple[int, str]:
    """``depinduce ARGS`` in this process: its exit code and stderr (stdout is discarded)."""
    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["depinduce", *args]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.argv = argv
    return code, err.getvalue()


def check_outcome(code: int, err: str, *outputs: Path) -> None:
    """Success, or exit 2 with one line and none of ``outputs`` left behind."""
    assert "Traceback" not in err, err
    if code == 0:
        return
    assert code == 2, (code, err)
    assert len(err.strip().splitlines()) == 1, err
    assert "\x1b" not in err, err
    for path in outputs:
        assert not path.exists(), path
        assert not list(path.parent.glob(f".{path.name}.*")), list(path.parent.iterdir())


def mutated(base: bytes) -> st.SearchStrategy[bytes]:
    """Random bytes, truncations, and byte-level mutations (replace, insert, delete, duplicate) of ``base``."""
    def mutate(data: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
        out = bytearray(data)
        for kind, where, chunk in edits:
            at = where % (len(out) + 1)
            if kind == 0:
                out[at:at + len(chunk)] = chunk
            elif kind == 1:
                out[at:at] = chunk
            elif kind == 2:
                del out[at:at + len(chunk)]
            else:
                out[at:at] = out[at:at + 40] * 3
        return bytes(out)

    hostile = st.sampled_from([b"\x00", b"\xff", b"\n\n", b"\t", b"(", b")", b"&a ", b"*a", b"\x1b]0;x\x07",
                               b"[" * 50, b"\xe2\x80", b"{", b"-1", b"1e309", b"_", b"\r"])
    chunk = st.one_of(st.binary(min_size=1, max_size=12), hostile)
    edits = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 10_000), chunk), min_size=1, max_size=4)
    return st.one_of(
        st.binary(max_size=300),
        st.integers(0, len(base)).map(lambda n: base[:n]),
        edits.map(lambda e: mutate(base, e)),
    )


@pytest.fixture(scope="module")
def space(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    (folder / "in.txt").write_text("the dog saw a cat\nthe man liked the book\n", encoding="utf-8")
    make_data(folder / "data", n_train=40, n_dev=5)
    return folder


@pytest.fixture(scope="module")
def trained(space: Path) -> Path:
    """A structformer run, trained for a few steps once for the module."""
    result = subprocess.run([sys.executable, "-m", "depinduce", "train", "--model", "structformer", "--data",
                             str(space / "data"), "--out", str(space / "run"), "--max-tokens", "200", "--threads",
                             "1", "--quiet"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return space / "run"


# ------------------------------------------------------------------------------------------ generated input


@FUZZ
@given(data=mutated(PTB_LIKE.encode()))
def test_conllu_variants(space: Path, data: bytes) -> None:
    gold = space / "g.conllu"
    gold.write_bytes(data)
    for args in (["eval", "--gold", str(gold), "--pred", str(gold)], ["show", str(gold)], ["convert", str(gold)]):
        check_outcome(*cli(*args))
    html = space / "g.html"
    html.unlink(missing_ok=True)
    check_outcome(*cli("show", str(gold), "--html", str(html)), html)


@FUZZ
@given(data=mutated(BRACKETS))
def test_bracket_variants(space: Path, data: bytes) -> None:
    trees = space / "t.trees"
    trees.write_bytes(data)
    for args in (["show", str(trees)], ["eval", "--gold", str(trees), "--pred", str(trees)], ["convert", str(trees)]):
        check_outcome(*cli(*args))


@settings(FUZZ, max_examples=20)
@given(data=mutated(RECIPE))
def test_recipe_variants(space: Path, data: bytes) -> None:
    recipe = space / "r.yaml"
    recipe.write_bytes(data)
    out = space / "recipe-run"
    shutil.rmtree(out, ignore_errors=True)
    check_outcome(*cli("train", "--recipe", str(recipe), "--model", "structformer", "--data", str(space / "data"),
                       "--out", str(out), "--max-tokens", "40", "--threads", "1", "--quiet"), out)


@settings(FUZZ, max_examples=25)
@given(data=mutated(b""))
def test_vocab_variants(trained: Path, space: Path, data: bytes) -> None:
    vocab = trained / "vocab.json"
    saved = vocab.read_bytes()
    variant = data if data else saved
    if data and random.Random(len(data)).random() < 0.7:  # mostly mutations of the real file
        variant = saved[: len(data) * 3 % (len(saved) + 1)] + data
    vocab.write_bytes(variant)
    try:
        check_outcome(*cli("parse", "--model", str(trained), str(space / "in.txt"), "--quiet"))
    finally:
        vocab.write_bytes(saved)


# ------------------------------------------------------------------------------------------ faults


def capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def depinduce(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: int = 300
              ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "depinduce", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=timeout, preexec_fn=capped)


@contextlib.contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill (needs root): {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def big_text(path: Path, lines: int) -> Path:
    rng = random.Random(0)
    words = ["the", "dog", "saw", "a", "cat", "near", "river", "old", "man", "liked", "book"]
    path.write_text("".join(" ".join(rng.choices(words, k=12)) + "\n" for _ in range(lines)), encoding="utf-8")
    return path


def one_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_full_disk_is_one_line_naming_the_output(space: Path, trained: Path, tmp_path: Path) -> None:
    text = big_text(tmp_path / "big.txt", 20_000)
    with tmpfs(tmp_path / "small", "256k") as small:
        line = one_line(depinduce("preprocess", "text", str(text), "--out", str(small / "d"), cwd=tmp_path))
        assert line.startswith(f"{small / 'd'}: cannot write") and "No space left on device" in line
        assert not (small / "d").exists() and not list(small.glob(".d.*.partial"))
        line = one_line(depinduce("train", "--model", "structformer", "--data", str(space / "data"), "--out",
                                  str(small / "run"), "--max-tokens", "200", "--threads", "1", "--quiet",
                                  cwd=tmp_path))
        assert line.startswith(str(small / "run")) and "No space left on device" in line
        assert not list(small.glob("run/.*.tmp"))


def test_a_read_only_run_folder_is_one_line(trained: Path, space: Path, tmp_path: Path) -> None:
    gold = tmp_path / "test.conllu"
    gold.write_text(PTB_LIKE, encoding="utf-8")
    with tmpfs(tmp_path / "ro", "128m") as ro:
        shutil.copytree(trained, ro / "run")
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        result = depinduce("report", str(ro / "run"), "--test", str(gold), cwd=tmp_path)
        assert "Traceback" not in result.stderr, result.stderr
        if result.returncode:  # the cache of scores cannot be written: the last line names it (notes may precede)
            assert result.returncode == 2
            assert result.stderr.strip().splitlines()[-1] == f"{ro / 'run' / 'scores.json'}: cannot write " \
                                                             "(Read-only file system)"
        line = one_line(depinduce("train", "--resume", "--out", str(ro / "run"), "--data", str(space / "data"),
                                  "--max-tokens", "400", "--threads", "1", "--quiet", cwd=tmp_path))
        assert str(ro / "run") in line


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_preprocess_killed_at_random_points_leaves_no_partial_dataset(tmp_path: Path, sig: int) -> None:
    text = big_text(tmp_path / "big.txt", 60_000)
    rng = random.Random(sig)
    for attempt in range(3):
        out = tmp_path / f"d{attempt}"
        process = subprocess.Popen([sys.executable, "-m", "depinduce", "preprocess", "text", str(text), "--out",
                                    str(out)], cwd=tmp_path, stderr=subprocess.PIPE, text=True, preexec_fn=capped)
        time.sleep(rng.uniform(0.3, 4.0))
        process.send_signal(sig)
        stderr = process.communicate(timeout=120)[1]
        assert "Traceback" not in stderr, stderr
        if out.exists():  # it finished before the signal: then it is whole
            assert (out / "manifest.json").is_file()
        if sig == signal.SIGTERM:
            assert not list(tmp_path.glob(f".{out.name}.*.partial")), stderr
        # the next run starts clean (a SIGKILL's hidden leftover is removed by it) and completes
        rerun = depinduce("preprocess", "text", str(text), "--out", str(out), "--force", cwd=tmp_path)
        assert rerun.returncode == 0, rerun.stderr
        assert not list(tmp_path.glob(f".{out.name}.*.partial"))


def test_train_killed_at_random_points_resumes_or_starts_over(space: Path, tmp_path: Path,
                                                              tiny_plugin: Path) -> None:  # noqa: F811
    env = subprocess_env(tiny_plugin)
    rng = random.Random(7)
    base = ["train", "--model", "tiny-mlm", "--data", str(space / "data"), "--threads", "1", "--quiet",
            "--set", "epochs=3", "--set", "batch_tokens=100"]
    for attempt in range(3):
        out = tmp_path / f"run{attempt}"
        process = subprocess.Popen([sys.executable, "-m", "depinduce", *base, "--out", str(out)], cwd=tmp_path,
                                   env=env, stderr=subprocess.PIPE, text=True, preexec_fn=capped)
        time.sleep(rng.uniform(1.0, 6.0))
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=120)
        if (out / "last.pt").is_file():
            again = depinduce("train", "--out", str(out), "--resume", "--threads", "1", "--quiet", cwd=tmp_path,
                              env=env)
        else:
            again = depinduce(*base, "--out", str(out), "--force", cwd=tmp_path, env=env)
        assert again.returncode == 0, again.stderr
        assert json.loads((out / "manifest.json").read_text())["format"] == "depinduce-run"
