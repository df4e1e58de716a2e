"""Hostile input and faults, as a careless or unlucky user meets them: every case runs the real command in a
subprocess and checks README's promise — exactly one line on stderr, exit code 2, no traceback, and the user's
files untouched — or, where the input is legal, the right result.  New commands add their cases here."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from depinduce.locking import exclusive
from training_support import make_data, subprocess_env, tiny_plugin  # noqa: F401

PTB_LIKE = """# sent_id = s1
# punct_rule = ptb
1\tThe\t_\tDET\tDT\t_\t2\tdep\t_\t_
2\tdog\t_\tNOUN\tNN\t_\t3\tdep\t_\t_
3\tbarked\t_\tVERB\tVBD\t_\t0\troot\t_\t_
4\t.\t_\tPUNCT\t.\t_\t3\tdep\t_\t_

# sent_id = s2
# punct_rule = ptb
1\tCats\t_\tNOUN\tNNS\t_\t2\tdep\t_\t_
2\tsleep\t_\tVERB\tVBP\t_\t0\troot\t_\t_
3\tsoundly\t_\tADV\tRB\t_\t2\tdep\t_\t_

"""


def run(args: list[str], cwd: Path, *, stdin: str | None = None, env: dict[str, str] | None = None,
        shell_redirect: str = "", preexec=None, timeout: int = 300) -> subprocess.CompletedProcess:
    """``python -m depinduce ARGS`` (with a shell redirection such as ``> /dev/full`` or ``<&-`` when given)."""
    command = [sys.executable, "-m", "depinduce", *args]
    if shell_redirect:
        quoted = " ".join(f"'{a}'" for a in command)
        return subprocess.run(f"{quoted} {shell_redirect}", shell=True, cwd=cwd, capture_output=True, text=True,
                              env=env, timeout=timeout, preexec_fn=preexec)
    return subprocess.run(command, cwd=cwd, input=stdin, capture_output=True, text=True, env=env, timeout=timeout,
                          preexec_fn=preexec)


def one_line(result: subprocess.CompletedProcess) -> str:
    """The single stderr line of a refused command (exit 2, no traceback)."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and "Warning" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "in.txt").write_text("The dog barked .\nCats sleep soundly\n", encoding="utf-8")
    (tmp_path / "gold.conllu").write_text(PTB_LIKE, encoding="utf-8")
    return tmp_path


