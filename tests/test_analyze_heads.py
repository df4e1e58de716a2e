"""`depinduce analyze heads`: Pearson correlations of heads with gold labels (the UDGN paper's Table 3)."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from depinduce.structures.sentence import Sentence
from depinduce.data.vocab import Vocab
from depinduce.analysis.heads import correlate, edge_features, pearson_columns, visible_edges
from depinduce.models.udgn import UDGN, UDGNConfig

TINY = {"hidden_size": 16, "n_layers": 2, "n_heads": 3, "head_size": 4, "parser_layers": 1, "parser_hidden_size": 8}

# "The cat , which slept , sat ." with UD-style labels; the commas and full stop are punctuation.
CONLLU = """# sent_id = 1
# text = the cat, which slept, sat.
1\tthe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tcat\tcat\tNOUN\tNN\t_\t7\tnsubj\t_\t_
3\t,\t,\tPUNCT\t,\t_\t5\tpunct\t_\t_
4\twhich\twhich\tPRON\tWDT\t_\t5\tnsubj\t_\t_
5\tslept\tsleep\tVERB\tVBD\t_\t2\tacl:relcl\t_\t_
6\t,\t,\tPUNCT\t,\t_\t5\tpunct\t_\t_
7\tsat\tsit\tVERB\tVBD\t_\t0\troot\t_\t_
8\t.\t.\tPUNCT\t.\t_\t7\tpunct\t_\t_

# sent_id = 2
# text = dogs bark
1\tdogs\tdog\tNOUN\tNNS\t_\t2\tnsubj\t_\t_
2\tbark\tbark\tVERB\tVBP\t_\t0\troot\t_\t_

