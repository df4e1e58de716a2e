"""What ``depinduce train`` chooses when the user names only a model: data folder, run directory, recipe.

These defaults make the documented four-line workflow (``preprocess ptb`` → ``train --model NAME`` → ``parse``)
run as written.  Every choice is printed on stderr by the engine, so a default is never a surprise.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from depinduce.errors import NotFoundError
from depinduce.models.bundled import RUNS_DIR  # where parse looks for the newest run

DEFAULT_DATA_DIR = Path("data") / "ptb"


def bundled_recipes_dir() -> Path:
    """The recipes shipped inside the package (``depinduce/recipes/*.yaml``), present after ``pip install``."""
    return Path(str(resources.files("depinduce") / "recipes"))


def bundled_recipe_names() -> list[str]:
    return sorted(p.stem for p in bundled_recipes_dir().glob("*.yaml"))


def recipe_path(arg: str | Path) -> Path:
    """``--recipe`` takes a file path or the name of a bundled recipe (``structformer-ptb-cpu``)."""
    path = Path(arg)
    if path.is_file() or path.suffix in (".yaml", ".yml") or len(path.parts) > 1:
        return path  # a path: a missing file is reported by the recipe reader, with its name
    bundled = bundled_recipes_dir() / f"{path.name}.yaml"
    if bundled.is_file():
        return bundled
    raise NotFoundError(f"{arg}: no such recipe file, and no bundled recipe of that name; bundled: "
                        f"{', '.join(bundled_recipe_names())}")


def default_recipe(recipes: dict[str, str], device: str, model: str) -> Path | None:
    """The backend's own recipe for the device kind (``cpu`` or ``cuda``): its CPU recipe on CPU, its paper
    recipe on CUDA.  None when the backend names none (its dataclass defaults apply)."""
    kind = "cuda" if device.startswith("cuda") else "cpu"
    name = recipes.get(kind)
    if name is None:
        return None
    path = bundled_recipes_dir() / f"{name}.yaml"
    if not path.is_file():
        raise NotFoundError(f"model '{model}' names the default recipe '{name}', which is not installed")
    return path


def default_data_dir(data_dir: Path | None) -> Path:
    """``--data`` or ``data/ptb``; a missing default folder says how to make it."""
    if data_dir is not None:
        return data_dir
    if not DEFAULT_DATA_DIR.is_dir():
        raise NotFoundError(f"{DEFAULT_DATA_DIR}: no data folder here; run `depinduce preprocess ptb` first "
                            "(or pass --data DIR)")
    return DEFAULT_DATA_DIR


def fresh_run_dir(model: str, root: Path = RUNS_DIR) -> Path:
    """``runs/NAME``, else ``runs/NAME-2``, ``runs/NAME-3`` …: the first that does not exist (never overwrites)."""
    candidate = root / model
    k = 2
    while candidate.exists():
        candidate = root / f"{model}-{k}"
        k += 1
    return candidate
