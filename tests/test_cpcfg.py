"""Compound PCFG: the inside algorithm, span marginals, Viterbi and MBR trees against brute-force enumeration of
every binary tree (n ≤ 6), numerical safety, the loss, and train → parse → eval on the PTB sample."""

from __future__ import annotations

import functools
import itertools
import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from brute_force import bracketings, tree_spans
from depinduce.cli.main import cli
from depinduce.data.vocab import Vocab
from depinduce.errors import DepinduceError
from depinduce.models.cpcfg import CPCFG
from depinduce.models.cpcfg.chart import Grammar, best_span_tree, inside, span_gradients, split_distances
from depinduce.models.cpcfg.config import CPCFGConfig
from depinduce.models.neural import pad_batch
from depinduce.structures.spans import binary_tree_from_distances, labelled_spans
from depinduce.training.config import load_recipe, resolve_config
from depinduce.training.objectives import Likelihood, objective_for
from training_support import REPO, one_thread  # noqa: F401

NT, T = 3, 4
NEG_INF = float("-inf")

# ----------------------------------------------------------------------------------------- brute force


def tree_score(tree: tuple, root: torch.Tensor, rules: torch.Tensor, terms: torch.Tensor, reduce) -> torch.Tensor:
    """The tree's score summed (or maximised) over every labelling, from the grammar's definition: leaves are
    preterminals, inner nodes nonterminals, the top node's symbol comes from the root distribution."""
    def symbols(node: tuple) -> torch.Tensor:  # score per symbol (NT + T), −inf where impossible
        out = torch.full((NT + T,), NEG_INF, dtype=torch.float64)
        if node[0] == "leaf":
            out[NT:] = terms[node[1]]
            return out
        left, right = symbols(node[3]), symbols(node[4])
        out[:NT] = reduce((rules + left[None, :, None] + right[None, None, :]).reshape(NT, -1))
        return out

    return reduce((root + symbols(tree)[:NT]).unsqueeze(0))[0]


def labelled_derivations(n: int, root: torch.Tensor, rules: torch.Tensor, terms: torch.Tensor) -> torch.Tensor:
    """Log-probability of every labelled derivation of an n-word sentence, each written out symbol by symbol."""
    scores = []
    for tree in bracketings(0, n):
        inner = sorted(tree_spans(tree))
        children = {}

        def collect(node: tuple) -> tuple[int, int]:
            if node[0] == "leaf":
                return node[1], node[1] + 1
            children[(node[1], node[2])] = (collect(node[3]), collect(node[4]))
            return node[1], node[2]

        collect(tree)
        for labels in itertools.product(range(NT), repeat=len(inner)):
            label = dict(zip(inner, labels))
            for tags in itertools.product(range(T), repeat=n):
                def symbol(span: tuple[int, int]) -> int:
                    return label[span] if span in label else NT + tags[span[0]]

                total = root[label[(0, n)]] + sum(terms[i, tags[i]] for i in range(n))
                for span, (left, right) in children.items():
                    total = total + rules[label[span], symbol(left), symbol(right)]
                scores.append(total)
    return torch.stack(scores)


def random_grammar(lengths: list[int], groups: int, seed: int, scale: float = 2.0) -> Grammar:
    torch.manual_seed(seed)
    batch, n = len(lengths), max(lengths)
    root = torch.log_softmax(torch.randn(groups, NT, dtype=torch.float64) * scale, -1)
    rules = torch.log_softmax(torch.randn(groups, NT, (NT + T) ** 2, dtype=torch.float64) * scale, -1)
    terms = torch.randn(batch, n, T, dtype=torch.float64) * scale - 3.0
    return Grammar(root, rules.view(groups, NT, NT + T, NT + T), terms, torch.tensor(lengths))


