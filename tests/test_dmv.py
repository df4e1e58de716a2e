"""The DMV backend: inside/outside/Viterbi against brute force, EM, the harmonic initialiser, train → parse → eval."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from brute_force import projective_trees
from depinduce.cli.main import cli
from depinduce.data.normalize import Normalization
from depinduce.data.vocab import Vocab
from depinduce.errors import RecipeError, UsageError
from depinduce.models.dmv import DMV
from depinduce.models.dmv.chart import inside
from depinduce.models.dmv.config import DMVConfig
from depinduce.structures.semirings import LOG, MAX
from depinduce.structures.sentence import Sentence

LEFT, RIGHT, STOP, CONT = 0, 1, 0, 1


def small_model(n_classes: int = 3, seed: int = 0) -> DMV:
    """A DMV in float64 with random (normalised) tables over classes 3.. (0-2 are the vocabulary's specials)."""
    torch.manual_seed(seed)
    vocab = Vocab([f"c{k}" for k in range(n_classes)], normalization=Normalization(False, False))
    model = DMV(DMVConfig(view="words"), vocab).double()
    model.set_counts({name: torch.rand_like(table) * 3 for name, table in model.tables().items()})
    return model


def tree_events(classes: list[int], heads: list[int]) -> list[tuple[str, tuple[int, ...]]]:
    """Every generative event of a tree (heads 1-based, 0 = ROOT), written from the DMV's definition: the root,
    then for each head and side its dependents from the nearest outwards, each after a continue decision, and
    one stop decision at the end."""
    n = len(classes)
    events: list[tuple[str, tuple[int, ...]]] = [("root", (classes[heads.index(0)],))]
    for h in range(n):
        for direction, side in ((RIGHT, range(h + 1, n)), (LEFT, range(h - 1, -1, -1))):
            valence = 0
            for d in side:
                if heads[d] == h + 1:
                    events.append(("stop", (classes[h], direction, valence, CONT)))
                    events.append(("attach", (classes[h], direction, classes[d])))
                    valence = 1
            events.append(("stop", (classes[h], direction, valence, STOP)))
    return events


def enumerate_trees(model: DMV, classes: list[int]) -> tuple[list[list[int]], torch.Tensor]:
    """Every projective tree of the sentence and its log-probability under the model."""
    tables = {name: table.detach() for name, table in model.tables().items()}
    trees = [list(map(int, t)) for t in projective_trees(len(classes))]
    scores = torch.stack([sum(tables[name][index] for name, index in tree_events(classes, t)) for t in trees])
    return trees, scores


SENTENCES = [[3], [4, 5], [3, 4, 3], [5, 3, 4, 4], [3, 5, 4, 3, 5], [4, 4, 3, 5, 5, 3]]


def test_inside_equals_the_sum_over_enumerated_trees() -> None:
    model = small_model()
    log_z = model.log_partition(SENTENCES)  # one padded batch of lengths 1..6
    for row, value in zip(SENTENCES, log_z):
        _, scores = enumerate_trees(model, row)
        assert float(value) == pytest.approx(float(torch.logsumexp(scores, 0)), abs=1e-10)


def test_gradient_of_log_z_is_the_expected_event_counts() -> None:
    model = small_model(seed=1)
    total, counts = model.expected_counts(SENTENCES)
    expected = {name: torch.zeros_like(table) for name, table in model.tables().items()}
    brute_total = 0.0
    for row in SENTENCES:
        trees, scores = enumerate_trees(model, row)
        posterior = torch.softmax(scores, 0)
        brute_total += float(torch.logsumexp(scores, 0))
        for tree, p in zip(trees, posterior):
            for name, index in tree_events(row, tree):
                expected[name][index] += p
    assert total == pytest.approx(brute_total, abs=1e-9)
    for name in expected:
        assert torch.allclose(counts[name], expected[name], atol=1e-9), name


def test_arc_marginals_and_viterbi_match_enumeration() -> None:
    model = small_model(seed=2)
    sentences = [Sentence(words=[f"c{k - 3}" for k in row]) for row in SENTENCES]
    parsed = model.parse_sentences(sentences)
    for row, scores in zip(SENTENCES, parsed):
        trees, tree_scores = enumerate_trees(model, row)
        posterior = torch.softmax(tree_scores, 0)
        n = len(row)
        marginals = torch.zeros(n + 1, n + 1, dtype=torch.float64)
        for tree, p in zip(trees, posterior):
            for d, h in enumerate(tree, start=1):
                marginals[d, h] += p
        assert torch.allclose(scores.heads[1:].exp(), marginals[1:].float(), atol=1e-6)  # float32 for decoders
        # a best tree (sentences with repeated classes have tied trees), and a projective one
        best = DMV.own_decoders["dmv-viterbi"].decode(scores)
        assert best in trees
        assert float(tree_scores[trees.index(best)]) == pytest.approx(float(tree_scores.max()), abs=1e-10)


def test_viterbi_is_the_best_enumerated_tree() -> None:
    """Distinct classes: no two trees tie, so the best tree is unique."""
    model = small_model(n_classes=6, seed=4)
    rows = [list(range(3, 3 + n)) for n in range(1, 7)]
    for row, scores in zip(rows, model.parse_sentences([Sentence(words=[f"c{k - 3}" for k in r]) for r in rows])):
        trees, tree_scores = enumerate_trees(model, row)
        assert scores.viterbi_heads == trees[int(tree_scores.argmax())]


def test_the_chart_runs_in_the_shared_semirings_named_or_given() -> None:
    """The max semiring's total is the best enumerated tree's log-probability; a name and the object agree."""
    model = small_model(seed=5)
    classes, lengths = model.batch_tensors(SENTENCES)
    with torch.no_grad():
        scores = model.sentence_scores(classes, lengths)
        for name, ring in (("log", LOG), ("max", MAX)):
            assert torch.equal(inside(scores, name), inside(scores, ring))
        best = inside(scores, MAX)
    for row, value in zip(SENTENCES, best):
        _, tree_scores = enumerate_trees(model, row)
        assert float(value) == pytest.approx(float(tree_scores.max()), abs=1e-10)


def test_the_dmv_is_a_distribution_over_sentences_and_trees_not_over_the_trees_of_one_sentence() -> None:
    """Summed over every class sequence of every length, the probability approaches 1 (here: stop is likely, so
    lengths up to 6 hold almost all of it); one sentence's trees sum to its probability, far below 1."""
    torch.manual_seed(3)
    vocab = Vocab(["a", "b"], normalization=Normalization(False, False))
    model = DMV(DMVConfig(view="words"), vocab).double()
    counts = {name: torch.rand_like(table) for name, table in model.tables().items()}
    counts["stop"][..., STOP] += 20.0  # P(stop) about 0.95: long sentences are rare
    counts["root"][:3] = 0.0  # only the two real classes are generated (the specials get the smoothing only)
    counts["attach"][..., :3] = 0.0
    model.set_counts(counts)
    rows = [list(seq) for n in range(1, 7) for seq in itertools.product([3, 4], repeat=n)]
    mass = float(model.log_partition(rows).exp().sum())
    assert 0.99 < mass < 1.0
    assert float(model.log_partition([[3, 4, 3]]).exp()) < 0.01


def test_harmonic_initialiser_counts() -> None:
    """One sentence a b c: root 1/3 each; the non-root 2/3 of each word shared by 1/distance; stop/continue
    from the expected number of dependents on each side."""
    vocab = Vocab(["a", "b", "c"], normalization=Normalization(False, False))
    model = DMV(DMVConfig(view="words"), vocab).double()
    counts = model.harmonic_counts([[3, 4, 5]])
    assert torch.allclose(counts["root"][3:], torch.full((3,), 1 / 3, dtype=torch.float64))
    # dependent a (position 0): heads b (distance 1) and c (distance 2) share 2/3 as 2:1
    assert float(counts["attach"][4, LEFT, 3]) == pytest.approx(4 / 9)
    assert float(counts["attach"][5, LEFT, 3]) == pytest.approx(2 / 9)
    # dependent b: heads a and c at distance 1 each
    assert float(counts["attach"][3, RIGHT, 4]) == pytest.approx(1 / 3)
    assert float(counts["attach"][5, LEFT, 4]) == pytest.approx(1 / 3)
    # a has nothing on its left: it stops there at valence 0, always
    assert float(counts["stop"][3, LEFT, 0, STOP]) == pytest.approx(1.0)
    assert float(counts["stop"][3, LEFT, 0, CONT]) == pytest.approx(0.0)
    # c on its left: expected dependents 2/9 (from a) + 1/3 (from b) = 5/9
    assert float(counts["stop"][5, LEFT, 0, CONT]) == pytest.approx(5 / 9)
    assert float(counts["stop"][5, LEFT, 1, STOP]) == pytest.approx(5 / 9)
    model.set_counts(counts)
    for table in model.tables().values():  # every conditional distribution is normalised
        assert torch.allclose(table.exp().sum(-1), torch.ones_like(table[..., 0]))


def test_em_increases_the_likelihood_every_iteration() -> None:
    vocab = Vocab(["d", "n", "v"], normalization=Normalization(False, False))
    model = DMV(DMVConfig(view="words"), vocab).double()
    corpus = [[3, 4, 5, 3, 4], [3, 4, 5], [4, 5, 4], [3, 4, 5, 4], [4, 5], [3, 4, 5, 3, 4, 5]]
    model.set_counts(model.harmonic_counts(corpus))
    previous = None
    for _ in range(8):
        total, counts = model.expected_counts(corpus)
        if previous is not None:
            assert total > previous - 1e-9
        previous = total
        model.set_counts(counts)
    assert float(model.log_partition(corpus).sum()) > previous


def test_config_and_views_are_checked() -> None:
    with pytest.raises(RecipeError, match="view"):
        DMVConfig(view="lemma")  # type: ignore[arg-type]
    with pytest.raises(RecipeError, match="smoothing"):
        DMVConfig(smoothing=0.0)
    vocab = Vocab(["NN"], normalization=Normalization(False, False))
    model = DMV(DMVConfig(view="xpos"), vocab)
    with pytest.raises(UsageError, match="has no XPOS: model 'dmv' with view xpos reads XPOS"):
        model.parse_sentences([Sentence(words=["dogs", "bark"], line=3)])


# ----------------------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def ptb(nltk_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dmv") / "ptb"
    result = CliRunner().invoke(cli, ["preprocess", "ptb", "--sample-only", "--out", str(out), "--quiet", "--workers", "1"])
    assert result.exit_code == 0, result.output
    return out


def train(data: Path, run: Path, *extra: str) -> None:
    result = CliRunner().invoke(cli, ["train", "--recipe", "dmv-ptb-cpu", "--data", str(data), "--out", str(run),
                                      "--threads", "1", "--quiet", *extra])
    assert result.exit_code == 0, result.output


def test_train_parse_eval_end_to_end(ptb: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    train(ptb, run, "--set", "epochs=3", "--set", "eval_every=3")
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3]
    losses = [r["train_loss"] for r in records]
    assert losses[0] > losses[1] > losses[2]  # EM's likelihood rises
    assert "dev_dda" in records[-1] and "dev_dda" not in records[0]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["runs"][-1]["outcome"]["reason"] == "completed" and "finished" in manifest["runs"][-1]
    runner = CliRunner()
    pred = tmp_path / "wsj10.conllu"
    parsed = runner.invoke(cli, ["parse", "--model", str(run), "--input-format", "conllu", "--quiet",
                                 str(ptb / "wsj10.conllu")])
    assert parsed.exit_code == 0, parsed.output
    pred.write_text(parsed.stdout)
    scored = runner.invoke(cli, ["eval", "--gold", str(ptb / "wsj10.conllu"), "--pred", str(pred), "--json"])
    assert scored.exit_code == 0, scored.output
    metrics = json.loads(scored.stdout)
    assert 10.0 < metrics["metrics"]["dda"] < 100.0
    # text input: no tags, a one-line error
    text = runner.invoke(cli, ["parse", "--model", str(run), "--quiet", str(ptb / "wsj10.txt")])
    assert text.exit_code == 2
    assert text.output.strip().count("\n") == 0 and "reads XPOS tags from CoNLL-U input" in text.output


def test_interrupted_and_resumed_run_ends_as_an_uninterrupted_one(ptb: Path, tmp_path: Path) -> None:
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    settings = ("--set", "epochs=4", "--set", "dev_parse=false")
    train(ptb, whole, *settings)
    train(ptb, parts, *settings, "--max-time", "0.0001")  # stops after its first EM iteration
    first = json.loads((parts / "manifest.json").read_text())["runs"][-1]["outcome"]
    assert first["reason"] == "max_time" and first["step"] == 1
    # a resumed run keeps the --max-time it recorded, per invocation: give it one that lets it finish
    result = CliRunner().invoke(cli, ["train", "--resume", "--data", str(ptb), "--out", str(parts),
                                      "--threads", "1", "--quiet", "--max-time", "60"])
    assert result.exit_code == 0, result.output
    assert (whole / "model.pt").read_bytes() != b""
    a, b = (torch.load(p / "model.pt", weights_only=True) for p in (whole, parts))
    assert all(torch.equal(a[k], b[k]) for k in a)
    steps = [json.loads(line)["step"] for line in (parts / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]


def test_words_view_reads_plain_text(ptb: Path, tmp_path: Path) -> None:
    run = tmp_path / "words"
    train(ptb, run, "--set", "epochs=2", "--set", "dev_parse=false", "--set", "model_config.view=words",
          "--set", "model_config.max_words=50")
    assert json.loads((run / "vocab.json").read_text())["size"] == 53  # 50 words + the specials
    result = CliRunner().invoke(cli, ["parse", "--model", str(run), "--quiet", "-"],
                                input="The dog barks , loudly .\n")
    assert result.exit_code == 0, result.output
    assert len([line for line in result.stdout.splitlines() if line and not line.startswith("#")]) == 6


def test_upos_view_trains_with_dev_evaluation(ptb: Path, tmp_path: Path) -> None:
    """dev.trees carries Penn tags only: the UPOS view scores dev dependencies and skips UF1."""
    run = tmp_path / "upos"
    train(ptb, run, "--set", "epochs=1", "--set", "model_config.view=upos")
    record = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert record["dev_dda"] is not None and "dev_uf1" not in record
    assert "NOUN" in json.loads((run / "vocab.json").read_text())["words"]


def test_training_data_without_the_viewed_tags_is_a_located_error(ptb: Path, tmp_path: Path) -> None:
    data = tmp_path / "notags"
    data.mkdir()
    for name in ("train.txt", "vocab.json", "dev.conllu"):
        (data / name).write_bytes((ptb / name).read_bytes())
    lines = []
    for line in (ptb / "train.conllu").read_text().splitlines():
        cols = line.split("\t")
        if len(cols) == 10:
            cols[4] = "_"  # XPOS
        lines.append("\t".join(cols))
    (data / "train.conllu").write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(cli, ["train", "--recipe", "dmv-ptb-cpu", "--data", str(data),
                                      "--out", str(tmp_path / "run"), "--threads", "1", "--quiet"])
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1
    assert "train.conllu:" in result.output and "no XPOS tags" in result.output
