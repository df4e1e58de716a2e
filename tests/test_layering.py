"""The package's folders show the data flow, and no import runs upward (README, "Development").

Every ``import depinduce.X`` / ``from depinduce.X import …`` in the package — at the top of a module or inside a
function, where lazy imports hide — is checked against the layer order below.  A layer imports only from layers
strictly below it (or from itself); two layers on the same level know nothing of each other (``metrics`` knows no
model, and ``models`` no metric).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "depinduce"

# top-level module or folder of depinduce -> level (higher levels may import lower ones)
LEVELS: dict[str, int] = {
    "errors": 0, "checksum": 0, "display": 0,
    "structures": 1, "locking": 1,
    "io": 2,
    "data": 3,
    "models": 4, "metrics": 4,
    "parsing": 5,
    "training": 6, "analysis": 6, "pictures": 6,
    "api": 7,
    "report": 8,
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