def sentence_grammar(grammar: Grammar, b: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = 0 if grammar.root.shape[0] == 1 else b
    return grammar.root[g], grammar.rules[g], grammar.terms[b]


def enumerate_sentence(grammar: Grammar, b: int, reduce) -> tuple[tuple[tuple, ...], torch.Tensor]:
    n = int(grammar.lengths[b])
    trees = bracketings(0, n)
    return trees, torch.stack([tree_score(t, *sentence_grammar(grammar, b), reduce) for t in trees])


LOGSUMEXP = functools.partial(torch.logsumexp, dim=-1)


def MAX(x: torch.Tensor) -> torch.Tensor:  # noqa: N802
    return x.max(-1).values


LENGTHS = [6, 1, 4, 2, 5, 3]  # one batch, every length 1..6, shuffled so padding sits in the middle too


def span_set(indicators: torch.Tensor) -> set[tuple[int, int]]:
    return {(int(i), int(j)) for i, j in (indicators > 0.5).nonzero().tolist()}


# ----------------------------------------------------------------------------------------------- chart


def test_the_tree_recursion_is_the_sum_over_labelled_derivations() -> None:
    """The reference itself: summing each bracketing's labellings = summing every labelled derivation."""
    grammar = random_grammar([4, 3, 2], groups=1, seed=5)
    for b in range(3):
        _, per_tree = enumerate_sentence(grammar, b, LOGSUMEXP)
        n = int(grammar.lengths[b])
        derivations = labelled_derivations(n, *sentence_grammar(grammar, b))
        assert len(derivations) == len(bracketings(0, n)) * NT ** (n - 1) * T ** n
        assert torch.logsumexp(per_tree, 0).item() == pytest.approx(torch.logsumexp(derivations, 0).item(), abs=1e-10)


@pytest.mark.parametrize("groups", [1, len(LENGTHS)], ids=["neural", "compound"])
def test_inside_equals_the_sum_over_enumerated_trees(groups: int) -> None:
    grammar = random_grammar(LENGTHS, groups, seed=1)
    log_z = inside(grammar)
    for b, n in enumerate(LENGTHS):
        _, scores = enumerate_sentence(grammar, b, LOGSUMEXP)
        expected = torch.logsumexp(scores, 0).item() if n >= 2 else NEG_INF  # no derivation covers one word
        assert log_z[b].item() == pytest.approx(expected, abs=1e-10)
        # alone, without padding, each sentence gets the value it gets in the batch
        alone = Grammar(*(t[b:b + 1] if groups > 1 else t for t in (grammar.root, grammar.rules)),
                        terms=grammar.terms[b:b + 1, :n], lengths=grammar.lengths[b:b + 1])
        assert inside(alone)[0].item() == pytest.approx(log_z[b].item(), abs=1e-10)


@pytest.mark.parametrize("groups", [1, len(LENGTHS)], ids=["neural", "compound"])
def test_span_marginals_are_the_gradient_of_log_z(groups: int) -> None:
    grammar = random_grammar(LENGTHS, groups, seed=2)
    marginals = span_gradients(grammar, "log")
    for b, n in enumerate(LENGTHS):
        trees, scores = enumerate_sentence(grammar, b, LOGSUMEXP)
        expected = torch.zeros_like(marginals[b])
        if n >= 2:
            for tree, p in zip(trees, torch.softmax(scores, 0)):
                for i, j in tree_spans(tree):
                    expected[i, j] += p
            assert marginals[b, 0, n].item() == pytest.approx(1.0)
        assert torch.allclose(marginals[b], expected, atol=1e-10)


@pytest.mark.parametrize("groups", [1, len(LENGTHS)], ids=["neural", "compound"])
def test_viterbi_is_the_best_enumerated_derivation(groups: int) -> None:
    grammar = random_grammar(LENGTHS, groups, seed=3)
    best = inside(grammar, "max")
    chosen = span_gradients(grammar, "max")
    for b, n in enumerate(LENGTHS):
        if n < 2:
            assert best[b].item() == NEG_INF and not chosen[b].any()
            continue
        trees, scores = enumerate_sentence(grammar, b, MAX)
        assert best[b].item() == pytest.approx(scores.max().item(), abs=1e-10)
        assert span_set(chosen[b]) == tree_spans(trees[int(scores.argmax())])


def test_mbr_tree_maximises_the_sum_of_span_marginals() -> None:
    grammar = random_grammar(LENGTHS, len(LENGTHS), seed=4, scale=1.0)
    marginals = span_gradients(grammar, "log")
    chosen = best_span_tree(marginals, grammar.lengths)
    for b, n in enumerate(LENGTHS):
        if n < 2:
            assert not chosen[b].any()
            continue
        trees = bracketings(0, n)
        gains = torch.stack([sum((marginals[b, i, j] for i, j in tree_spans(t)), torch.tensor(0.0)) for t in trees])
        assert span_set(chosen[b]) == tree_spans(trees[int(gains.argmax())])


@pytest.mark.parametrize("n", range(1, 7))
def test_split_distances_rebuild_every_binary_tree(n: int) -> None:
    words = [f"w{i}" for i in range(n)]
    for tree in bracketings(0, n):
        indicators = torch.zeros(n + 1, n + 1)
        for i, j in tree_spans(tree):
            indicators[i, j] = 1.0
        distances = split_distances(indicators, n)
        assert distances.shape == (max(n - 1, 0),)
        rebuilt = binary_tree_from_distances(words, distances.tolist())
        assert {(a, b) for _, a, b in labelled_spans(rebuilt) if b - a > 1} == tree_spans(tree)


def test_log_space_chart_is_exact_in_float32_far_outside_exps_range() -> None:
    """Words of probability e^-5000 (preterminals 100 nats apart) and rules down to e^-60: float32 gives
    float64's log Z to 1e-6 relative and finite gradients — only shifted, bounded values are exponentiated."""
    grammar = random_grammar([40, 17, 2], groups=3, seed=6, scale=8.0)
    root, rules, terms = (t.float().requires_grad_() for t in (grammar.root, grammar.rules, grammar.terms))
    far = terms * 12.0 - 5000.0
    log_z = inside(Grammar(root, rules, far, grammar.lengths))
    assert (log_z < -4900.0 * grammar.lengths).all()  # about e^-5000 per word
    exact = inside(Grammar(*(t.detach().double() for t in (root, rules, far)), lengths=grammar.lengths))
    assert torch.allclose(log_z.double(), exact, rtol=1e-6)
    log_z.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (root, rules, terms))