"""


def test_pearson_matches_numpy_and_is_nan_for_a_constant_head() -> None:
    rng = np.random.default_rng(0)
    features = rng.random((50, 3))
    features[:, 2] = 0.25  # a head that never changes: no correlation is defined
    indicator = (rng.random(50) < 0.3).astype(float)
    rho = pearson_columns(torch.tensor(features), torch.tensor(indicator))
    for c in range(2):
        assert rho[c].item() == pytest.approx(np.corrcoef(features[:, c], indicator)[0, 1], abs=1e-12)
    assert torch.isnan(rho[2])


def test_hand_computed_correlations_and_the_best_head() -> None:
    # head 1 fires exactly on "nsubj" edges, head 2 is its opposite, head 3 is x = (1, 2, 3, 4)
    features = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [0.0, 1.0, 4.0]])
    labels = ["nsubj", "obj", "nsubj", "obj"]
    result = correlate(features, labels, [(1, 1), (1, 2), (2, 1)], top=None, direction="child-to-parent")
    assert result.labels == ["nsubj", "obj"] and result.counts == [2, 2] and result.edges == 4
    # ρ(x, y) with x = 1..4 and y = (1, 0, 1, 0): cov = -0.25, σx = √1.25, σy = 0.5 → -0.4472
    expected = torch.tensor([[1.0, -1.0, -0.25 / (1.25**0.5 * 0.5)], [-1.0, 1.0, 0.25 / (1.25**0.5 * 0.5)]])
    assert torch.allclose(result.matrix, expected.double(), atol=1e-12)
    assert result.best(0) == ((1, 1), pytest.approx(1.0))
    assert result.best(1) == ((1, 2), pytest.approx(1.0))


def test_gold_edges_drop_punctuation_reattach_and_use_universal_labels(tmp_path: Path) -> None:
    from depinduce.io import read_sentences

    path = tmp_path / "gold.conllu"
    path.write_text(CONLLU)
    first, second = read_sentences(path, fmt="conllu")
    words, edges = visible_edges(first)
    assert words == ["the", "cat", "which", "slept", "sat"]
    # (child, parent) over the kept words, 0-based; the root edge (sat) is not a word-to-word edge
    assert [(e.child, e.parent, e.label) for e in edges] == [
        (0, 1, "det"), (1, 4, "nsubj"), (2, 3, "nsubj"), (3, 1, "acl")
    ]
    assert [(e.child, e.parent) for e in visible_edges(second)[1]] == [(0, 1)]


class _KnownHeads:
    """A stand-in model whose controller probability is a known function of (layer, head, receiver, sender)."""

    def __init__(self) -> None:
        self.vocab = Vocab(["the", "cat", "which", "slept", "sat", "dogs", "bark"])
        self.device = torch.device("cpu")

    def controller_probabilities(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        B, T = tokens.shape
        layer = torch.arange(2).view(1, 2, 1, 1, 1)
        head = torch.arange(3).view(1, 1, 3, 1, 1)
        i = torch.arange(T).view(1, 1, 1, T, 1)
        j = torch.arange(T).view(1, 1, 1, 1, T)
        value = 1000 * layer + 100 * head + 10 * i + j
        return value.expand(B, 2, 3, T, T).float()


def test_edge_features_take_the_child_to_parent_message_by_default() -> None:
    sentences = [Sentence(words=["dogs", "bark"], heads=[2, 0], deprels=["nsubj", "root"], upos=["NOUN", "VERB"])]
    features, labels, heads = edge_features(_KnownHeads(), sentences, direction="child-to-parent")
    assert labels == ["nsubj"] and heads == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3)]
    # edge dogs(0) → bark(1): receiver = parent 1, sender = child 0 → 10·1 + 0
    assert features.tolist() == [[10.0, 110.0, 210.0, 1010.0, 1110.0, 1210.0]]
    reverse, _, _ = edge_features(_KnownHeads(), sentences, direction="parent-to-child")
    assert reverse.tolist() == [[1.0, 101.0, 201.0, 1001.0, 1101.0, 1201.0]]


def _udgn_run(directory: Path) -> Path:
    torch.manual_seed(0)
    vocab = Vocab(["the", "cat", "which", "slept", "sat", "dogs", "bark"])
    model = UDGN(UDGNConfig(**TINY), vocab)
    directory.mkdir()
    vocab.save(directory / "vocab.json")
    (directory / "config.yaml").write_text(yaml.safe_dump({"model": "udgn", "model_config": TINY}))
    torch.save(model.state_dict(), directory / "model.pt")
    return directory


@pytest.fixture
def run_and_gold(tmp_path: Path) -> tuple[Path, Path]:
    gold = tmp_path / "gold.conllu"
    gold.write_text(CONLLU)
    return _udgn_run(tmp_path / "run"), gold


def _analyze(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "depinduce.cli.main", "analyze", "heads", "--quiet", *args],
                          capture_output=True, text=True)


def test_cli_writes_the_table_csv_and_refuses_to_overwrite(tmp_path: Path, run_and_gold: tuple[Path, Path]) -> None:
    run, gold = run_and_gold
    out = tmp_path / "heads.csv"
    done = _analyze("--model", str(run), "--gold", str(gold), "--csv", str(out))
    assert done.returncode == 0, done.stderr
    assert "5 edges" in done.stdout and "nsubj" in done.stdout
    rows = list(csv.reader(out.open()))
    assert rows[0] == ["label", "edges"] + [f"L{l}.H{k}" for l in (1, 2) for k in (1, 2, 3)]
    assert (rows[1][0], rows[1][1]) == ("nsubj", "3")  # cat, which, dogs
    assert sorted(r[0] for r in rows[1:]) == ["acl", "det", "nsubj"]
    again = _analyze("--model", str(run), "--gold", str(gold), "--csv", str(out))
    assert again.returncode == 2 and again.stderr.strip().endswith("already exists (use --force to overwrite it)")
    assert _analyze("--model", str(run), "--gold", str(gold), "--csv", str(out), "--force").returncode == 0


def test_cli_plot_is_drawn_or_explains_the_missing_extra(tmp_path: Path, run_and_gold: tuple[Path, Path]) -> None:
    run, gold = run_and_gold
    plot = tmp_path / "heads.png"
    done = _analyze("--model", str(run), "--gold", str(gold), "--plot", str(plot))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert done.returncode == 2 and "pip install 'depinduce[plot]'" in done.stderr
    else:
        assert done.returncode == 0, done.stderr
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_rejects_models_without_heads_and_unlabelled_gold(tmp_path: Path, run_and_gold: tuple[Path, Path]) -> None:
    run, gold = run_and_gold
    baseline = _analyze("--model", "right-branching", "--gold", str(gold))
    assert baseline.returncode == 2 and "has no competitive heads" in baseline.stderr
    assert len(baseline.stderr.strip().splitlines()) == 1
    unlabelled = tmp_path / "unlabelled.conllu"
    unlabelled.write_text("\n".join(
        "\t".join(cols[:7] + ["_"] + cols[8:]) if len(cols := line.split("\t")) == 10 else line
        for line in CONLLU.splitlines()) + "\n")
    done = _analyze("--model", str(run), "--gold", str(unlabelled))
    assert done.returncode == 2 and "no dependency labels" in done.stderr
