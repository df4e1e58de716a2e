"""``scripts/bench_authors.py`` builds one network size on both sides: the sizes the authors' constructors derive
from the width (StructFormer's feed-forward 4 × hidden, UDGN's parser LSTM as wide as its embedding) follow a
``--set hidden_size=…``; an override that unties them is refused.  (A GPU check's CPU dry run once compared a
0.81 M-parameter authors' UDGN with a 4.74 M one.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import bench_authors  # noqa: E402


@pytest.mark.parametrize("model, key, expected", [("structformer", "ff_size", 128),
                                                  ("udgn", "parser_hidden_size", 32)])
def test_tied_sizes_follow_the_width(model: str, key: str, expected: int) -> None:
    small = bench_authors.shared_config(model, "small", {})
    assert small["hidden_size"] == 256 and small[key] == {"ff_size": 1024, "parser_hidden_size": 256}[key]
    narrow = bench_authors.shared_config(model, "small", {"hidden_size": 32, "n_layers": 1})
    assert narrow[key] == expected and narrow["n_layers"] == 1


def test_untying_a_size_is_refused() -> None:
    with pytest.raises(SystemExit, match="parser_hidden_size.*as wide as hidden_size"):
        bench_authors.shared_config("udgn", "small", {"parser_hidden_size": 64})
    assert bench_authors.shared_config("udgn", "small", {"hidden_size": 64, "parser_hidden_size": 64})[
        "parser_hidden_size"] == 64