def test_rules_below_floats_range_stay_finite() -> None:
    """Rules of probability e^-300 underflow in float32: the clamp keeps log Z and its gradients finite."""
    grammar = random_grammar([30, 5], groups=2, seed=7, scale=60.0)
    leaves = [t.float().requires_grad_() for t in (grammar.root, grammar.rules, grammar.terms)]
    log_z = inside(Grammar(*leaves, lengths=grammar.lengths))
    assert torch.isfinite(log_z).all()
    log_z.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in leaves)


# ----------------------------------------------------------------------------------------------- model


def tiny_model(**overrides: object) -> CPCFG:
    torch.manual_seed(0)
    config = CPCFGConfig(**{**dict(nt=NT, t=T, state_dim=8, z_dim=3, word_dim=6, lstm_dim=5), **overrides})
    return CPCFG(config, Vocab([f"w{i}" for i in range(20)])).double()


def test_loss_is_the_negative_elbo_and_counts_words() -> None:
    tokens, mask = pad_batch([[3, 4, 5, 6], [7], [8, 9]], Vocab.pad_index)
    for compound in (False, True):
        model = tiny_model(compound=compound).eval()
        per_sentence, words = model.neg_elbo(tokens, mask)
        z, kl = model._latent(tokens, mask, sample=False)
        log_px = inside(model.grammar(tokens, mask, z))
        assert words.tolist() == [4, 0, 2]  # a one-word sentence has no derivation: not counted
        assert per_sentence[1].item() == 0.0
        assert torch.allclose(per_sentence[[0, 2]], (kl - log_px)[[0, 2]])
        if not compound:
            assert torch.all(kl == 0)
        else:
            assert torch.all(kl > 0)
        out = Likelihood().compute(model.train(), tokens=tokens, mask=mask)
        assert out.count.item() == 6
        out.loss.backward()
        assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_evaluation_samples_z_from_a_fixed_seed_when_asked() -> None:
    tokens, mask = pad_batch([[3, 4, 5, 6], [8, 9]], Vocab.pad_index)
    at_mean, _ = tiny_model().eval().neg_elbo(tokens, mask)
    sampling = tiny_model(eval_z="sample").eval()
    first, _ = sampling.neg_elbo(tokens, mask)
    again, _ = sampling.neg_elbo(tokens, mask)
    assert torch.equal(first, again) and not torch.allclose(first, at_mean)


