"""Install the lowest version each runtime dependency declares, in a fresh venv, and run a fast test subset.

pyproject.toml's lower bounds are promises to users who already have older packages; a bound nobody installs is a
guess. This script pins every ``name>=X`` of ``[project].dependencies`` to ``name==X`` (a constraints file, so the
test extra resolves around them), installs the project with its test extra into a venv without system
site-packages, prints the versions pip chose, and runs the tests marked ``lower_bounds`` that are not ``slow`` or
``cuda`` (:data:`FAST_SUBSET`). CI runs it (``.ci/run``).

    python scripts/check_lower_bounds.py            # exit code: pytest's
    python scripts/check_lower_bounds.py --keep DIR # keep the venv in DIR (reused if present)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The test files marked ``lower_bounds`` (``pytestmark``) each exercise a different dependency: click (the CLI and
# its errors), conllu and numpy (reading and scoring), torch (a backend's forward and training step), nltk (the PTB
# reader), rich and tqdm (tables and progress), pyyaml and pydantic (recipes and run settings, their type checks).
# The corpus tests among them run where ../shared is, and skip, saying why, where it is not.
FAST_SUBSET = ("-m", "lower_bounds and not slow and not cuda")


def lower_bounds(pyproject: Path = REPO / "pyproject.toml") -> dict[str, str]:
    """``{distribution: lowest version}`` for every runtime dependency; a dependency without ``>=`` is an error,
    since its floor could not be tested."""
    requirements = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]
    floors: dict[str, str] = {}
    for requirement in requirements:
        match = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*>=\s*([0-9][0-9A-Za-z.+]*)\s*(,.*)?", requirement)
        if match is None:
            raise SystemExit(f"{pyproject}: dependency {requirement!r} has no '>=' lower bound to test")
        floors[match.group(1)] = match.group(2)
    return floors


def _release(version: str) -> tuple[int, ...]:
    """``13`` and ``13.0.0`` name one release; a local label (``+cpu``) is not part of it."""
    parts = [int(p) for p in re.findall(r"\d+", version.split("+")[0])]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="build (or reuse) the venv here instead of a temporary folder")
    parser.add_argument("pytest_args", nargs="*", help="extra arguments for pytest (default: the fast subset)")
    args = parser.parse_args()

    floors = lower_bounds()
    with tempfile.TemporaryDirectory() as scratch:
        venv = args.keep if args.keep is not None else Path(scratch) / "venv"
        python = venv / "bin" / "python"
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        constraints = Path(scratch) / "lowest.txt"
        constraints.write_text("".join(f"{name}=={version}\n" for name, version in floors.items()), encoding="utf-8")
        subprocess.run([str(python), "-m", "pip", "install", "-qq", "-c", str(constraints),
                        "-e", f"{REPO}[test]"], check=True)
        installed = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], check=True,
                                   capture_output=True, text=True).stdout.splitlines()
        chosen = {line.split("==")[0].lower().replace("_", "-"): line for line in installed if "==" in line}
        print("lowest declared versions installed:")
        for name, version in floors.items():
            got = chosen.get(name.lower().replace("_", "-"), f"{name}==(not installed)")
            print(f"  {name}>={version}: {got}")
            if _release(got.split("==", 1)[1]) != _release(version):
                print(f"error: {name} is not at its declared lower bound {version}", file=sys.stderr)
                return 1
        tests = args.pytest_args or list(FAST_SUBSET)
        return subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
                              cwd=REPO).returncode


if __name__ == "__main__":
    sys.exit(main())
