"""Every user-fixable failure is raised as one :class:`DepinduceError` subclass per kind (issue 22), so a script can
catch the kind it handles; the CLI prints the same message as one line with exit code 2 whatever the kind.

Each case is a real failure met through the command line (click's runner, in-process: once as a user runs it, once with
``standalone_mode=False`` so the exception's class can be read) or through the library function a script would call."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from depinduce.cli.common import UserError
from depinduce.cli.main import cli
from depinduce.errors import (
    DepinduceError, InputError, ModelError, NotFoundError, RecipeError, ResourceError, RunDirectoryError, UsageError,
)
from training_support import make_data, tiny_plugin  # noqa: F401

pytestmark = pytest.mark.lower_bounds  # click's exceptions and exit codes, quickly (scripts/check_lower_bounds.py)

PACKAGE = Path(__file__).resolve().parents[1] / "depinduce"
IO_DATA = Path(__file__).parent / "data" / "io"


def refused(args: list[str], stdin: str | None = None) -> DepinduceError:
    """Run ``depinduce ARGS`` twice: as a user does (it must print exactly the error's message as one line on
    stderr, nothing on stdout, exit code 2), and with click's ``standalone_mode=False`` so the command's
    :class:`UserError` reaches the test, raised from the library's error (``raise ... from``, the CLI's own
    chaining, not click's)."""
    result = CliRunner().invoke(cli, args, input=stdin)
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert result.stdout == ""
    with pytest.raises(UserError) as raised:
        CliRunner().invoke(cli, args, input=stdin, standalone_mode=False, catch_exceptions=False)
    error = raised.value.__cause__
    assert isinstance(error, DepinduceError), raised.value
    assert result.stderr == f"{error}\n" and "\n" not in str(error)
    return error


# --------------------------------------------------------------------------------------------- the kinds


def test_a_missing_gold_file_is_not_found(tmp_path: Path) -> None:
    missing = tmp_path / "gold.conllu"
    error = refused(["eval", "--gold", str(missing), "--pred", str(missing)])
    assert type(error) is NotFoundError
    assert str(error) == f"{missing}: cannot read (No such file or directory)"

    from depinduce.io import read_sentences

    with pytest.raises(NotFoundError, match="is a directory, not a file"):
        read_sentences(tmp_path, fmt="conllu")