def test_each_sentence_is_independent_of_its_batch() -> None:
    model = tiny_model().eval()
    rows = [[3, 4, 5, 6, 7], [8, 9], [10, 11, 12]]
    tokens, mask = pad_batch(rows, Vocab.pad_index)
    batched, _ = model.neg_elbo(tokens, mask)
    for b, row in enumerate(rows):
        alone, _ = model.neg_elbo(*pad_batch([row], Vocab.pad_index))
        assert alone.item() == pytest.approx(batched[b].item(), abs=1e-9)


def test_the_grammar_is_a_distribution_over_sentences() -> None:
    """The sentences of 2 and 3 words over the vocabulary (<pad> and <mask> are never generated) hold less than
    all the mass, and more than the part the rules give to such short derivations alone would allow to vanish."""
    model = tiny_model(compound=False)
    words = [Vocab.unk_index, *range(3, len(model.vocab))]
    masses = []
    for n in (2, 3):
        rows = [list(r) for r in itertools.product(words, repeat=n)]
        tokens, mask = pad_batch(rows, Vocab.pad_index)
        with torch.no_grad():
            masses.append(inside(model.grammar(tokens, mask, None)).exp().sum().item())
    # every derivation of a 2-word sentence is S → A → (T1 w1) (T2 w2): their total is Σ_A P(S→A) P(A → T T)
    with torch.no_grad():
        grammar = model.grammar(*pad_batch([[3, 4]], Vocab.pad_index), None)
        two_words = (grammar.root[0].exp() * grammar.rules[0, :, NT:, NT:].exp().sum((1, 2))).sum().item()
        emitted = torch.log_softmax(model.term_mlp(model.t_emb).masked_fill(model.never_generated, NEG_INF), -1)
    assert masses[0] == pytest.approx(two_words, rel=1e-9)
    assert 0.0 < sum(masses) < 1.0
    assert torch.all(emitted[:, [Vocab.pad_index, Vocab.mask_index]] == NEG_INF)
    # a literal <mask> in the input is an unknown word
    with torch.no_grad():
        as_mask = inside(model.grammar(*pad_batch([[Vocab.mask_index, 3]], Vocab.pad_index), None))
        as_unk = inside(model.grammar(*pad_batch([[Vocab.unk_index, 3]], Vocab.pad_index), None))
    assert as_mask.item() == as_unk.item()


def test_parse_gives_binary_trees_by_both_decoders() -> None:
    sentences = [["w3", "w4", "w5", "w6", "w7"], ["w8"], ["w9", "w10"]]
    for decode in ("viterbi", "mbr"):
        model = tiny_model(decode=decode)
        scores = model.parse_scores(sentences)
        assert [len(s.distances) for s in scores] == [4, 0, 1]
        assert sorted(scores[0].distances.tolist())[-1] == 5.0  # the whole sentence splits first
        assert model.capabilities.dependency is False


@pytest.mark.parametrize("compound", [False, True], ids=["neural", "compound"])
def test_a_float32_models_viterbi_tree_is_the_best_enumerated_one(compound: bool) -> None:
    """``parse`` with ``decode: viterbi`` on a float32 model: the bracketing of the best derivation of the model's
    own grammar, enumerated in float64 (the max-product chart runs in float64, see CPCFG.tree_spans)."""
    model = tiny_model(compound=compound).float().eval()
    rows = [[3, 4, 5, 6, 7, 8], [9, 10, 11], [12, 13, 14, 15, 16]]
    tokens, mask = pad_batch(rows, Vocab.pad_index)
    chosen = model.tree_spans(tokens, mask)
    assert chosen.dtype == torch.float32
    with torch.no_grad():
        grammar = model.grammar(tokens, mask, model._latent(tokens, mask, sample=False)[0])
    exact = Grammar(grammar.root.double(), grammar.rules.double(), grammar.terms.double(), grammar.lengths)
    for b, row in enumerate(rows):
        trees, scores = enumerate_sentence(exact, b, MAX)
        assert span_set(chosen[b]) == tree_spans(trees[int(scores.argmax())])


