"""The package's folders show the data flow, and no import runs upward (README, "Development").

Every ``import depinduce.X`` / ``from depinduce.X import …`` in the package — at the top of a module or inside a
function, where lazy imports hide — is checked against the layer order below.  A layer imports only from layers
strictly below it (or from itself); two layers on the same level know nothing of each other (``metrics`` knows no
model, and ``models`` no metric).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "depinduce"

# top-level module or folder of depinduce -> level (higher levels may import lower ones)
LEVELS: dict[str, int] = {
    "errors": 0, "checksum": 0, "display": 0, "version": 0,
    "structures": 1, "locking": 1,
    "io": 2,
    "data": 3,
    "models": 4, "metrics": 4,
    "pipeline": 5,
    "training": 6, "analysis": 6, "pictures": 6,
    "api": 7,
    "cli": 9,
    "__main__": 10,
}
# ``depinduce/__init__.py`` only forwards the public names to ``api`` and ``errors`` on first use.
UNCHECKED = {PACKAGE / "__init__.py"}


def layer_of(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def imported_layers(path: Path) -> list[tuple[int, str]]:
    """(line, layer) of every depinduce import in ``path``, relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's own package
                base = list(path.relative_to(PACKAGE.parent).with_suffix("").parts[: -node.level])
                names = [".".join(base + ([node.module] if node.module else []))]
            elif node.module:
                names = [node.module]
            if names == ["depinduce"]:  # from depinduce import errors, api (a name like __version__ is the root's)
                names = [f"depinduce.{alias.name}" for alias in node.names
                         if (PACKAGE / alias.name).is_dir() or (PACKAGE / f"{alias.name}.py").is_file()]
        for name in names:
            parts = name.split(".")
            if parts[0] == "depinduce" and len(parts) > 1:
                found.append((node.lineno, parts[1]))
    return found


def violations(root: Path = PACKAGE) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        if path in UNCHECKED:
            continue
        own = layer_of(path)
        if own not in LEVELS:
            out.append(f"{path.relative_to(PACKAGE.parent)}: '{own}' has no level in tests/test_layering.py")
            continue
        for line, layer in imported_layers(path):
            if layer == own:
                continue
            if layer not in LEVELS or LEVELS[layer] >= LEVELS[own]:
                out.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {own} imports {layer}")
    return out


def test_no_import_runs_upward() -> None:
    found = violations()
    assert found == [], "imports against the layer order:\n" + "\n".join(found)


def test_the_check_sees_an_upward_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "depinduce"
    (fake / "metrics").mkdir(parents=True)
    (fake / "metrics" / "bad.py").write_text("def f():\n    from depinduce.models import registry\n")
    (fake / "io").mkdir()
    (fake / "io" / "ok.py").write_text("from ..structures import sentence\nfrom depinduce import errors\n")
    (fake / "io" / "up.py").write_text("from ..data import punct\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    assert violations(fake) == ["depinduce/io/up.py:1: io imports data",
                                "depinduce/metrics/bad.py:2: metrics imports models"]


def test_training_a_backend_does_not_import_nltk() -> None:
    """``import nltk`` loads the whole toolkit (and scipy where installed: 0.8 s, 80 MB resident); the engine
    and the neural backends need no trees, so a training process must not pay for it."""
    import subprocess

    code = ("import sys\nimport depinduce.training.engine, depinduce.training.objectives\n"
            "from depinduce.models.registry import backend_class\n"
            "for name in ('structformer', 'udgn', 'prpn', 'probformer'):\n    backend_class(name)\n"
            "print(sorted(m for m in ('nltk', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# The command line only parses options and calls the API (issue 47): a ``depinduce/cli`` module imports, of the
# package, only the API, the errors, the display helpers and the CLI's own modules; of the rest, click, rich and
# the standard library.
CLI_LAYERS = {"api", "errors", "display", "cli"}
CLI_THIRD_PARTY = {"click", "rich"}
_MODULE_STRING = re.compile(r"depinduce(?:\.\w+)+(?::\w+)?")  # "depinduce.cli.eval:eval_command"


def cli_import_problems(root: Path = PACKAGE) -> list[str]:
    """``FILE:LINE: module`` for every import of a CLI module that goes past the API — lazy imports inside
    functions, ``TYPE_CHECKING`` blocks and module names given to importlib as strings included, relative imports
    resolved; a name taken from the package root (``from depinduce import X``) must be the root's own or one it
    forwards to the API or the errors."""
    import depinduce.api
    import depinduce.errors

    errors = {name for name, value in vars(depinduce.errors).items()
              if isinstance(value, type) and issubclass(value, Exception)}
    root_names = {"__version__", *depinduce.api.__all__, *errors}
    found: list[tuple[str, int, str]] = []
    for path in sorted((root / "cli").rglob("*.py")):
        allowed = CLI_LAYERS
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            modules: list[str] = []
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = list(path.relative_to(root.parent).with_suffix("").parts[: -node.level])
                    base = ".".join(parts + ([base] if base else []))
                modules = [base]
                if base == "depinduce":
                    modules = [f"depinduce.{alias.name}" if (root / alias.name).is_dir()
                               or (root / f"{alias.name}.py").is_file() or alias.name not in root_names
                               else "depinduce" for alias in node.names]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and _MODULE_STRING.fullmatch(node.value):
                modules = [node.value.split(":")[0]]
            for module in modules:
                top, _, rest = module.partition(".")
                if top == "depinduce":
                    ok = not rest or rest.split(".")[0] in allowed
                else:
                    ok = top in CLI_THIRD_PARTY or top in sys.stdlib_module_names
                if not ok:
                    found.append((str(path.relative_to(root.parent)), node.lineno, module))
    return [f"{name}:{line}: {module}" for name, line, module in sorted(found)]


def test_the_cli_reaches_the_library_only_through_the_api() -> None:
    found = cli_import_problems()
    assert found == [], "CLI imports past depinduce.api (give the API a function for it):\n" + "\n".join(found)


def test_the_cli_check_sees_each_way_past_the_api(tmp_path: Path) -> None:
    cli = tmp_path / "depinduce" / "cli"
    cli.mkdir(parents=True)
    (tmp_path / "depinduce" / "io").mkdir()
    (cli / "ok.py").write_text("import sys\nimport click\nfrom depinduce import __version__, load\n"
                               "from depinduce.api.choices import DECODERS\nfrom . import common\n"
                               "TARGET = 'depinduce.cli.ok:command'\n")
    (cli / "bad.py").write_text("import numpy\nfrom depinduce import io, report_runs\n"
                                "def f():\n    from ..parsing import parse\n"
                                "TARGET = 'depinduce.training.engine:train'\n")
    assert cli_import_problems(tmp_path / "depinduce") == [
        "depinduce/cli/bad.py:1: numpy", "depinduce/cli/bad.py:2: depinduce.io",
        "depinduce/cli/bad.py:2: depinduce.report_runs", "depinduce/cli/bad.py:4: depinduce.parsing",
        "depinduce/cli/bad.py:5: depinduce.training.engine",
    ]
