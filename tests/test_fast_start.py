"""Help is instant: ``depinduce --help`` and every command's help import neither torch nor numpy (3-6 s before),
and the decoders they list come from light registry metadata that must equal the backends' own."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.lower_bounds  # click's lazy help, quickly (scripts/check_lower_bounds.py)

HEAVY = ("torch", "numpy")

# Prints {"heavy": [...], "helps": {command path: {"text", "exit", "decoder"}}} for the group and every command
# in _COMMANDS, nested groups' subcommands included, help unwrapped so that no name is split across lines;
# "decoder": the command has a --decoder option that lists the decoders (DecoderOption).
HELP_ALL = textwrap.dedent(
    """
    import json, sys
    import click
    from click.testing import CliRunner
    from depinduce.cli.decoders import DecoderOption
    from depinduce.cli.main import _COMMANDS, cli

    def commands():
        yield [], cli
        for name in sorted(_COMMANDS):
            command = cli.get_command(click.Context(cli), name)
            yield [name], command
            if isinstance(command, click.Group):
                for sub in command.list_commands(click.Context(command)):
                    yield [name, sub], command.get_command(click.Context(command), sub)

    helps = {}
    for path, command in commands():
        result = CliRunner().invoke(cli, [*path, "--help"], terminal_width=10_000, max_content_width=10_000)
        helps[" ".join(path)] = {"text": result.output, "exit": result.exit_code,
                                 "decoder": any(isinstance(p, DecoderOption) for p in command.params)}
    print(json.dumps({"heavy": [m for m in HEAVY if m in sys.modules], "helps": helps}))
    """
)

# Every bundled backend's own decoders, as the backends name them.
BUNDLED_OWN = {
    "structformer": {"structformer-argmax"},
    "udgn": {"udgn-tree", "udgn-argmax"},
    "probformer": {"probformer-argmax", "probformer-nonprojective", "probformer-projective"},
    "rngtr": {"rngtr-mst"},
    "dmv": {"dmv-viterbi"},
}


def _help_all(site: Path | None = None) -> dict:
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = str(site) + os.pathsep + env.get("PYTHONPATH", "")
    code = f"HEAVY = {HEAVY!r}\n" + HELP_ALL
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _lists(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


@pytest.fixture(scope="module")
def helps() -> dict:
    return _help_all()


def test_no_help_imports_torch_or_numpy(helps: dict) -> None:
    assert helps["heavy"] == []
    failed = {path: h["text"] for path, h in helps["helps"].items() if h["exit"] != 0}
    assert failed == {}
    assert {"", "parse", "analyze", "preprocess", "preprocess ptb", "train"} <= set(helps["helps"])


def test_decoder_help_lists_shared_and_every_bundled_backends_decoders(helps: dict) -> None:
    with_decoder = {path: h["text"] for path, h in helps["helps"].items() if h["decoder"]}
    assert "parse" in with_decoder
    for path, text in with_decoder.items():
        for name in ("mst", "eisner", "argmax", *set().union(*BUNDLED_OWN.values())):
            assert _lists(text, name), f"'depinduce {path} --help' does not list {name}"


def test_group_help_gives_each_commands_summary(helps: dict) -> None:
    from depinduce.cli.main import _COMMANDS

    text = helps["helps"][""]["text"]
    for name in _COMMANDS:
        assert re.search(rf"^\s+{re.escape(name)}\s+\S", text, re.MULTILINE), f"no summary for {name}"


def test_declared_decoders_equal_the_backends_own() -> None:
    """The metadata help reads (``depinduce.decoders``) is the backend classes' ``own_decoders``: same names,
    same descriptions, and no bundled backend with own decoders left undeclared."""
    from depinduce.models.registry import declared_decoders, registrations
    from depinduce.structures import decode, decoder_names

    assert decode.DECODERS == decoder_names.DECODERS
    declared = declared_decoders()
    assert {name: set(own) for name, own in declared.items()} == BUNDLED_OWN
    for name, reg in registrations().items():
        own = {key: d.description for key, d in reg.load_class().own_decoders.items()}
        assert declared.get(name, {}) == own, name


PLUGIN = textwrap.dedent(
    '''
    import torch
    from depinduce.models.base import Backend, Capabilities, OwnDecoder
    from lightplugin_names import DECODERS

    class Lonely(Backend):
        name = "lonely"
        capabilities = Capabilities(dependency=True, constituency=False, trainable=False, supervised=False)
        own_decoders = {"lonely-first": OwnDecoder(DECODERS["lonely-first"], lambda scores: [0])}

        @classmethod
        def load(cls, run_dir, *, device="cpu", seed=0):
            return cls()

        def parse_scores(self, sentences):
            return []
    '''
)


def _dist(site: Path, name: str, entry_points: str) -> None:
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_third_party_decoders_are_listed_from_metadata_without_loading_the_plugin(tmp_path: Path) -> None:
    (tmp_path / "lightplugin_backend.py").write_text(PLUGIN)
    (tmp_path / "lightplugin_names.py").write_text('DECODERS = {"lonely-first": "the first word heads all"}\n')
    _dist(tmp_path, "lightplugin", "[depinduce.models]\nlonely = lightplugin_backend:Lonely\n\n"
                                   "[depinduce.decoders]\nlonely = lightplugin_names:DECODERS\n")
    # a plugin without metadata: help cannot list its decoders without importing it, so it lists none of them
    _dist(tmp_path, "plainplugin", "[depinduce.models]\nplain = plainplugin_backend:Plain\n")
    result = _help_all(tmp_path)
    assert result["heavy"] == []
    text = result["helps"]["parse"]["text"]
    assert _lists(text, "lonely-first") and _lists(text, "udgn-tree") and "plain:" not in text
