"""`depinduce analyze channels`: per-channel DDA/UDA and the label × channel table, scored exactly as
`parse --channel K` + `eval` score them."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from depinduce.cli.main import cli
from depinduce.data.punct import sentence_punct_mask
from depinduce.structures.sentence import Sentence
from depinduce.errors import DepinduceError
from depinduce.io import read_sentences
from depinduce.analysis.channels import AVERAGE, analyze_channels
from depinduce.models.base import Capabilities, ParseScores
from depinduce.structures.dependency import reattach
from training_support import REPO, make_data

TINY = {"d": 8, "n_channels": 3, "n_iter": 2, "rank": 4, "distance_threshold": 1}

# Labelled gold over the synthetic data's words; the full stops and the comma are punctuation.
LABELLED = """# sent_id = 1
1\tthe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tdog\tdog\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tsaw\tsee\tVERB\tVBD\t_\t0\troot\t_\t_
4\ta\ta\tDET\tDT\t_\t5\tdet\t_\t_
5\tcat\tcat\tNOUN\tNN\t_\t3\tobj\t_\t_
6\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

# sent_id = 2
1\tevery\tevery\tDET\tDT\t_\t2\tdet\t_\t_
2\tchild\tchild\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tknew\tknow\tVERB\tVBD\t_\t0\troot\t_\t_
4\t,\t,\tPUNCT\t,\t_\t3\tpunct\t_\t_
5\tthe\tthe\tDET\tDT\t_\t7\tdet\t_\t_
6\told\told\tADJ\tJJ\t_\t7\tamod\t_\t_
7\tman\tman\tNOUN\tNN\t_\t3\tobj:x\t_\t_
8\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

"""


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny Probabilistic Transformer trained for one epoch, and its data folder."""
    folder = tmp_path_factory.mktemp("channels")
    data = make_data(folder / "data", n_train=60, n_dev=15)
    run = folder / "run"
    shrink = [f"model_config.{key}={value}" for key, value in TINY.items()]
    result = CliRunner().invoke(cli, [
        "train", "--recipe", str(REPO / "depinduce" / "recipes" / "probformer-ptb-cpu.yaml"), "--data", str(data),
        "--out", str(run), "--quiet", "--threads", "1", *itertools.chain.from_iterable(("--set", s) for s in shrink),
        "--set", "train.epochs=1", "--set", "train.batch_tokens=200", "--set", "train.eval_every=0",
    ])
    assert result.exit_code == 0, result.output
    return run, data


