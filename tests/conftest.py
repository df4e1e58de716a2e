"""Shared test fixtures: where the read-only ../shared data lives, and skipping cleanly when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
NLTK_DATA = SHARED / "nltk_data"
EWT = SHARED / "data" / "ud" / "UD_English-EWT"


# The fixtures below that skip without ../shared.  A test that asks for one, directly or through another
# fixture, carries the ``corpus`` marker (:func:`pytest_collection_modifyitems`), so ``-m "not corpus"`` never
# keeps a test that needs the corpora because its author forgot the mark.  A test module whose own fixtures skip
# without ../shared names them in ``LOCAL_CORPUS_FIXTURES``.
CORPUS_FIXTURES = frozenset({"nltk_data", "ewt_dir", "ptb_sample", "german_dev"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        needs = CORPUS_FIXTURES | set(getattr(getattr(item, "module", None), "LOCAL_CORPUS_FIXTURES", ()))
        if needs & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.corpus)


def _require(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"needs {path} (the read-only ../shared data beside the checkout), which is absent")
    return path


@pytest.fixture(scope="session")
def nltk_data() -> Path:
    """The NLTK data folder from ../shared, also exported as NLTK_DATA for nltk and subprocesses."""
    path = _require(NLTK_DATA / "corpora" / "treebank.zip").parents[1]
    os.environ["NLTK_DATA"] = str(path)
    import nltk

    if str(path) not in nltk.data.path:
        nltk.data.path.insert(0, str(path))
    return path


@pytest.fixture(scope="session")
def ewt_dir() -> Path:
    """UD English EWT (train and dev) from ../shared."""
    return _require(EWT / "en_ewt-ud-dev.conllu").parent


@pytest.fixture(scope="session")
def ptb_sample(nltk_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """NLTK's PTB sample as ``depinduce preprocess ptb --sample-only`` writes it (``test.conllu``, ``test.trees``,
    …), once: the sample alone, which is all the tests that use it read (Brown's text would only slow them)."""
    from click.testing import CliRunner

    from depinduce.cli.main import cli

    out = tmp_path_factory.mktemp("ptb") / "sample"
    result = CliRunner().invoke(cli, ["preprocess", "ptb", "--sample-only", "--quiet", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="session")
def german_dev() -> Path:
    """UD German GSD dev (multiword tokens) from ../shared."""
    return _require(SHARED / "data" / "ud" / "UD_German-GSD" / "de_gsd-ud-dev.conllu")
