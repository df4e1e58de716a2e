"""Backends come only from the 'depinduce.models' entry-point group: a real third-party plugin is found and used."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

PLUGIN_CODE = textwrap.dedent(
    '''
    import torch
    from depinduce.models.base import Backend, Capabilities, ParseScores

    class FirstWordHead(Backend):
        """Every word depends on the first word, which is the root."""
        name = "first-word-head"
        description = "test plugin"
        capabilities = Capabilities(dependency=True, constituency=False, trainable=False, supervised=False)

        @classmethod
        def load(cls, run_dir, *, device="cpu", seed=0):
            return cls()

        def parse_scores(self, sentences):
            out = []
            for words in sentences:
                n = len(words)
                scores = torch.full((n + 1, n + 1), -5.0)
                scores[1, 0] = 0.0
                scores[2:, 1] = 0.0
                out.append(ParseScores(heads=scores))
            return out
    '''
)


def _make_dist(root: Path, dist: str, entry_points: str, module: str | None = None) -> None:
    info = root / f"{dist}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[depinduce.models]\n" + entry_points + "\n")
    if module:
        (root / f"{dist}_backend.py").write_text(module)


def _run(args: list[str], site: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(site) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-m", "depinduce", *args], input=stdin, capture_output=True, text=True, env=env, timeout=120
    )


def test_third_party_plugin_is_listed_and_parses(tmp_path: Path) -> None:
    _make_dist(tmp_path, "fwplugin", "first-word-head = fwplugin_backend:FirstWordHead", PLUGIN_CODE)
    listed = _run(["models", "--json"], tmp_path)
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)["backends"]}
    assert rows["first-word-head"]["provider"] == "fwplugin 1.0"
    assert rows["first-word-head"]["dependency"] is True and rows["first-word-head"]["constituency"] is False
    assert {"left-branching", "right-branching", "random"} <= set(rows)

    parsed = _run(["parse", "--model", "first-word-head", "--format", "conllx", "-"], tmp_path, "Dogs bark at cats .\n")
    assert parsed.returncode == 0, parsed.stderr
    heads = [int(line.split("\t")[6]) for line in parsed.stdout.splitlines() if line]
    # the plugin's tree over "Dogs bark at cats", then the final "." attaches to the root word (1)
    assert heads == [0, 1, 1, 1, 1]


def test_two_providers_of_one_name_is_a_clear_error(tmp_path: Path) -> None:
    _make_dist(tmp_path, "impostor", "right-branching = impostor_backend:FirstWordHead", PLUGIN_CODE)
    result = _run(["models"], tmp_path)
    assert result.returncode == 2
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1 and "Traceback" not in result.stderr
    assert "'right-branching' is registered twice" in message
    assert "impostor 1.0" in message and "depinduce" in message


def test_a_broken_plugin_does_not_hide_the_others(tmp_path: Path) -> None:
    _make_dist(tmp_path, "broken", "broken-model = broken_backend:Missing", "x = 1\n")
    result = _run(["models", "--json"], tmp_path)
    assert result.returncode == 0
    names = {row["name"] for row in json.loads(result.stdout)["backends"]}
    assert "right-branching" in names and "broken-model" not in names
    assert "backend 'broken-model' from broken 1.0 failed to load" in result.stderr
    parsed = _run(["parse", "--model", "broken-model", "-"], tmp_path, "a b\n")
    assert parsed.returncode == 2 and "failed to load" in parsed.stderr and "Traceback" not in parsed.stderr