@pytest.fixture
def tiny_run(tmp_path: Path, tiny_plugin: Path) -> tuple[Path, Path, dict[str, str]]:  # noqa: F811
    """A finished tiny-mlm run (with last.pt), its data folder, and the environment that registers the model."""
    data = make_data(tmp_path / "data", n_train=60, n_dev=10)
    env = subprocess_env(tiny_plugin)
    result = run(["train", "--model", "tiny-mlm", "--data", str(data), "--out", str(tmp_path / "run"), "--quiet",
                  "--threads", "1", "--set", "epochs=1", "--set", "batch_tokens=200"], tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    return tmp_path / "run", data, env


# ------------------------------------------------------------------------------- output and stream errors


@pytest.mark.parametrize("fmt", ["conllu", "conllx", "brackets", "jsonl"])
def test_parse_into_a_full_disk(work: Path, fmt: str) -> None:
    result = run(["parse", "--model", "right-branching", "--format", fmt, "in.txt"], work, shell_redirect="> /dev/full")
    assert one_line(result) == "<stdout>: cannot write (No space left on device)"


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_eval_into_a_full_disk(work: Path, extra: list[str]) -> None:
    result = run(["eval", "--gold", "gold.conllu", "--pred", "gold.conllu", *extra], work,
                 shell_redirect="> /dev/full")
    assert one_line(result) == "<stdout>: cannot write (No space left on device)"


def test_models_into_a_full_disk(work: Path) -> None:
    assert one_line(run(["models"], work, shell_redirect="> /dev/full")).startswith("<stdout>: cannot write")


def test_closed_stdout(work: Path) -> None:
    result = run(["parse", "--model", "right-branching", "in.txt"], work, shell_redirect=">&-")
    assert one_line(result) == "<stdout>: cannot write (the stream is closed)"


@pytest.mark.parametrize("args", [
    ["eval", "--gold", "gold.conllu", "--pred", "-"],
    ["eval", "--gold", "-", "--pred", "gold.conllu"],
    ["parse", "--model", "right-branching", "-"],
    ["preprocess", "text", "--out", "t", "-"],
])
def test_closed_stdin(work: Path, args: list[str]) -> None:
    assert one_line(run(args, work, shell_redirect="<&-")) == "<stdin>: cannot read (the stream is closed)"
    assert not (work / "t").exists()


def test_analyze_csv_into_a_full_disk_and_into_a_folder(work: Path, ewt_dir: Path) -> None:
    blocks = (ewt_dir / "en_ewt-ud-dev.conllu").read_text(encoding="utf-8").split("\n\n")[:20]
    (work / "ewt.conllu").write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    base = ["analyze", "heads", "--model", "default", "--gold", "ewt.conllu", "--quiet"]
    assert one_line(run([*base, "--csv", "/dev/full", "--force"], work)) == (
        "/dev/full: cannot write (No space left on device)")
    (work / "adir").mkdir()
    assert one_line(run([*base, "--csv", "adir", "--force"], work)) == "adir: is a folder; give a file name"


# --------------------------------------------------------------------------------- folders not creatable


@pytest.mark.parametrize("out, message", [
    ("/proc/nonexist/x", "/proc/nonexist/x: cannot create the output folder (No such file or directory)"),
    ("afile.txt/sub", "afile.txt/sub: cannot create the output folder (a file is in the way)"),
])
def test_preprocess_into_an_impossible_folder(work: Path, nltk_data: Path, out: str, message: str) -> None:
    (work / "afile.txt").write_text("mine\n")
    assert one_line(run(["preprocess", "ptb", "--sample-only", "--out", out], work)) == message
    assert (work / "afile.txt").read_text() == "mine\n"


def test_preprocess_into_a_read_only_parent(work: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders; /proc covers the unwritable case")
    (work / "ro").mkdir(mode=0o555)
    line = one_line(run(["preprocess", "text", "in.txt", "--out", "ro/x"], work))
    assert line.startswith("ro/x: cannot")


def test_force_never_replaces_the_current_folder(work: Path) -> None:
    before = snapshot(work)
    line = one_line(run(["preprocess", "text", "in.txt", "--out", ".", "--force"], work))
    assert line == ".: refusing to replace a folder that holds the current folder (--out .)"
    assert snapshot(work) == before


@pytest.mark.parametrize("out", ["/proc/nonexist/run", "afile/run"])
def test_train_into_an_impossible_folder(tmp_path: Path, out: str) -> None:
    data = make_data(tmp_path / "data", n_train=20, n_dev=5)
    (tmp_path / "afile").write_text("mine\n")
    line = one_line(run(["train", "--model", "structformer", "--data", str(data), "--out", out], tmp_path))
    assert line.startswith(f"{out}: cannot create the output folder (")
    assert (tmp_path / "afile").read_text() == "mine\n"


# ------------------------------------------------------------------------------------ memory: never killed


def _limit_memory() -> None:
    limit = 6 * 1024**3  # address space; the old n×n path needed ~23 GB for this sentence
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@pytest.mark.slow
def test_a_50000_token_sentence(work: Path) -> None:
    n = 50_000
    lines = [f"{i}\tw{i}\t_\tNOUN\t_\t_\t{i + 1 if i < n else 0}\tdep\t_\t_" for i in range(1, n + 1)]
    (work / "long.conllu").write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    baseline = run(["parse", "--model", "right-branching", "--input-format", "conllu", "long.conllu"], work,
                   preexec=_limit_memory)
    assert baseline.returncode == 0, baseline.stderr
    heads = [int(line.split("\t")[6]) for line in baseline.stdout.splitlines() if line]
    assert heads == list(range(2, n + 1)) + [0]
    neural = run(["parse", "--model", "default", "--input-format", "conllu", "long.conllu"], work,
                 preexec=_limit_memory)
    assert one_line(neural) == (
        "long.conllu:1: sentence 1 has 50,000 words for the model; model 'udgn' scores every pair of words, so "
        "memory grows with the square of the length, and the limit is 1,000 words (--max-words N raises it)")


@pytest.mark.slow
def test_a_tree_too_deep_for_brackets(work: Path) -> None:
    (work / "long.txt").write_text(" ".join(f"w{i}" for i in range(10_500)) + "\n", encoding="utf-8")
    line = one_line(run(["parse", "--model", "right-branching", "--format", "brackets", "long.txt"], work))
    assert line == ("a tree is nested more than 10,000 levels deep, too deep to build or write as brackets; use "
                    "--format conllu for such a sentence")
    (work / "deep.txt").write_text(" ".join(f"w{i}" for i in range(2_000)) + "\n", encoding="utf-8")
    ok = run(["parse", "--model", "right-branching", "--format", "brackets", "deep.txt"], work)
    assert ok.returncode == 0 and ok.stdout.startswith("(w0 (w1 (w2 ") and ok.stdout.count(")") == 1999


# -------------------------------------------------------------------------------- silent wrong results


def test_a_self_loop_is_a_wrong_head_not_a_root(work: Path) -> None:
    looped = PTB_LIKE.replace("3\tbarked\t_\tVERB\tVBD\t_\t0\troot", "3\tbarked\t_\tVERB\tVBD\t_\t3\troot")
    (work / "loop.conllu").write_text(looped, encoding="utf-8")
    result = run(["eval", "--gold", "gold.conllu", "--pred", "loop.conllu", "--json"], work)
    assert result.returncode == 0, result.stderr
    metrics = json.loads(result.stdout)["metrics"]
    # 6 scored words; the self-loop on 'barked' is the one wrong head, and sentence 1 has no root
    assert metrics["dda"] == pytest.approx(500 / 6) and metrics["uda"] == pytest.approx(500 / 6)
    assert metrics["root_accuracy"] == pytest.approx(50.0)


def test_a_byte_order_mark_is_not_part_of_the_first_word(work: Path) -> None:
    (work / "bom.txt").write_bytes("\ufeffThe dog barked .\n".encode("utf-8"))
    parsed = run(["parse", "--model", "right-branching", "--full-ud", "bom.txt"], work)
    assert parsed.returncode == 0
    assert parsed.stdout.splitlines()[1] == "# text = The dog barked ."
    assert parsed.stdout.splitlines()[2].split("\t")[1] == "The"
    (work / "pred.conllu").write_text(parsed.stdout, encoding="utf-8")
    scored = run(["eval", "--gold", "pred.conllu", "--pred", "pred.conllu", "--json"], work)
    assert scored.returncode == 0, scored.stderr


def test_bare_cr_line_ends_are_line_ends(work: Path) -> None:
    (work / "mac.txt").write_bytes(b"The dog barked .\rCats sleep .\r")
    parsed = run(["parse", "--model", "right-branching", "--format", "jsonl", "mac.txt"], work)
    assert parsed.returncode == 0, parsed.stderr
    assert [json.loads(line)["words"] for line in parsed.stdout.splitlines()] == [
        ["The", "dog", "barked", "."], ["Cats", "sleep", "."]]


def test_a_recipe_with_a_duplicate_key_is_refused(tmp_path: Path) -> None:
    data = make_data(tmp_path / "data", n_train=20, n_dev=5)
    (tmp_path / "r.yaml").write_text("model: structformer\ntrain:\n  lr: 1.0e-3\n  epochs: 2\n  lr: 5.0e-3\n")
    line = one_line(run(["train", "--recipe", "r.yaml", "--data", str(data), "--out", "run"], tmp_path))
    assert line == "r.yaml:5: not valid YAML: key 'lr' appears twice (first on line 3)"
    assert not (tmp_path / "run").exists()


def test_resume_after_editing_the_config_is_refused(tiny_run) -> None:
    run_dir, data, env = tiny_run
    config = run_dir / "config.yaml"
    config.write_text(config.read_text().replace("lr: 0.0003", "lr: 0.1"))
    before = snapshot(run_dir)
    line = one_line(run(["train", "--data", str(data), "--out", str(run_dir), "--resume"], run_dir.parent, env=env))
    assert line.startswith(f"{config}: edited since the run started; --resume continues with the settings")
    assert snapshot(run_dir) == before


# -------------------------------------------------------------------------------------- data under --force


def test_train_with_the_data_folder_as_out_is_refused(tmp_path: Path) -> None:
    data = make_data(tmp_path / "data", n_train=20, n_dev=5)
    before = snapshot(data)
    line = one_line(run(["train", "--model", "structformer", "--data", "data", "--out", "data", "--force"], tmp_path))
    assert line == ("--out data and --data data overlap; a run directory must be a folder of its own, apart from "
                    "the data")
    assert snapshot(data) == before


def test_preprocess_force_never_deletes_its_input(work: Path, ewt_dir: Path) -> None:
    treebank = work / "X"
    treebank.mkdir()
    blocks = (ewt_dir / "en_ewt-ud-dev.conllu").read_text(encoding="utf-8").split("\n\n")
    (treebank / "x-ud-train.conllu").write_text("\n\n".join(blocks[:30]) + "\n\n", encoding="utf-8")
    (treebank / "in.txt").write_text("Some raw text here.\n")
    before = snapshot(treebank)
    assert one_line(run(["preprocess", "ud", "--treebank", "X", "--out", "X", "--force"], work)) == (
        "X: refusing to replace it: it holds the input X")
    assert one_line(run(["preprocess", "text", "X/in.txt", "--out", "X", "--force"], work)) == (
        "X: refusing to replace it: it holds the input X/in.txt")
    assert one_line(run(["preprocess", "ud", "--treebank", "X", "--out", "X/sub", "--force"], work)) == (
        "X/sub: refusing to write inside the input X")
    assert snapshot(treebank) == before


def test_train_force_on_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    data = make_data(tmp_path / "data", n_train=20, n_dev=5)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("my notes\n")
    line = one_line(run(["train", "--model", "structformer", "--data", str(data), "--out", "mine", "--force"],
                        tmp_path))
    assert line == ("mine: not a run depinduce wrote (no depinduce manifest.json); --force replaces only a run "
                    "depinduce wrote, so choose another --out or move the folder away yourself")
    assert snapshot(tmp_path / "mine") == {"notes.txt": b"my notes\n"}


def test_sigterm_during_preprocess_leaves_no_partial_folder(work: Path, nltk_data: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "depinduce", "preprocess", "ptb", "--sample-only", "--out", "out", "--quiet",
                             "--workers", "1"], cwd=work, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(work.glob(".out.*.partial")):
        assert proc.poll() is None, "preprocess ended before its output was staged"
        time.sleep(0.005)
    assert list(work.glob(".out.*.partial")), "the staged folder never appeared"
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert proc.returncode != 0
    assert not list(work.glob(".out.*")) and not (work / "out").exists()


def test_a_stale_partial_folder_is_removed_with_a_line(work: Path) -> None:
    stale = work / ".t.abc123.partial"
    stale.mkdir()
    (stale / "train.txt").write_text("half\n")
    result = run(["preprocess", "text", "in.txt", "--out", "t"], work)
    assert result.returncode == 0, result.stderr
    assert "removed .t.abc123.partial, left half-written by an interrupted preprocess" in result.stderr
    assert not stale.exists() and (work / "t" / "train.txt").is_file()


# ------------------------------------------------------------------------------------------ concurrency


def test_a_locked_output_folder_is_refused_at_once(work: Path) -> None:
    data = make_data(work / "data", n_train=20, n_dev=5)
    with exclusive(work / "t", "test"):
        line = one_line(run(["preprocess", "text", "in.txt", "--out", "t"], work))
        assert line == (f"t is in use by process {os.getpid()} (depinduce test); wait for it to end or choose "
                        "another output folder")
    with exclusive(work / "run", "train"):
        line = one_line(run(["train", "--model", "structformer", "--data", str(data), "--out", "run"], work))
        assert line.startswith(f"run is in use by process {os.getpid()} (depinduce train)")
    assert not (work / "t").exists() and not (work / "run").exists()


def test_the_lock_dies_with_its_process(work: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from depinduce.locking import exclusive\n"
        "with exclusive('t', 'holder'):\n    print('held', flush=True); time.sleep(60)")],
        cwd=work, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    assert one_line(run(["preprocess", "text", "in.txt", "--out", "t"], work)).startswith("t is in use by process")
    holder.kill()
    holder.wait()
    result = run(["preprocess", "text", "in.txt", "--out", "t"], work)
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
def test_two_trainings_into_one_run_directory(tiny_run) -> None:
    run_dir, data, env = tiny_run
    first = subprocess.Popen([sys.executable, "-m", "depinduce", "train", "--data", str(data), "--out", "second",
                              "--model", "tiny-mlm", "--threads", "1", "--quiet", "--set", "sleep=0.2",
                              "--set", "epochs=50"], cwd=run_dir.parent, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (run_dir.parent / "second" / "config.yaml").exists():
            assert first.poll() is None, first.stderr.read()
            time.sleep(0.05)
        second = run(["train", "--data", str(data), "--out", "second", "--model", "tiny-mlm", "--force"],
                     run_dir.parent, env=env)
        assert one_line(second).startswith(f"second is in use by process {first.pid} (depinduce train)")
    finally:
        first.kill()
        first.wait()


# ------------------------------------------------------------------------------------ messages that mislead


def test_perplexity_reads_stdin(tiny_run) -> None:
    run_dir, data, env = tiny_run
    text = (data / "dev.txt").read_text()
    from_stdin = run(["perplexity", "--model", str(run_dir), "--json", "--quiet", "-"], run_dir.parent, stdin=text,
                     env=env)
    from_file = run(["perplexity", "--model", str(run_dir), "--json", "--quiet", str(data / "dev.txt")],
                    run_dir.parent, env=env)
    assert from_stdin.returncode == 0, from_stdin.stderr
    assert json.loads(from_stdin.stdout)["perplexity"] == json.loads(from_file.stdout)["perplexity"]


@pytest.mark.parametrize("item, problem", [
    ("lr=-1", "lr must be positive"), ("batch_tokens=0", "batch_tokens must be at least 1"),
    ("mask_rate=0", "mask_rate must be between 0 and 1"), ("epochs=0", "epochs must be at least 1"),
])
def test_a_bad_set_value_blames_the_set(tmp_path: Path, item: str, problem: str) -> None:
    data = make_data(tmp_path / "data", n_train=20, n_dev=5)
    line = one_line(run(["train", "--model", "structformer", "--data", str(data), "--out", "run", "--set", item],
                        tmp_path))
    assert line == f"--set {item}: {problem}"


def test_a_raw_pickle_checkpoint_is_one_line(tiny_run) -> None:
    run_dir, data, env = tiny_run
    import pickle

    (run_dir / "model.pt").write_bytes(pickle.dumps({"weights": [1, 2, 3]}, protocol=4))
    line = one_line(run(["parse", "--model", str(run_dir), "-"], run_dir.parent, stdin="a b\n", env=env))
    assert line == f"{run_dir / 'model.pt'}: not a readable depinduce checkpoint (UnpicklingError)"


def test_last_pt_as_a_folder_is_named_as_such(tiny_run) -> None:
    run_dir, data, env = tiny_run
    (run_dir / "last.pt").unlink()
    (run_dir / "last.pt").mkdir()
    line = one_line(run(["train", "--data", str(data), "--out", str(run_dir), "--resume"], run_dir.parent, env=env))
    assert line == f"{run_dir / 'last.pt'}: is not a file; the run's checkpoint must be a file"


def test_resume_on_other_data_says_so(tiny_run, tmp_path: Path) -> None:
    run_dir, data, env = tiny_run
    other = make_data(tmp_path / "other", n_train=30, n_dev=5, seed=7, gold_dev=False)
    line = one_line(run(["train", "--data", str(other), "--out", str(run_dir), "--resume"], run_dir.parent, env=env))
    assert line.startswith(f"{other}: ") and "train.txt" in line
    assert line.endswith("refusing to resume on different data")


def test_token_and_sentence_mismatches_point_at_their_lines(work: Path) -> None:
    wrong_token = PTB_LIKE.replace("2\tsleep\t", "2\tslept\t")
    (work / "p.conllu").write_text(wrong_token, encoding="utf-8")
    line = one_line(run(["eval", "--gold", "gold.conllu", "--pred", "p.conllu"], work))
    assert line.startswith("p.conllu:11: sentence 2 (sent_id s2): token 2 is 'slept' in the prediction")
    (work / "short.conllu").write_text(PTB_LIKE.split("\n\n")[0] + "\n\n", encoding="utf-8")
    line = one_line(run(["eval", "--gold", "gold.conllu", "--pred", "short.conllu"], work))
    assert line.startswith("gold.conllu:8: sentence 2 has no counterpart in short.conllu")


def test_usage_errors_are_one_line(work: Path) -> None:
    line = one_line(run(["parse", "--frobnicate"], work))
    assert line.startswith("depinduce parse: No such option '--frobnicate'.")
    assert line.endswith("(see 'depinduce parse --help')")
    assert one_line(run(["eval", "--gold", "gold.conllu"], work)) == (
        "depinduce eval: Missing option '--pred'. (see 'depinduce eval --help')")


def test_invalid_utf8_reads_the_same_in_parse_and_eval(work: Path) -> None:
    (work / "bad.txt").write_bytes(b"good line\nbad \xff line\n")
    (work / "bad.conllu").write_bytes(PTB_LIKE.encode().replace(b"Cats", b"C\xffts"))
    parse_line = one_line(run(["parse", "--model", "right-branching", "bad.txt"], work))
    eval_line = one_line(run(["eval", "--gold", "gold.conllu", "--pred", "bad.conllu"], work))
    assert parse_line == "bad.txt:2: not valid UTF-8: byte 0xff at byte 5 of the line"
    assert eval_line == "bad.conllu:10: not valid UTF-8: byte 0xff at byte 4 of the line"