def test_a_missing_data_folder_file_is_not_found(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    error = refused(["train", "--model", "structformer", "--data", str(data), "--out", str(tmp_path / "run")])
    assert type(error) is NotFoundError
    assert str(error) == f"{data}: no train.txt; make the data folder with `depinduce preprocess`"


def test_training_into_an_existing_run_directory_without_force(tmp_path: Path) -> None:
    data = make_data(tmp_path / "data", n_train=20, n_dev=5)
    run = tmp_path / "run"
    run.mkdir()
    (run / "notes.txt").write_text("mine", encoding="utf-8")
    error = refused(["train", "--model", "structformer", "--data", str(data), "--out", str(run)])
    assert type(error) is RunDirectoryError
    # a folder of the user's: neither --resume nor --force would be taken, so neither is offered (issue 60)
    assert str(error) == (f"{run} already exists and is not a run depinduce wrote (no depinduce manifest.json); "
                          "--force replaces only a run depinduce wrote, so choose another --out or move the folder "
                          "away yourself")
    assert sorted(p.name for p in run.iterdir()) == ["notes.txt"]


def test_resuming_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    from depinduce.training.run import check_run_dir

    with pytest.raises(RunDirectoryError) as caught:
        check_run_dir(tmp_path, force=False, resume=True)
    assert str(caught.value) == f"{tmp_path}: not a run directory (no config.yaml); nothing to resume"


def test_an_unknown_set_key_is_a_recipe_error(tmp_path: Path) -> None:
    data = make_data(tmp_path / "data", n_train=20, n_dev=5)
    error = refused(["train", "--model", "structformer", "--data", str(data), "--out", str(tmp_path / "run"),
                     "--set", "no_such_key=1"])
    assert type(error) is RecipeError and isinstance(error, UsageError)  # a recipe problem is a usage problem
    assert str(error).startswith("--set no_such_key: unknown key; training keys: ")
    assert not (tmp_path / "run").exists()


def test_an_unknown_recipe_key_in_a_file_is_a_recipe_error(tmp_path: Path) -> None:
    from depinduce.models.registry import backend_class
    from depinduce.training.config import resolve_config

    recipe = {"model": "structformer", "train": {"epochs": 1, "no_such_key": 2}}
    with pytest.raises(RecipeError) as caught:
        resolve_config(model_name=None, model_config_class=backend_class("structformer").config_class,
                       recipe=recipe, where="my.yaml")
    assert str(caught.value).startswith("my.yaml: unknown train key(s) no_such_key; known: ")


def test_options_that_do_not_fit_together_are_a_usage_error(tmp_path: Path) -> None:
    data = make_data(tmp_path / "data", n_train=20, n_dev=5)
    error = refused(["train", "--model", "structformer", "--data", str(data), "--out", str(tmp_path / "run"),
                     "--force", "--resume"])
    assert type(error) is UsageError
    assert str(error) == "--force starts over and --resume continues; choose one"


def test_an_unknown_model_name_is_a_model_error() -> None:
    error = refused(["parse", "--model", "no-such-model", "-"], stdin="a b\n")
    assert type(error) is ModelError
    assert str(error).startswith("unknown model 'no-such-model'; registered backends: ")


def test_a_damaged_checkpoint_is_a_model_error(tmp_path: Path, tiny_plugin: Path) -> None:  # noqa: F811
    data = make_data(tmp_path / "data", n_train=20, n_dev=5)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("model: tiny-mlm\nmodel_config:\n  hidden: 8\n", encoding="utf-8")
    (run / "vocab.json").write_bytes((data / "vocab.json").read_bytes())
    (run / "model.pt").write_bytes(b"PK\x03\x04 truncated")
    error = refused(["parse", "--model", str(run), "-"], stdin="the dog saw a cat\n")
    assert type(error) is ModelError
    assert str(error).startswith(f"{run / 'model.pt'}: not a readable depinduce checkpoint (")

    (run / "model.pt").unlink()
    error = refused(["parse", "--model", str(run), "-"], stdin="the dog saw a cat\n")
    assert type(error) is NotFoundError and str(error) == f"{run / 'model.pt'}: checkpoint not found"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_on_a_machine_without_it_is_a_resource_error() -> None:
    error = refused(["train", "--model", "structformer", "--device", "cuda"])
    assert type(error) is ResourceError
    assert str(error).startswith("--device cuda: CUDA is not available on this machine (torch ")


def test_a_missing_optional_extra_is_a_resource_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from depinduce.analysis.heads import correlate, save_heatmap

    result = correlate(torch.tensor([[0.1, 0.9], [0.8, 0.2], [0.3, 0.6]], dtype=torch.float64),
                       ["nsubj", "obj", "nsubj"], [(1, 1), (1, 2)], top=None, direction="child-to-parent")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the [plot] extra were not installed
    with pytest.raises(ResourceError) as caught:
        save_heatmap(result, tmp_path / "heads.png")
    assert str(caught.value) == "--plot needs matplotlib: pip install 'depinduce[plot]'"
    assert not (tmp_path / "heads.png").exists()


def test_malformed_input_is_a_located_input_error() -> None:
    gold = IO_DATA / "bad_head.conllu"
    error = refused(["eval", "--gold", str(gold), "--pred", str(gold)])
    assert type(error) is InputError
    assert (error.path, error.line) == (str(gold), 8) and str(error).startswith(f"{gold}:8: ")


# ----------------------------------------------------------------------------------------------- the source


def _bare_depinduce_errors(path: Path) -> list[int]:
    """Lines of ``path`` that build a DepinduceError itself rather than one of its kinds."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        target = node.func if isinstance(node, ast.Call) else node.exc if isinstance(node, ast.Raise) else None
        name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else None
        if name == "DepinduceError":
            lines.append(node.lineno)
    return lines


def test_the_scan_sees_a_bare_error(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("from depinduce import errors\n\ndef f(x):\n    if x:\n        raise errors.DepinduceError('no')\n"
                      "    raise ValueError(x)\n", encoding="utf-8")
    assert _bare_depinduce_errors(source) == [5]


def test_no_module_raises_the_base_class() -> None:
    skipped = {PACKAGE / "errors.py"}
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
             if path not in skipped for line in _bare_depinduce_errors(path)]
    assert found == [], "raise a DepinduceError subclass (depinduce/errors.py) at: " + ", ".join(found)