def test_viterbi_in_memory_bounded_groups_equals_one_batch() -> None:
    model = tiny_model(compound=True).eval()
    tokens, mask = pad_batch([[3, 4, 5, 6, 7, 8], [9, 10], [11, 12, 13, 14]], Vocab.pad_index)
    whole = model.tree_spans(tokens, mask)
    model.config.viterbi_memory_mb = 0  # below any sentence's need: one sentence per group
    assert len(model._viterbi_groups(model.grammar(tokens, mask, model._latent(tokens, mask, sample=False)[0]))) == 3
    assert torch.equal(model.tree_spans(tokens, mask), whole)


def test_config_errors_are_one_line() -> None:
    with pytest.raises(DepinduceError, match="cpcfg: nt must be a positive integer"):
        CPCFGConfig(nt=0)
    with pytest.raises(DepinduceError, match="cpcfg: decode must be one of viterbi, mbr"):
        CPCFGConfig(decode="cky")
    with pytest.raises(DepinduceError, match="cpcfg: compound must be true or false"):
        CPCFGConfig(compound="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["cpcfg-ptb.yaml", "cpcfg-ptb-cpu.yaml"])
def test_recipes_load(name: str) -> None:
    recipe = load_recipe(REPO / "depinduce" / "recipes" / name)
    config = resolve_config(model_name=None, model_config_class=CPCFGConfig, recipe=recipe, where=name,
                            overrides=["compound=false"])
    assert config.model == "cpcfg" and config.model_config["compound"] is False
    train = config.train.flat()  # as the recipe writes them
    assert (train["lr"], train["beta1"], train["beta2"], train["clip"]) == (1e-3, 0.75, 0.999, 3.0)
    assert (train["curriculum_start"], train["curriculum_step"], train["max_length"]) == (30, 1, 40)
    assert train["select"] == "dev_uf1"
    if name == "cpcfg-ptb.yaml":
        assert (config.model_config["nt"], config.model_config["t"], train["epochs"]) == (30, 60, 15)
    assert isinstance(objective_for("likelihood", mask_rate=0.3, vocab_size=10), Likelihood)


# ------------------------------------------------------------------------------------------ end to end


@pytest.fixture(scope="module")
def ptb_sample(nltk_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The PTB sample preprocessed, cut to 300 training and 40 dev sentences (dev.txt, dev.trees, dev.conllu)."""
    full = tmp_path_factory.mktemp("cpcfg") / "ptb"
    result = CliRunner().invoke(cli, ["preprocess", "ptb", "--sample-only", "--out", str(full), "--quiet", "--workers", "1"])
    assert result.exit_code == 0, result.output
    small = full.parent / "small"
    small.mkdir()
    (small / "vocab.json").write_text((full / "vocab.json").read_text())
    for name, count in (("train.txt", 300), ("dev.txt", 40), ("dev.trees", 40)):
        lines = (full / name).read_text().splitlines(keepends=True)
        (small / name).write_text("".join(lines[:count]))
    blocks = (full / "dev.conllu").read_text().split("\n\n")
    (small / "dev.conllu").write_text("\n\n".join(blocks[:40]) + "\n\n")
    return small


TINY = ("nt=4", "t=6", "state_dim=16", "z_dim=4", "word_dim=16", "lstm_dim=16", "epochs=2",
        "batch_tokens=300", "curriculum_start=12", "curriculum_step=4", "max_time=null", "eval_every=0")


def _sets(*items: str) -> list[str]:
    return list(itertools.chain.from_iterable(("--set", s) for s in items))


def test_train_parse_eval_end_to_end(ptb_sample: Path, tmp_path: Path, one_thread) -> None:  # noqa: F811
    run = tmp_path / "run"
    runner = CliRunner()
    trained = runner.invoke(cli, ["train", "--recipe", "cpcfg-ptb-cpu", "--data", str(ptb_sample), "--out",
                                  str(run), "--quiet", "--threads", "1", *_sets(*TINY)])
    assert trained.exit_code == 0, trained.output
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 2
    assert all(r["dev_uf1"] is not None and 1.0 < r["dev_ppl"] < 20_000 for r in records)
    assert records[1]["train_loss"] < records[0]["train_loss"]  # the ELBO rises

    gold = ptb_sample / "dev.trees"
    parsed = runner.invoke(cli, ["parse", "--model", str(run), "--input-format", "conllu", "--format", "brackets",
                                 "--quiet", str(ptb_sample / "dev.conllu")])
    assert parsed.exit_code == 0, parsed.output
    predicted = tmp_path / "dev.pred.trees"
    predicted.write_text(parsed.stdout)
    scored = runner.invoke(cli, ["eval", "--gold", str(gold), "--pred", str(predicted), "--json"])
    assert scored.exit_code == 0, scored.output
    report = json.loads(scored.stdout)
    best = max(records, key=lambda r: r["dev_uf1"])
    assert report["metrics"]["uf1_sentence"] == pytest.approx(best["dev_uf1"], abs=1e-6)

    measured = runner.invoke(cli, ["perplexity", "--model", str(run), "--json", "--quiet",
                                   str(ptb_sample / "dev.txt")])
    assert measured.exit_code == 0, measured.output
    figures = json.loads(measured.stdout)
    assert figures["objective"] == "likelihood" and figures["perplexity"] == pytest.approx(best["dev_ppl"], rel=1e-5)


def test_the_neural_pcfg_trains_too(ptb_sample: Path, tmp_path: Path, one_thread) -> None:  # noqa: F811
    run = tmp_path / "neural"
    result = CliRunner().invoke(cli, ["train", "--model", "cpcfg", "--recipe", "cpcfg-ptb-cpu", "--data",
                                      str(ptb_sample), "--out", str(run), "--quiet", "--threads", "1",
                                      *_sets(*TINY, "compound=false", "epochs=1", "dev_parse=false",
                                             "select=dev_ppl")])
    assert result.exit_code == 0, result.output
    config = (run / "config.yaml").read_text()
    assert "compound: false" in config
    (record,) = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert 1.0 < record["dev_ppl"] < 20_000
    state = torch.load(run / "model.pt", weights_only=True)
    assert not any(key.startswith("enc_") for key in state)  # no inference network without z


def test_an_interrupted_and_resumed_run_ends_as_an_uninterrupted_one(ptb_sample: Path, tmp_path: Path,
                                                                    one_thread) -> None:  # noqa: F811
    """z is sampled in every training step: the random state in last.pt must carry it across a resume."""
    settings = ["--recipe", "cpcfg-ptb-cpu", "--data", str(ptb_sample), "--quiet", "--threads", "1",
                *_sets(*TINY, "dev_parse=false", "select=dev_ppl")]
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    runner = CliRunner()
    assert runner.invoke(cli, ["train", "--out", str(whole), *settings]).exit_code == 0
    first = runner.invoke(cli, ["train", "--out", str(parts), *settings, "--max-time", "0.0001"])
    assert first.exit_code == 0, first.output
    assert json.loads((parts / "manifest.json").read_text())["runs"][-1]["outcome"]["reason"] == "max_time"
    # a resumed run keeps the --max-time it recorded, per invocation: give it one that lets it finish
    resumed = runner.invoke(cli, ["train", "--resume", "--data", str(ptb_sample), "--out", str(parts), "--quiet",
                                  "--threads", "1", "--max-time", "60"])
    assert resumed.exit_code == 0, resumed.output
    a, b = (torch.load(p / "last.pt", weights_only=True)["model"] for p in (whole, parts))
    assert all(torch.equal(a[k], b[k]) for k in a)
