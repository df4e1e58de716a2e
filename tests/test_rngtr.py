"""RNGTr / SynTr network: graph-conditioned attention, relation ids, scorers and the refinement loop."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from depinduce.cli.main import cli
from depinduce.data.tags import TagVocab
from depinduce.data.vocab import Vocab
from depinduce.errors import DepinduceError, InputError
from depinduce.io.conllu_format import read_conllu
from depinduce.models.layers.kernels import device_route
from depinduce.models.neural import pad_batch
from depinduce.models.registry import load_model
from depinduce.models.rngtr import RNGTr
from depinduce.training.gradient import GradientLoop
from depinduce.training.optim import Schedule
from depinduce.training.engine import TrainOptions, train
from training_support import REPO, make_ud_data
from depinduce.models.rngtr.attention import GraphAttention, relation_ids
from depinduce.models.rngtr.config import RNGTrConfig
from depinduce.models.rngtr.model import RNGTrNetwork

SMALL = dict(hidden_size=16, n_layers=2, n_heads=2, ff_size=32, arc_mlp_size=12, label_mlp_size=6, dropout=0.0,
             mlp_dropout=0.0)


def test_relation_ids_follow_the_graph():
    # sentence 1: words 1..3, heads 2, 0, 2; labels 4, 0, 1; sentence 2: one word + padding
    heads = torch.tensor([[2, 0, 2], [0, 0, 0]])
    labels = torch.tensor([[4, 0, 1], [3, 0, 0]])
    mask = torch.tensor([[True, True, True], [True, False, False]])
    L = 5
    rel = relation_ids(heads, labels, mask, L)
    expected = torch.zeros((4, 4), dtype=torch.long)
    expected[1, 2], expected[2, 1] = 4 + 1, 4 + 1 + L  # word 1 <- head 2, label 4
    expected[2, 0], expected[0, 2] = 0 + 1, 0 + 1 + L  # word 2 <- ROOT, label 0
    expected[3, 2], expected[2, 3] = 1 + 1, 1 + 1 + L  # word 3 <- head 2, label 1
    assert rel[0].equal(expected)
    only = torch.zeros((4, 4), dtype=torch.long)
    only[1, 0], only[0, 1] = 3 + 1, 3 + 1 + L  # padding words get no arcs even though their head reads 0
    assert rel[1].equal(only)
    assert relation_ids(torch.full((1, 3), -1), torch.zeros((1, 3), dtype=torch.long), mask[:1], L).eq(0).all()


def _loop_attention(layer: GraphAttention, x, mask, relations):
    """The formula of the paper written out one (batch, head, i) at a time."""
    B, N, H = x.shape
    d = layer.head_size
    q, k, v = layer.qkv(x).split(H, dim=-1)
    out = torch.zeros(B, N, H)
    for b in range(B):
        for h in range(layer.n_heads):
            sl = slice(h * d, (h + 1) * d)
            for i in range(N):
                e = []
                for j in range(N):
                    rk = layer.rel_k.weight[relations[b, i, j]]
                    e.append(q[b, i, sl] @ (k[b, j, sl] + rk) / math.sqrt(d) if mask[b, j] else -math.inf)
                alpha = torch.softmax(torch.stack([torch.as_tensor(t) for t in e]), dim=0)
                out[b, i, sl] = sum(alpha[j] * (v[b, j, sl] + layer.rel_v.weight[relations[b, i, j]])
                                    for j in range(N) if mask[b, j])
    return layer.out(out)


def test_graph_attention_matches_the_explicit_formula():
    torch.manual_seed(0)
    layer = GraphAttention(8, 2, 7, dropout=0.0)
    torch.nn.init.normal_(layer.rel_k.weight)
    torch.nn.init.normal_(layer.rel_v.weight)
    with torch.no_grad():  # init.normal_ ignores padding_idx; row 0 ("no arc") is zero in a real layer
        layer.rel_k.weight[0] = 0
        layer.rel_v.weight[0] = 0
    x = torch.randn(2, 5, 8)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    relations = torch.randint(0, 7, (2, 5, 5))
    assert torch.allclose(layer(x, mask, relations), _loop_attention(layer, x, mask, relations), atol=1e-5)
    # relation 0 ("no arc") adds nothing: an all-zero graph is the plain transformer (SynTr)
    zeros = torch.zeros_like(relations)
    assert torch.allclose(layer(x, mask, zeros), layer(x, mask, None), atol=1e-6)
    assert not torch.allclose(layer(x, mask, relations), layer(x, mask, None), atol=1e-3)


def _net(**overrides) -> RNGTrNetwork:
    torch.manual_seed(1)
    net = RNGTrNetwork(RNGTrConfig(**{**SMALL, **overrides}), n_words=20, n_upos=6, n_labels=4)
    for name, p in net.named_parameters():  # the biaffine weights start at zero; make every score informative
        if p.dim() >= 2 and "rel_" not in name:
            torch.nn.init.normal_(p, std=0.3)
    return net.eval()


def test_padding_does_not_change_scores():
    net = _net(iterations=2)
    tokens = torch.tensor([[3, 4, 5, 0, 0], [6, 7, 8, 9, 10]])
    upos = torch.tensor([[2, 3, 4, 0, 0], [2, 3, 4, 5, 2]])
    mask = tokens != 0
    heads = torch.tensor([[2, 0, 2, 0, 0], [0, 1, 1, 3, 4]])
    alone = net.arc_label_logits(tokens[:1, :3], mask[:1, :3], heads[:1, :3], upos=upos[:1, :3])
    batched = net.arc_label_logits(tokens, mask, heads, upos=upos)
    arc_alone, label_alone, _ = alone[0]
    arc_b, label_b, _ = batched[0]
    assert torch.allclose(arc_alone[0], arc_b[0, :3, :4], atol=1e-5)
    assert torch.allclose(label_alone[0], label_b[0, :3], atol=1e-5)
    assert (arc_b[0, :, 4:] < -1e30).all()  # padding heads are never chosen
    assert (arc_b[1].diagonal(offset=1) < -1e30).all()  # nor a word as its own head
    final_alone = net.final_scores(tokens[:1, :3], upos[:1, :3], mask[:1, :3])
    final = net.final_scores(tokens, upos, mask)
    assert torch.allclose(final.arcs[0, :3, :4], final_alone.arcs[0], atol=1e-5)
    assert torch.allclose(final.labels[0, :3, :4], final_alone.labels[0], atol=1e-5)
    # log-probabilities: each word's heads and each (word, head) pair's labels sum to one
    assert torch.allclose(final.arcs[1].exp().sum(-1), torch.ones(5), atol=1e-5)
    assert torch.allclose(final.labels[1].exp().sum(-1), torch.ones(5, 6), atol=1e-5)


def test_gradients_reach_relation_tables_and_scorers():
    net = _net(iterations=1).train()
    tokens = torch.tensor([[3, 4, 5, 6]])
    upos = torch.tensor([[2, 3, 4, 5]])
    mask = torch.ones_like(tokens, dtype=torch.bool)
    heads = torch.tensor([[2, 0, 2, 3]])
    labels = torch.tensor([[1, 0, 2, 3]])
    out = net.arc_label_logits(tokens, mask, heads, upos=upos, init_heads=heads, init_labels=labels)
    loss = sum(torch.nn.functional.cross_entropy(a[0], heads[0]) + torch.nn.functional.cross_entropy(l[0], labels[0])
               for a, l, _ in out)
    loss.backward()
    for name in ("encoder.layers.0.attention.rel_k.weight", "encoder.layers.0.attention.rel_v.weight",
                 "arc.weight", "label.bilinear", "encoder.words.weight", "encoder.upos.weight"):
        grad = dict(net.named_parameters())[name].grad
        assert grad is not None and grad.abs().sum() > 0, name
    assert dict(net.named_parameters())["encoder.layers.0.attention.rel_k.weight"].grad[0].eq(0).all()


def test_refinement_stops_when_the_graph_is_unchanged():
    net = RNGTrNetwork(RNGTrConfig(**SMALL, iterations=5), n_words=20, n_upos=6, n_labels=4).eval()
    # zero scorers: every pass predicts ROOT heads with label 0, so the second pass repeats the first's graph
    torch.nn.init.zeros_(net.label.linear.weight)
    torch.nn.init.zeros_(net.label.linear.bias)
    tokens = torch.tensor([[3, 4, 5]])
    upos = torch.tensor([[2, 3, 4]])
    mask = torch.ones_like(tokens, dtype=torch.bool)
    heads = torch.tensor([[2, 0, 2]])
    assert len(net.arc_label_logits(tokens, mask, heads, upos=upos)) == 2
    assert net.final_scores(tokens, upos, mask).passes == 2
    # starting from that very graph, the first pass already reproduces it
    init = (torch.zeros_like(tokens), torch.zeros_like(tokens))
    assert net.final_scores(tokens, upos, mask, init).passes == 1
    # iterations 0 is SynTr alone: one pass, whatever it predicts; a parse-time override caps the passes
    assert _net(iterations=0).final_scores(tokens, upos, mask).passes == 1
    assert _net(iterations=3).final_scores(tokens, upos, mask, iterations=0).passes == 1


def test_config_is_checked():
    with pytest.raises(DepinduceError, match="rngtr: hidden_size .* multiple of n_heads"):
        RNGTrConfig(hidden_size=10, n_heads=4)
    with pytest.raises(DepinduceError, match="iterations must be a non-negative integer"):
        RNGTrConfig(iterations=-1)
    net = _net()
    with pytest.raises(DepinduceError, match="exceeds max_positions"):
        net.final_scores(torch.ones((1, 600), dtype=torch.long), torch.ones((1, 600), dtype=torch.long),
                         torch.ones((1, 600), dtype=torch.bool))



def test_graph_cycles_drop_leaves_both_arcs_of_a_two_cycle_out_of_the_graph_read() -> None:
    """``graph_cycles: drop`` (the authors' ``build_graph_labeled``: a pair read in both directions is dropped):
    words 2 and 3 head each other, so neither arc is in the graph the next pass reads; the rest of the graph is
    kept, and the default (``keep``) reads the graph as it is.  scripts/check_authors.py runs the loop with it
    beside their trainer."""
    heads = torch.tensor([[2, 3, 2, 0, 4]])  # 1 → 2, 2 ⇄ 3, 4 → ROOT, 5 → 4
    labels = torch.tensor([[1, 2, 3, 0, 1]])
    kept = _net()._read((heads, labels))
    dropped = _net(graph_cycles="drop")._read((heads, labels))
    assert torch.equal(kept[0], heads) and torch.equal(dropped[1], labels)
    assert dropped[0].tolist() == [[2, -1, -1, 0, 4]]
    with pytest.raises(DepinduceError, match="graph_cycles must be one of keep, drop"):
        RNGTrConfig(graph_cycles="break")

# ------------------------------------------------------------------------------------ training and parsing

RECIPE = REPO / "depinduce" / "recipes" / "rngtr-ud-cpu.yaml"
TINY_RUN = ["model_config.hidden_size=32", "model_config.n_layers=2", "model_config.n_heads=4",
            "model_config.ff_size=64", "model_config.arc_mlp_size=32", "model_config.label_mlp_size=16",
            "model_config.dropout=0.0", "model_config.mlp_dropout=0.0", "model_config.iterations=2",
            "train.epochs=6", "train.batch_tokens=300", "train.lr=1e-2", "train.warmup_steps=10"]


def _sets(*extra: str) -> list[str]:
    return [a for s in (*TINY_RUN, *extra) for a in ("--set", s)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny RNGTr trained with the CPU recipe's settings on a synthetic UD folder: (data folder, run)."""
    root = tmp_path_factory.mktemp("rngtr")
    data = make_ud_data(root / "data", n_train=240, n_dev=30)
    run = root / "run"
    torch.set_num_threads(1)
    result = CliRunner().invoke(cli, ["train", "--recipe", str(RECIPE),
                                      "--data", str(data), "--out", str(run), "--quiet", "--threads", "1",
                                      *_sets()])
    assert result.exit_code == 0, result.output
    return data, run


def _eval(gold: Path, pred: Path, *flags: str) -> dict:
    result = CliRunner().invoke(cli, ["eval", "--gold", str(gold), "--pred", str(pred), "--json", *flags])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["metrics"]


def test_train_parse_eval_end_to_end(trained: tuple[Path, Path], tmp_path: Path) -> None:
    data, run = trained
    assert (run / "tags.json").is_file()
    assert "." in Vocab.load(run / "vocab.json").stoi  # the run's vocabulary covers punctuation (every token)
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 6 and all(r["dev_las"] is not None and r["dev_loss"] > 0 for r in records)
    assert "dev_ppl" not in records[0]
    best = max(records, key=lambda r: r["dev_las"])
    assert best["dev_las"] > 90  # the synthetic grammar is learnable: heads and labels follow from the tags

    parsed = CliRunner().invoke(cli, ["parse", "--model", str(run), "--input-format", "conllu", "--quiet",
                                      str(data / "dev.conllu")])
    assert parsed.exit_code == 0, parsed.output
    pred = tmp_path / "dev.pred.conllu"
    pred.write_text(parsed.stdout)
    metrics = _eval(data / "dev.conllu", pred)
    labels = {s.deprels[i] for s in read_conllu(str(pred)) for i in range(len(s))}
    assert {"det", "nsubj", "obj", "punct"} <= labels  # labels come from the model, not root/dep
    assert _eval(data / "dev.conllu", pred, "--keep-punct")["las"] > 90


def test_refinement_reads_the_initial_graph(trained: tuple[Path, Path], tmp_path: Path) -> None:
    data, run = trained
    model = load_model(str(run))
    sentences = read_conllu(str(data / "dev.conllu"))[:4]
    gold = [(list(s.heads), list(s.deprels)) for s in sentences]
    # the backend's scores are the network's last pass for the same tensors and initial graph (one pass here:
    # with refinement, a trained model reaches the same graph from any start)
    model.set_iterations(0)
    scores = model.parse_sentences(sentences, gold)
    tokens, mask = pad_batch([model.vocab.encode(s.words) for s in sentences], model.vocab.pad_index)
    upos, _ = pad_batch([model.tags.encode_upos(s.upos) for s in sentences], 0)
    heads, _ = pad_batch([h for h, _ in gold], -1)
    labels, _ = pad_batch([model.tags.encode_labels(lab) for _, lab in gold], 0)
    final = model.network.final_scores(tokens, upos, mask, (heads.masked_fill(~mask, -1), labels), iterations=0)
    for b, s in enumerate(scores):
        n = len(sentences[b])
        assert torch.allclose(s.heads[1:], final.arcs[b, :n, : n + 1], atol=1e-5)
    empty = model.parse_sentences(sentences)
    assert not all(torch.allclose(a.heads[1:], b.heads[1:], atol=1e-4) for a, b in zip(scores, empty))

    # --init FILE through the CLI: the file's graph is refined; --iterations 0 reads it once
    runner = CliRunner()
    rb = tmp_path / "rb.conllu"
    rb.write_text(runner.invoke(cli, ["parse", "--model", "right-branching", "--input-format", "conllu",
                                      "--quiet", str(data / "dev.conllu")]).stdout)
    outputs = {}
    for init in ("empty", "synTr", str(rb)):
        result = runner.invoke(cli, ["parse", "--model", str(run), "--input-format", "conllu", "--quiet",
                                     "--init", init, "--iterations", "0", str(data / "dev.conllu")])
        assert result.exit_code == 0, result.output
        outputs[init] = result.stdout
    assert outputs["empty"] == outputs["synTr"]  # one network: both start from no graph
    assert outputs[str(rb)] != outputs["empty"]


def test_parse_errors_are_one_line(trained: tuple[Path, Path], tmp_path: Path) -> None:
    data, run = trained
    runner = CliRunner()
    text = runner.invoke(cli, ["parse", "--model", str(run), "--quiet", str(data / "dev.txt")])
    assert text.exit_code == 2 and "give CoNLL-U input" in text.output
    no_upos = tmp_path / "no_upos.conllu"
    no_upos.write_text("# sent_id = x\n1\tHi\thi\t_\t_\t_\t0\troot\t_\t_\n\n")
    result = runner.invoke(cli, ["parse", "--model", str(run), "--input-format", "conllu", "--quiet",
                                 str(no_upos)])
    assert result.exit_code == 2 and f"{no_upos}:1: token 1 ('Hi')" in result.output and "UPOS" in result.output
    other = tmp_path / "other.conllu"
    other.write_text((data / "dev.conllu").read_text().replace("\t.\t", "\t!\t", 1))
    result = runner.invoke(cli, ["parse", "--model", str(run), "--input-format", "conllu", "--quiet",
                                 "--init", str(other), str(data / "dev.conllu")])
    assert result.exit_code == 2 and str(other) in result.output and "differs from the input" in result.output
    result = runner.invoke(cli, ["parse", "--model", "right-branching", "--quiet", "--init", str(other), "-"],
                           input="A b.\n")
    assert result.exit_code == 2 and "does not refine" in result.output
    result = runner.invoke(cli, ["parse", "--model", "right-branching", "--quiet", "--iterations", "2", "-"],
                           input="A b.\n")
    assert result.exit_code == 2 and "does not refine" in result.output
    assert all(len(r.output.strip().splitlines()) == 1 for r in (text, result))


def test_init_train_is_read_recorded_and_resumes_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = make_ud_data(tmp_path / "data", n_train=60, n_dev=8)
    runner = CliRunner()
    rb = {}
    for split in ("train", "dev"):
        rb[split] = tmp_path / f"rb.{split}.conllu"
        rb[split].write_text(runner.invoke(cli, ["parse", "--model", "right-branching", "--input-format",
                                                 "conllu", "--quiet", str(data / f"{split}.conllu")]).stdout)
    sets = [*TINY_RUN, "train.epochs=2", "train.batch_tokens=120"]
    seen: list[list[int]] = []
    original_hook = RNGTr.arc_label_passes

    def spy(self, tokens, mask, heads, **kw):
        if self.training:
            assert kw["init_heads"] is not None
            seen.extend(row[m].tolist() for row, m in zip(kw["init_heads"], mask))
        return original_hook(self, tokens, mask, heads, **kw)

    monkeypatch.setattr(RNGTr, "arc_label_passes", spy)
    reference = tmp_path / "reference"
    overrides = (*sets, f"train.init_train={rb['train']}", f"train.init_dev={rb['dev']}")
    result = train(TrainOptions(data_dir=data, run_dir=reference, model="rngtr", recipe=RECIPE,
                                overrides=overrides, threads=1, seed=2, quiet=True), log=lambda _: None)
    assert result.reason == "completed"
    # every training batch carried the right-branching graphs of its sentences, each sentence once per epoch
    expected = sorted(s.heads for s in read_conllu(str(rb["train"])))
    assert sorted(seen) == sorted(expected * 2)
    config = (reference / "config.yaml").read_text()
    assert str(rb["train"]) in config and str(rb["dev"]) in config

    run = tmp_path / "run"
    original = GradientLoop._stop_reason
    monkeypatch.setattr(GradientLoop, "_stop_reason",
                        lambda self: "signal" if self.progress.step == 3 else original(self))
    stopped = train(TrainOptions(data_dir=data, run_dir=run, model="rngtr", recipe=RECIPE, overrides=overrides,
                                 threads=1, seed=2, quiet=True), log=lambda _: None)
    assert stopped.reason == "signal" and stopped.step == 3
    monkeypatch.setattr(GradientLoop, "_stop_reason", original)
    resumed = train(TrainOptions(data_dir=data, run_dir=run, resume=True, threads=1, quiet=True), log=lambda _: None)
    assert resumed.step == result.step
    a = torch.load(reference / "last.pt", map_location="cpu", weights_only=True)["model"]
    b = torch.load(run / "last.pt", map_location="cpu", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)

    wrong = tmp_path / "wrong.conllu"
    wrong.write_text(rb["dev"].read_text())
    with pytest.raises(InputError, match="sentences"):
        train(TrainOptions(data_dir=data, run_dir=tmp_path / "bad", model="rngtr", recipe=RECIPE, quiet=True,
                           overrides=(*sets, f"train.init_train={wrong}")), log=lambda _: None)


def _head_of(path: Path, n: int, out: Path) -> None:
    """The first ``n`` sentences of a CoNLL-U file."""
    blocks = path.read_text(encoding="utf-8").split("\n\n")[:n]
    out.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")


def test_ewt_slice_output_passes_the_ud_validator_and_scorer(ewt_dir: Path, tmp_path: Path) -> None:
    """Real UD data: a slice of EWT trained for one epoch; the labelled output is valid UD (udvalidate level 2)
    and the official CoNLL 2018 scorer's LAS equals `depinduce eval --keep-punct`."""
    if shutil.which("udvalidate") is None or shutil.which("udeval") is None:
        pytest.skip("udtools (udvalidate, udeval) is not installed")
    treebank = tmp_path / "tb"
    treebank.mkdir()
    _head_of(ewt_dir / "en_ewt-ud-train.conllu", 200, treebank / "en_ewt-ud-train.conllu")
    _head_of(ewt_dir / "en_ewt-ud-dev.conllu", 30, treebank / "en_ewt-ud-dev.conllu")
    runner = CliRunner()
    data, run = tmp_path / "data", tmp_path / "run"
    assert runner.invoke(cli, ["preprocess", "ud", "--treebank", str(treebank), "--out", str(data),
                               "--quiet"]).exit_code == 0
    trained = runner.invoke(cli, ["train", "--recipe", str(RECIPE), "--data", str(data), "--out", str(run),
                                  "--quiet", "--threads", "1", *_sets("train.epochs=1")])
    assert trained.exit_code == 0, trained.output
    parsed = runner.invoke(cli, ["parse", "--model", str(run), "--input-format", "conllu", "--full-ud", "--quiet",
                                 str(data / "dev.conllu")])
    assert parsed.exit_code == 0, parsed.output
    pred = tmp_path / "dev.pred.conllu"
    pred.write_text(parsed.stdout, encoding="utf-8")
    check = subprocess.run(["udvalidate", "--lang", "ud", "--level", "2", str(pred)], capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    official = subprocess.run(["udeval", str(data / "dev.conllu"), str(pred)], capture_output=True, text=True)
    assert official.returncode == 0, official.stderr
    las = float(re.search(r"LAS F1 Score: ([0-9.]+)", official.stdout).group(1))
    ours = _eval(data / "dev.conllu", pred, "--keep-punct")["las"]
    assert ours == pytest.approx(las, abs=0.006) and ours > 0  # udeval prints two decimals


def test_warm_start_loads_another_runs_weights(trained: tuple[Path, Path], tmp_path: Path) -> None:
    data, source = trained
    runner = CliRunner()
    run = tmp_path / "warm"
    # a learning rate too small to move the weights: the first evaluation scores the source model itself
    result = runner.invoke(cli, ["train", "--recipe", str(RECIPE), "--data", str(data), "--out", str(run),
                                 "--quiet", "--threads", "1", "--warm-start", str(source),
                                 *_sets("train.epochs=1", "train.lr=1e-12")])
    assert result.exit_code == 0, result.output
    best = max(json.loads(line)["dev_las"] for line in (source / "metrics.jsonl").read_text().splitlines())
    first = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    assert first["dev_las"] == pytest.approx(best, abs=1e-9)
    assert str(source.resolve()) in (run / "config.yaml").read_text()

    other = make_ud_data(tmp_path / "other", n_train=50, n_dev=5, seed=7)  # another corpus: another vocabulary
    result = runner.invoke(cli, ["train", "--recipe", str(RECIPE), "--data", str(other), "--out",
                                 str(tmp_path / "bad"), "--quiet", "--threads", "1", "--warm-start", str(source),
                                 *_sets("train.epochs=1")])
    assert result.exit_code == 2 and "vocab.json: differs from this run's" in result.output


# ------------------------------------------------------------------------ optional BERT-initialised encoder

PIECES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "an", "dog", "cat", "saw", "near", "with",
          ".", "##s", "big", "small", "man", "wo", "##man", "child", "red", "old", "car", "house", "tree", "river",
          "city", "book", "in", "under", "liked", "chased", "found", "heard", "took", "made", "knew", "bird"]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised 2-layer BERT saved as a local HuggingFace folder (built here, never downloaded)."""
    transformers = pytest.importorskip("transformers", reason="the BERT encoder path needs 'transformers'")
    folder = tmp_path_factory.mktemp("tiny-bert")
    (folder / "vocab.txt").write_text("\n".join(PIECES) + "\n")
    tokenizer = transformers.BertTokenizer(str(folder / "vocab.txt"), do_lower_case=True)
    config = transformers.BertConfig(vocab_size=len(PIECES), hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    transformers.BertModel(config).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def test_bert_encoder_reproduces_bert_and_decodes_first_pieces(tiny_bert: Path) -> None:
    import transformers

    tags = TagVocab(["DET", "NOUN", "VERB"], ["det", "nsubj", "root"])
    model = RNGTr(RNGTrConfig(encoder_path=str(tiny_bert), dropout=0.0), Vocab.build([["the"]], min_freq=1), tags)
    model.eval()
    assert model.config.hidden_size == 32 and model.config.n_layers == 2  # the shape comes from the BERT
    words = [["The", "woman", "chased", "birds", "."], ["A", "dog"]]
    pieces = model.word_inputs(words)
    assert pieces["piece_first"].tolist() == [[1, 2, 4, 5, 7], [1, 2, 0, 0, 0]]  # wo ##man, bird ##s
    assert pieces["piece_word"][0].tolist() == [-1, 0, 1, 1, 2, 3, 3, 4, -1]
    torch.nn.init.zeros_(model.network.encoder.upos.weight)  # no UPOS, no graph: exactly BERT
    tokens = torch.zeros((2, 5), dtype=torch.long)
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    with torch.no_grad():
        ours = model.network.encoder(tokens, torch.ones_like(tokens), mask, None, pieces)
        bert = transformers.AutoModel.from_pretrained(str(tiny_bert), local_files_only=True).eval()
        states = bert(input_ids=pieces["piece_ids"], attention_mask=pieces["piece_mask"].long()).last_hidden_state
    where = torch.cat([torch.zeros((2, 1), dtype=torch.long), pieces["piece_first"]], dim=1)
    expected = states.gather(1, where[..., None].expand(-1, -1, 32))
    assert torch.allclose(ours[0], expected[0], atol=1e-5) and torch.allclose(ours[1, :3], expected[1, :3], atol=1e-5)
    # a graph connects the words' first pieces: the relation changes the states
    graph = relation_ids(torch.tensor([[2, 3, 0, 3, 3]]), torch.tensor([[1, 2, 3, 1, 1]]), mask[:1], 4)
    with torch.no_grad():
        model.network.encoder.layers[0].attention.rel_k.weight.normal_()
        conditioned = model.network.encoder(tokens[:1], torch.ones_like(tokens[:1]), mask[:1], graph,
                                            {k: v[:1] for k, v in pieces.items()})
    assert not torch.allclose(conditioned, ours[:1], atol=1e-3)


def test_bert_encoder_trains_and_parses(tiny_bert: Path, tmp_path: Path) -> None:
    data = make_ud_data(tmp_path / "data", n_train=60, n_dev=8)
    run = tmp_path / "run"
    runner = CliRunner()
    trained = runner.invoke(cli, ["train", "--recipe", str(RECIPE), "--data", str(data), "--out", str(run),
                                  "--quiet", "--threads", "1", "--encoder-path", str(tiny_bert),
                                  *_sets("train.epochs=1", "train.batch_tokens=200")])
    assert trained.exit_code == 0, trained.output
    assert f"encoder_path: {tiny_bert.resolve()}" in (run / "config.yaml").read_text()
    parsed = runner.invoke(cli, ["parse", "--model", str(run), "--input-format", "conllu", "--quiet",
                                 str(data / "dev.conllu")])
    assert parsed.exit_code == 0, parsed.output
    assert parsed.stdout.count("\n\n") == 8  # one blank line after each sentence (no comments: MaltEval-safe)


def test_encoder_path_without_transformers_is_a_one_line_error(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    real = importlib.import_module
    monkeypatch.setattr(importlib, "import_module",
                        lambda name, *a: (_ for _ in ()).throw(ImportError(name)) if name == "transformers"
                        else real(name, *a))
    folder = tmp_path / "bert"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    with pytest.raises(DepinduceError, match="needs the 'transformers' package"):
        RNGTr(RNGTrConfig(encoder_path=str(folder)), Vocab.build([["a"]], min_freq=1), TagVocab(["X"], ["dep"]))
    with pytest.raises(DepinduceError, match="not a local HuggingFace model folder"):
        RNGTr(RNGTrConfig(encoder_path=str(tmp_path)), Vocab.build([["a"]], min_freq=1), TagVocab(["X"], ["dep"]))


# ------------------------------------------------------------------- the authors' refinement loop (issue 23)


def _scripted(net: RNGTrNetwork, graphs: list[dict[int, list[int]]], monkeypatch: pytest.MonkeyPatch) -> list:
    """Make the network's argmax graph after pass k be ``graphs[k][row]`` for each batch row still refining
    (labels 0), and record every encoder call's batch (tokens, mask, relations) — the sentences each pass saw."""
    calls = {"pass": 0}
    seen: list = []
    encode = net.encoder.forward

    def scripted_argmax(hidden, arc):
        step = calls["pass"]
        calls["pass"] += 1
        rows = seen[-1]["rows"]
        heads = torch.tensor([graphs[step][r] for r in rows])
        return heads, torch.zeros_like(heads)

    def spy(tokens, upos, mask, relations, pieces=None):
        rows = [int(t[0]) - 3 for t in tokens]  # each test sentence starts with token 3 + its row
        seen.append({"rows": rows, "relations": relations, "mask": mask})
        return encode(tokens, upos, mask, relations, pieces)

    def restart() -> None:  # a new refinement begins
        calls["pass"] = 0
        seen.clear()

    monkeypatch.setattr(net, "_argmax_graph", scripted_argmax)
    monkeypatch.setattr(net.encoder, "forward", spy)
    return seen, restart


def test_a_converged_sentence_leaves_the_later_passes_loss_and_attention(monkeypatch: pytest.MonkeyPatch) -> None:
    from depinduce.training.objectives import HeadsAndLabels

    net = _net(iterations=3)
    tokens = torch.tensor([[3, 5, 6], [4, 7, 8]])  # row r starts with token 3 + r
    upos = torch.tensor([[2, 3, 4], [2, 3, 4]])
    mask = torch.ones_like(tokens, dtype=torch.bool)
    heads = torch.tensor([[2, 0, 2], [0, 1, 1]])
    labels = torch.zeros_like(heads)
    # sentence 0 repeats its graph at pass 1 (converged); sentence 1 keeps changing until the last pass
    graphs = [{0: [2, 0, 2], 1: [0, 1, 1]}, {0: [2, 0, 2], 1: [0, 1, 2]}, {1: [0, 3, 1]}, {1: [0, 1, 1]}]
    seen, restart = _scripted(net, graphs, monkeypatch)
    passes = net.arc_label_logits(tokens, mask, heads, upos=upos)
    assert [p.rows.tolist() for p in passes] == [[0, 1], [0, 1], [1], [1]]
    assert [s["rows"] for s in seen] == [[0, 1], [0, 1], [1], [1]]  # passes 2 and 3 never see sentence 0
    # pass 2 is sentence 1 alone, reading its pass-1 graph: its scores are those of that sentence by itself
    alone = net.encode(tokens[1:], upos[1:], mask[1:], (torch.tensor([[0, 1, 2]]), torch.zeros((1, 3), dtype=torch.long)))
    assert torch.allclose(passes[2].arc, net.arc(alone, mask[1:]), atol=1e-6)
    # the loss: sentence 0's three tokens at passes 0 and 1 only, sentence 1's at all four
    restart()
    monkeypatch.setattr(net, "regularizer", lambda: None, raising=False)  # the backend's hook; the network has none
    out = HeadsAndLabels().compute(net, tokens=tokens, mask=mask, heads=heads, labels=labels, upos=upos)
    assert int(out.count) == 3 * 2 + 3 * 4
    restart()
    # stopping is per sentence at inference too: the last pass decodes sentence 1 only
    final = net.final_scores(tokens, upos, mask)
    assert final.passes == 4 and [s["rows"] for s in seen][-1] == [1]


def test_first_graph_mst_feeds_the_authors_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    from depinduce.models.rngtr.decoders import probability_tree

    torch.manual_seed(3)
    net = _net(iterations=1, first_graph="mst")
    tokens = torch.tensor([[3, 5, 6, 7, 8, 9]])
    upos = torch.tensor([[2, 3, 4, 5, 2, 3]])
    mask = torch.ones_like(tokens, dtype=torch.bool)
    graphs: list = []
    encode = net.encode
    monkeypatch.setattr(net, "encode", lambda *a, **k: graphs.append(a[3]) or encode(*a, **k))
    passes = net.arc_label_logits(tokens, mask, torch.zeros_like(tokens), upos=upos)
    assert len(passes) == 2 and graphs[0] is None
    log_probs = torch.full((7, 7), float("-inf"), dtype=torch.float64)
    log_probs[1:] = torch.log_softmax(passes[0].arc[0].double(), dim=-1)
    tree = probability_tree(log_probs)
    assert graphs[1][0][0].tolist() == tree
    assert tree.count(0) == 1  # a tree with one root, where the argmax graph of this pass is not:
    argmax = passes[0].arc[0].argmax(-1).tolist()
    assert argmax != tree
    # the default reads the argmax graph, as the paper describes
    graphs.clear()
    net.config.first_graph = "argmax"
    net.arc_label_logits(tokens, mask, torch.zeros_like(tokens), upos=upos)
    assert graphs[1][0][0].tolist() == argmax


def test_decode_pass_previous_decodes_the_pass_before_convergence(monkeypatch: pytest.MonkeyPatch) -> None:
    net = _net(iterations=3, decode_pass="previous")
    tokens = torch.tensor([[3, 5, 6], [4, 7, 8]])
    upos = torch.tensor([[2, 3, 4], [2, 3, 4]])
    mask = torch.ones_like(tokens, dtype=torch.bool)
    graphs = [{0: [2, 0, 2], 1: [0, 1, 1]}, {0: [2, 0, 2], 1: [0, 1, 2]}, {1: [0, 3, 1]}, {1: [0, 1, 1]}]
    _, restart = _scripted(net, graphs, monkeypatch)
    arcs: list[torch.Tensor] = []
    scorer = net.arc.forward
    monkeypatch.setattr(net.arc, "forward", lambda h, m: arcs.append(scorer(h, m)) or arcs[-1])
    final = net.final_scores(tokens, upos, mask)
    # sentence 0 converged at pass 1: decoded from pass 0; sentence 1 ran out of passes: decoded from pass 3
    assert torch.allclose(final.arcs[0], torch.log_softmax(arcs[0][0], -1))
    assert not torch.allclose(final.arcs[0], torch.log_softmax(arcs[1][0], -1))
    assert torch.allclose(final.arcs[1], torch.log_softmax(arcs[3][0], -1))
    arcs.clear()
    net.config.decode_pass = "last"
    restart()
    final = net.final_scores(tokens, upos, mask)
    assert torch.allclose(final.arcs[0], torch.log_softmax(arcs[1][0], -1))


def test_updates_per_pass_steps_the_optimiser_after_every_pass(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    data = make_ud_data(tmp_path / "data", n_train=40, n_dev=6)
    passes: list[int] = []
    updates: list[int] = []
    original = RNGTr.arc_label_passes

    def counting(self, *args, **kwargs):
        for k, p in enumerate(original(self, *args, **kwargs)):
            if self.training:
                if k == 0:
                    passes.append(0)
                passes[-1] += 1
                steps_before = len(updates)
            yield p
            if self.training:  # the optimiser has stepped on this pass's loss before the next pass runs
                assert len(updates) == steps_before + 1

    monkeypatch.setattr(RNGTr, "arc_label_passes", counting)
    after_step = Schedule.after_step
    monkeypatch.setattr(Schedule, "after_step", lambda self: updates.append(1) or after_step(self))
    result = train(TrainOptions(data_dir=data, run_dir=tmp_path / "run", model="rngtr", recipe=RECIPE,
                                overrides=(*TINY_RUN, "train.epochs=1", "model_config.updates=per_pass"),
                                threads=1, seed=0, quiet=True), log=lambda _: None)
    assert result.reason == "completed"
    assert len(updates) == sum(passes) > len(passes) == result.step
    # the default: one update per batch on all its passes
    updates.clear()
    passes.clear()
    monkeypatch.setattr(RNGTr, "arc_label_passes", original)
    result = train(TrainOptions(data_dir=data, run_dir=tmp_path / "run2", model="rngtr", recipe=RECIPE,
                                overrides=(*TINY_RUN, "train.epochs=1"), threads=1, seed=0, quiet=True),
                   log=lambda _: None)
    assert len(updates) == result.step


def test_authors_final_decoder_sums_probabilities() -> None:
    from depinduce.models.base import ParseScores
    from depinduce.structures.mst import chu_liu_edmonds

    # rows sum to one (ROOT, word 1, word 2, word 3); the sum of the arcs' probabilities (the authors') prefers
    # 0.16 + 0.68 + 0.59 = 1.43 over 0.36 + 0.68 + 0.36 = 1.40, the product (depinduce's log-probabilities)
    # prefers 0.36 * 0.68 * 0.36 = 0.088 over 0.16 * 0.68 * 0.59 = 0.064
    P = torch.tensor([[0, 0, 0, 0], [0.36, 0, 0.48, 0.16], [0.07, 0.68, 0, 0.25], [0.59, 0.05, 0.36, 0]],
                     dtype=torch.float64)
    logs = P.log()
    assert RNGTr.own_decoders["rngtr-mst"].decode(ParseScores(heads=logs)) == [3, 1, 0]
    assert chu_liu_edmonds(logs) == [0, 1, 2]
    # rows that still hold mass on the diagonal are renormalised without it, as the authors' masked softmax
    with_self = logs.clone()
    with_self[1:, 1:] += torch.eye(3, dtype=torch.float64) * 0  # no-op on the -inf diagonal
    with_self[2, 2] = math.log(0.5)
    assert RNGTr.own_decoders["rngtr-mst"].decode(ParseScores(heads=with_self)) == [3, 1, 0]


# ---------------------------------------------------------- the route a GPU takes: one host read a pass

LABELS = TagVocab([f"U{i}" for i in range(6)], [f"L{i}" for i in range(5)])
WORDS = Vocab([f"w{i}" for i in range(40)])


def test_the_device_routes_relation_ids_are_the_cpu_routes() -> None:
    """Dense one-hot ids (no ``nonzero``): the same integers, 2-cycles, negative heads and padding included."""
    generator = torch.Generator().manual_seed(0)
    lengths = torch.tensor([7, 3, 5, 1])
    mask = torch.arange(7)[None] < lengths[:, None]
    heads = torch.randint(-1, 8, (4, 7), generator=generator)
    heads[0, :2] = torch.tensor([2, 1])  # words 1 and 2 head each other
    labels = torch.randint(0, 5, (4, 7), generator=generator)
    want = relation_ids(heads, labels, mask, 5)
    with device_route():
        got = relation_ids(heads, labels, mask, 5)
    assert got.equal(want) and want[0, 1, 2] == labels[0, 0] + 1  # "j is i's head" wins in the 2-cycle


def test_the_device_routes_graph_attention_is_the_formula() -> None:
    """The dense relation terms equal the paper's formula and the sparse form; "no arc" gets no gradient."""
    torch.manual_seed(0)
    layer = GraphAttention(8, 2, 7, dropout=0.0).double()
    with torch.no_grad():
        layer.rel_k.weight[1:].normal_()
        layer.rel_v.weight[1:].normal_()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    relations = torch.randint(0, 7, (2, 5, 5))
    cpu = layer(x, mask, relations)
    cpu_grads = torch.autograd.grad(cpu.square().sum(), list(layer.parameters()))
    with device_route():
        dense = layer(x, mask, relations)
        grads = torch.autograd.grad(dense.square().sum(), list(layer.parameters()))
    torch.testing.assert_close(dense, cpu, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dense.float(), _loop_attention(layer.float(), x.float(), mask, relations),
                               rtol=1e-5, atol=1e-5)
    for got, want in zip(grads, cpu_grads):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert grads[-2][0].eq(0).all() and grads[-1][0].eq(0).all()  # rel_k, rel_v row 0


def test_the_device_routes_piece_relations_are_the_cpu_routes() -> None:
    """Word relations moved onto first pieces by scatters: padding words (whose first piece reads 0) never
    overwrite [CLS]'s relations."""
    from depinduce.models.rngtr.encoder import dense_piece_relations

    heads = torch.tensor([[2, 0, 2, 3], [0, 1, 0, 0]])
    mask = torch.tensor([[True] * 4, [True, True, False, False]])
    relations = relation_ids(heads, torch.tensor([[1, 0, 2, 3], [4, 1, 0, 0]]), mask, 5)
    first = torch.tensor([[1, 3, 4, 6], [1, 2, 0, 0]])  # word w's first piece
    where = torch.cat([torch.zeros((2, 1), dtype=torch.long), first], dim=1)
    want = torch.zeros((2, 8, 8), dtype=torch.long)
    for b, i, j in relations.nonzero().tolist():
        want[b, where[b, i], where[b, j]] = relations[b, i, j]
    assert dense_piece_relations(relations, where, mask, 8).equal(want)


def _refiner(**overrides) -> RNGTr:
    """A float64 RNGTr whose relation tables are small: its graphs settle, each sentence at its own pass."""
    torch.manual_seed(0)
    model = RNGTr(RNGTrConfig(**{**SMALL, "iterations": 3, **overrides}), WORDS, LABELS).double()
    with torch.no_grad():
        for name, p in model.network.named_parameters():
            if "rel_" in name:
                p.mul_(0.05)
            elif p.dim() >= 2:
                torch.nn.init.normal_(p, std=0.3)
    return model.train()


def _gold_batch(model: RNGTr, init: bool) -> dict[str, torch.Tensor]:
    """Six sentences of 2 to 9 words; with ``init``, rows 0 and 2 start from the graph the model's no-graph pass
    predicts (so they stop at pass 0), the others from another sentence's gold tree."""
    generator = torch.Generator().manual_seed(1)
    lengths = torch.tensor([9, 4, 7, 9, 2, 6])
    mask = torch.arange(9)[None] < lengths[:, None]
    drawn = (torch.rand((6, 9), generator=generator) * lengths[:, None]).long()
    heads = (drawn + (drawn >= torch.arange(1, 10)).long()).masked_fill(~mask, 0)  # never the word itself
    batch = {"tokens": torch.randint(4, len(WORDS), (6, 9), generator=generator).masked_fill(~mask, 0),
             "mask": mask, "heads": heads,
             "labels": torch.randint(0, 5, (6, 9), generator=generator).masked_fill(~mask, 0),
             "upos": torch.randint(2, 8, (6, 9), generator=generator).masked_fill(~mask, 0)}
    if init:
        with torch.no_grad():
            hidden = model.network.encode(batch["tokens"], batch["upos"], mask, None)
            predicted = model.network._argmax_graph(hidden, model.network.arc(hidden, mask))
        settled = torch.tensor([True, False, True, False, False, False])[:, None]
        batch["init_heads"] = torch.where(settled, predicted[0], batch["heads"].flip(0)).masked_fill(~mask, -1)
        batch["init_labels"] = torch.where(settled, predicted[1], batch["labels"])
    return batch


def _train_step(model: RNGTr, batch: dict[str, torch.Tensor]) -> list[tuple[torch.Tensor, ...]]:
    """The objective's updates on ``batch`` (an SGD step after each, so a later pass of ``updates: per_pass``
    reads updated weights): per update its loss, count, and every parameter's gradient (None: not used)."""
    from depinduce.training.objectives import HeadsAndLabels

    out = []
    for update in HeadsAndLabels().updates(model, **batch):
        model.zero_grad(set_to_none=True)
        update.loss.backward()
        out.append((update.loss.detach(), update.count, *(p.grad for p in model.parameters())))
        with torch.no_grad():
            for p in model.parameters():
                if p.grad is not None:
                    p -= 0.1 * p.grad
    return out


@pytest.mark.parametrize(("overrides", "init"), [({}, False), ({}, True), ({"updates": "per_pass"}, False),
                                                 ({"first_graph": "mst", "updates": "per_pass"}, True)])
def test_the_device_route_trains_as_the_cpu_route_while_sentences_converge_apart(overrides: dict,
                                                                                   init: bool) -> None:
    """Off the CPU's route every pass runs on the whole batch and stopped sentences are masked out of the loss,
    not dropped: the same losses, counts and gradients as the CPU's dropping schedule."""
    model = _refiner(**overrides)
    batch = _gold_batch(model, init)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    network_inputs = {k: v for k, v in batch.items() if k not in ("mask", "labels", "tokens", "heads")}
    cpu_rows = [p.rows.tolist() for p in model.network.arc_label_logits(batch["tokens"], batch["mask"],
                                                                          batch["heads"], **network_inputs)]
    passes_run = [sum(r in rows for rows in cpu_rows) for r in range(6)]
    assert len(set(passes_run)) > 1 and min(passes_run) < len(cpu_rows)  # the sentences stop at different passes
    with device_route():
        device_rows = [p.rows for p in model.network.arc_label_logits(batch["tokens"], batch["mask"],
                                                                      batch["heads"], **network_inputs)]
    assert [rows.nonzero().flatten().tolist() for rows in device_rows] == cpu_rows
    want = _train_step(model, batch)
    model.load_state_dict(state)
    with device_route():
        got = _train_step(model, batch)
    assert len(got) == len(want) == (len(cpu_rows) if "updates" in overrides else 1)
    for got_update, want_update in zip(got, want):
        assert got_update[1].equal(want_update[1])
        for a, b in zip(got_update[:1] + got_update[2:], want_update[:1] + want_update[2:]):
            assert (a is None) == (b is None)
            if b is not None:
                torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10 * float(b.abs().max()))


@pytest.mark.parametrize(("overrides", "init"), [({}, False), ({"first_graph": "mst", "updates": "per_pass"}, True)])
def test_a_device_route_training_step_reads_the_host_at_most_once_a_pass(overrides: dict, init: bool) -> None:
    """Reads (``_local_scalar_dense``, ``nonzero``: as ``scripts/count_ops.py`` counts them) of a training step's
    forward passes, losses and backward: only each pass's "does another pass run?"."""
    from torch.profiler import ProfilerActivity, profile

    from depinduce.training.objectives import HeadsAndLabels

    model = _refiner(**overrides)
    batch = _gold_batch(model, init)
    with device_route():
        passes = len(model.network.arc_label_logits(batch["tokens"], batch["mask"], batch["heads"],
                                                    **{k: v for k, v in batch.items()
                                                       if k not in ("mask", "labels", "tokens", "heads")}))
        with profile(activities=[ProfilerActivity.CPU]) as profiler:
            for update in HeadsAndLabels().updates(model, **batch):
                model.zero_grad(set_to_none=True)
                update.loss.backward()
    found = [e.name for e in profiler.events() if e.name in ("aten::_local_scalar_dense", "aten::nonzero")]
    assert passes > 1 and len(found) <= passes, found
