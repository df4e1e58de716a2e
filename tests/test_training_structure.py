"""The training engine's shape (issue 47): no import circle and no private name taken across modules in
``depinduce/training`` and ``depinduce/api``; the budgets checked by one function; the data regimes behind one
interface."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from depinduce.cli.main import cli
from depinduce.data.vocab import Vocab
from depinduce.errors import UsageError
from depinduce.training.budgets import Budgets, checked_budgets
from depinduce.training.config import TrainConfig
from depinduce.training.distributed import DistContext
from depinduce.training.objectives import objective_for
from depinduce.training.sentence_data import SentenceData
from depinduce.training.stream_data import StreamData
from training_support import make_data

PACKAGE = Path(__file__).resolve().parents[1] / "depinduce"
CHECKED = ("training", "api")


def _module(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every depinduce import in ``path``, lazy ones included."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("depinduce"):
            out.append((node.lineno, node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name, []) for alias in node.names if alias.name.startswith("depinduce"))
    return out


def _graph() -> dict[str, set[str]]:
    paths = [p for folder in CHECKED for p in (PACKAGE / folder).rglob("*.py")]
    modules = {_module(p) for p in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        targets = set()
        for _, module, names in _imports(path):
            targets |= {t for t in (module, *(f"{module}.{n}" for n in names)) if t in modules}
        graph[_module(path)] = targets - {_module(path)}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every module from which an import path leads back to itself, as [module, …, module]."""
    found = []
    for start in sorted(graph):
        stack, seen = [(start, [start])], set()
        while stack:
            node, trail = stack.pop()
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    found.append([*trail, start])
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
    return found


def test_no_import_circle_in_training_or_api() -> None:
    assert _circles(_graph()) == []


def test_the_circle_check_sees_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})[0] == ["a", "b", "c", "a"]


def test_no_private_name_is_imported_across_modules() -> None:
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}: {module} {name}"
             for folder in CHECKED for path in sorted((PACKAGE / folder).rglob("*.py"))
             for line, module, names in _imports(path) for name in names
             if name.startswith("_") and not name.startswith("__")]
    assert found == []


def test_the_budgets_are_checked_by_one_function_with_the_options_names() -> None:
    assert checked_budgets(None, None) == Budgets()
    assert checked_budgets(1.5, "2.5M") == Budgets(1.5, 2_500_000)
    with pytest.raises(UsageError, match="--max-time must be a positive number of minutes"):
        checked_budgets(0, None)
    with pytest.raises(UsageError, match="--max-tokens '0k'"):
        checked_budgets(None, "0k")


def test_a_bad_budget_on_the_command_line_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["train", "--model", "tiny-mlm", "--data", str(tmp_path), "--max-time", "0"])
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and "--max-time must be a positive number of minutes" in lines[0]


def test_sentence_and_stream_regimes_cover_the_training_text(tmp_path: Path) -> None:
    """Each regime's epoch order reads every training token once, and its inputs count them."""
    data = make_data(tmp_path / "data", n_train=40, n_dev=5, gold_dev=False)
    vocab = Vocab.load(data / "vocab.json")
    context, generator = DistContext(), torch.Generator().manual_seed(0)
    sentences = SentenceData(data, vocab, objective_for("mlm", mask_rate=0.3, vocab_size=len(vocab)),
                             TrainConfig.from_values({"batch_tokens": 60}, "test"), context, lambda _: None)
    order = sentences.epoch_order(0)
    assert sorted(i for batch in order for i in batch) == list(range(len(sentences.train_rows)))
    assert len(order) == sentences.n_batches and sentences.dev_rows is not None
    assert sum(sentences.inputs(batch, generator)[1] for batch in order) == sum(map(len, sentences.train_rows))

    stream_objective = objective_for("lm", mask_rate=0.3, vocab_size=len(vocab), lm_mode="continuous", bptt=5)
    stream_config = TrainConfig.from_values({"batch_tokens": 20, "bptt": 5, "lm_mode": "continuous"}, "test")
    stream = StreamData(data, vocab, stream_objective, stream_config, context)
    chunks = stream.epoch_order(0)
    assert [c[0] for c in chunks] == list(range(stream.n_batches))
    read = sum(stream.inputs(chunk, generator)[1] for chunk in chunks)
    assert 0 < read <= sum(len(r) + 1 for r in stream.train_rows)
    assert stream.carried_state() is not None and sentences.carried_state() is None