def _json(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("decoder", ["mst", "argmax"])
def test_every_channel_agrees_with_parse_channel_and_eval(tmp_path: Path, trained: tuple[Path, Path],
                                                          decoder: str) -> None:
    run, data = trained
    gold = str(data / "dev.conllu")
    runner = CliRunner()
    report = _json(runner.invoke(cli, ["analyze", "channels", "--model", str(run), "--gold", gold, "--decoder",
                                       decoder, "--json", "--quiet", "--batch-size", "4"]))
    rows = report["channels"]
    assert [row["channel"] for row in rows] == [1, 2, 3, AVERAGE]
    pred = tmp_path / "pred.conllu"
    for row in rows:
        channel = [] if row["channel"] == AVERAGE else ["--channel", str(row["channel"])]
        parsed = runner.invoke(cli, ["parse", "--model", str(run), "--input-format", "conllu", "--decoder", decoder,
                                     "--quiet", *channel, gold])
        assert parsed.exit_code == 0, parsed.output
        pred.write_text(parsed.stdout)
        scored = _json(runner.invoke(cli, ["eval", "--gold", gold, "--pred", str(pred), "--json"]))
        assert (row["dda"], row["uda"]) == (scored["metrics"]["dda"], scored["metrics"]["uda"]), row["channel"]
        assert row["root_accuracy"] == scored["metrics"]["root_accuracy"]
        assert row["tokens"] == scored["dependency"]["tokens"]
    assert report["best_channel"] == max(rows[:3], key=lambda r: (r["directed"], -r["channel"]))["channel"]
    # the synthetic gold is labelled root/dep only: every word counts under one of the two
    labels = {entry["label"]: entry for entry in report["labels"]}
    assert set(labels) == {"dep", "root"}
    for row in rows:
        assert sum(entry["correct"][str(row["channel"])] for entry in labels.values()) == row["directed"]


def test_label_table_counts_universal_labels_after_punctuation_removal(tmp_path: Path,
                                                                       trained: tuple[Path, Path]) -> None:
    run, _ = trained
    gold = tmp_path / "gold.conllu"
    gold.write_text(LABELLED)
    runner = CliRunner()
    report = _json(runner.invoke(cli, ["analyze", "channels", "--model", str(run), "--gold", str(gold), "--json",
                                       "--quiet"]))
    entries = report["labels"]
    # punctuation is not scored; obj:x counts as obj; ordered by frequency
    assert [(e["label"], e["words"]) for e in entries] == [("det", 4), ("nsubj", 2), ("root", 2), ("obj", 2),
                                                           ("amod", 1)]
    for row in report["channels"]:
        assert sum(e["correct"][str(row["channel"])] for e in entries) == row["directed"]
        assert row["tokens"] == 11
    for entry in entries:
        by_channel = [entry["correct"][str(k)] for k in (1, 2, 3)]
        best = 1 + by_channel.index(max(by_channel)) if max(by_channel) else None  # None: no channel gets any
        assert entry["best_channel"] == best
        assert entry["best_accuracy"] == pytest.approx(100.0 * max(by_channel) / entry["words"])
    table = runner.invoke(cli, ["analyze", "channels", "--model", str(run), "--gold", str(gold), "--labels", "2",
                                "--quiet"])
    assert table.exit_code == 0, table.output
    assert "nsubj" in table.stdout and "amod" not in table.stdout and "Best channel by DDA" in table.stdout


def test_models_without_channels_and_files_without_heads_are_one_line_errors(tmp_path: Path,
                                                                               trained: tuple[Path, Path]) -> None:
    run, data = trained
    runner = CliRunner()
    baseline = runner.invoke(cli, ["analyze", "channels", "--model", "right-branching", "--gold",
                                   str(data / "dev.conllu"), "--quiet"])
    assert baseline.exit_code == 2 and "has no head channels" in baseline.output
    assert len(baseline.output.strip().splitlines()) == 1
    headless = tmp_path / "headless.conllu"
    headless.write_text("\n".join("\t".join(cols[:6] + ["_", "_"] + cols[8:]) if len(cols := line.split("\t")) == 10
                                  else line for line in LABELLED.splitlines()) + "\n")
    missing = runner.invoke(cli, ["analyze", "channels", "--model", str(run), "--gold", str(headless), "--quiet"])
    assert missing.exit_code == 2 and len(missing.output.strip().splitlines()) == 1


class _KnownChannels:
    """A stand-in backend with two channels: channel 1 gives the gold tree, channel 2 the right-branching chain."""

    name = "known"
    capabilities = Capabilities(dependency=True, constituency=False, trainable=False, supervised=False)
    n_channels = 2

    def __init__(self, gold: list[Sentence]) -> None:
        self.heads = {}
        for sentence in gold:
            keep = [not hidden for hidden in sentence_punct_mask(sentence)]
            words = tuple(w for w, k in zip(sentence.words, keep) if k)
            self.heads[words] = reattach(sentence.heads, keep)

    @staticmethod
    def _matrix(heads: list[int]) -> torch.Tensor:
        n = len(heads)
        scores = torch.full((n + 1, n + 1), -10.0)
        for dependent, head in enumerate(heads, start=1):
            scores[dependent, head] = 0.0
        return scores

    def channel_parse_scores(self, sentences):
        out = []
        for words in sentences:
            gold = self._matrix(self.heads[tuple(words)])
            chain = self._matrix([i + 2 if i + 1 < len(words) else 0 for i in range(len(words))])
            out.append([ParseScores(heads=gold), ParseScores(heads=chain), ParseScores(heads=(gold + chain) / 2)])
        return out


def test_a_channel_that_reproduces_the_gold_tree_wins_every_label(tmp_path: Path) -> None:
    path = tmp_path / "gold.conllu"
    path.write_text(LABELLED)
    gold = read_sentences(path, fmt="conllu")
    report = analyze_channels(_KnownChannels(gold), gold, decoder="mst")
    assert report.views == [1, 2, AVERAGE]
    assert report.counts[0].dda == 100.0 and report.counts[0].uda == 100.0
    # right-branching over "the dog saw a cat" / "every child knew the old man": the→dog, dog→saw, a→cat,
    # every→child, child→knew and old→man are gold attachments
    assert report.counts[1].directed == 6 and report.counts[1].tokens == 11
    assert report.best_overall() == 1
    for row, label in enumerate(report.labels):
        assert report.best_channel(row) == (1, 100.0), label
    amod = report.labels.index("amod")
    assert report.correct[amod][1] == 1 and report.accuracy(amod, 1) == 100.0
    root = report.labels.index("root")  # the chain's roots are the last words: no channel-2 root is right
    assert report.correct[root][1] == 0
    report.correct[root][0] = 0
    assert report.best_channel(root) == (None, 0.0)
    with pytest.raises(DepinduceError, match="has no head channels"):
        analyze_channels(object(), gold)
