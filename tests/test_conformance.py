"""The contract every registered backend keeps (the ``depinduce.models`` entry points, whatever their number):
its bundled recipes load, a bad ``model_config`` key is one line and exit code 2, a sentence's scores do not
depend on the other sentences of its batch, train → parse → eval on a tiny synthetic treebank gives back the
dev scores the run recorded, and every decoder and output format it offers writes every token (see docs/writing-a-backend.md for the contract itself).

Each backend trains once per module, on tiny settings (:data:`SHRINK`), and the run is shared by its tests;
``pytest -k NAME`` trains only that backend.  What is particular to one model (its equations, its own decoders,
its paper settings) stays in that model's own test file.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from depinduce.cli.main import cli
from depinduce.data.punct import sentence_punct_mask
from depinduce.data.vocab import Vocab
from depinduce.io import format_conllu
from depinduce.io.conllu_format import read_conllu
from depinduce.models.base import Backend, ParseScores
from depinduce.models.neural import build_config
from depinduce.models.registry import load_model, registrations
from depinduce.pipeline import visible_sentence
from depinduce.structures.decoder_names import DECODERS
from depinduce.structures.dependency import tree_problem
from depinduce.structures.sentence import Sentence
from depinduce.training.config import load_recipe, resolve_config
from depinduce.training.defaults import bundled_recipes_dir
from training_support import _UPOS, synthetic_labels, synthetic_sentence

REGISTERED = registrations()
BACKENDS = sorted(REGISTERED)
CLASSES: dict[str, type[Backend]] = {name: reg.load_class() for name, reg in REGISTERED.items()}
TRAINABLE = [name for name in BACKENDS if CLASSES[name].capabilities.trainable]

# Tiny model settings, so a backend trains in seconds; a backend not listed trains with its CPU recipe's.
SHRINK: dict[str, tuple[str, ...]] = {
    "structformer": ("hidden_size=16", "n_layers=2", "n_heads=4", "ff_size=32", "conv_size=3", "max_positions=64"),
    "udgn": ("hidden_size=16", "n_layers=2", "n_heads=4", "head_size=6", "parser_layers=2", "parser_hidden_size=8"),
    "prpn": ("emb_size=12", "hidden_size=16", "n_layers=2", "n_slots=4", "lookback=2"),
    "probformer": ("d=8", "n_channels=3", "n_iter=2", "rank=4", "distance_threshold=1"),
    "rngtr": ("hidden_size=16", "n_layers=1", "n_heads=2", "ff_size=32", "arc_mlp_size=12", "label_mlp_size=6",
              "iterations=1"),
    "cpcfg": ("nt=4", "t=6", "state_dim=16", "z_dim=4", "word_dim=16", "lstm_dim=16"),
}
TRAIN = ("epochs=1", "batch_tokens=200", "eval_every=0")
# dev_<metric> in metrics.jsonl -> the key `eval --json` reports the same figure under
DEV_METRICS = {"dev_dda": "dda", "dev_uda": "uda", "dev_las": "las", "dev_uf1": "uf1_sentence"}


def _one_line_error(result) -> str:  # type: ignore[no-untyped-def]
    """The message of a command that failed as bad input fails: exit code 2, one line, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


# ----------------------------------------------------------------------------------------------- recipes


def _recipes_of(name: str) -> list[Path]:
    return [p for p in sorted(bundled_recipes_dir().glob("*.yaml")) if load_recipe(p).get("model") == name]


def test_every_bundled_recipe_names_a_registered_backend() -> None:
    for path in sorted(bundled_recipes_dir().glob("*.yaml")):
        assert load_recipe(path).get("model") in REGISTERED, f"{path.name} names no registered backend"


@pytest.mark.parametrize("name", BACKENDS)
def test_recipes_load(name: str) -> None:
    """Each bundled recipe of the backend resolves and builds its configuration; a trainable backend's default
    recipes (``train --model NAME`` without ``--recipe``) are bundled recipes for that very backend."""
    cls = CLASSES[name]
    recipes = _recipes_of(name)
    if not cls.capabilities.trainable:
        assert recipes == [] and cls.default_recipes == {}
        return
    assert recipes, f"trainable backend {name} has no bundled recipe"
    assert set(cls.default_recipes) <= {"cpu", "cuda"} and "cpu" in cls.default_recipes
    assert {f"{stem}.yaml" for stem in cls.default_recipes.values()} <= {p.name for p in recipes}
    for path in recipes:
        config = resolve_config(model_name=name, model_config_class=cls.config_class,  # type: ignore[attr-defined]
                                recipe=load_recipe(path), where=path.name)
        assert config.model == name
        built = build_config(cls.config_class, config.model_config, where=path.name)  # type: ignore[attr-defined]
        assert isinstance(built, cls.config_class)  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------------------- config errors


@pytest.mark.parametrize("name", BACKENDS)
def test_an_unknown_model_config_key_is_one_line(name: str, tmp_path: Path) -> None:
    """From ``--set`` and from a recipe file alike: one line naming the key, exit code 2, nothing trained."""
    data = _synthetic_treebank(tmp_path / "data", n_train=8, n_dev=2)
    run = tmp_path / "run"
    runner = CliRunner()
    by_set = runner.invoke(cli, ["train", "--model", name, "--data", str(data), "--out", str(run), "--quiet",
                                 "--set", "model_config.no_such_option=1"])
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"model: {name}\nmodel_config:\n  no_such_option: 1\n")
    by_recipe = runner.invoke(cli, ["train", "--recipe", str(recipe), "--data", str(data), "--out", str(run),
                                    "--quiet"])
    for result in (by_set, by_recipe):
        message = _one_line_error(result)
        if CLASSES[name].capabilities.trainable:
            assert "no_such_option" in message
        else:
            assert name in message  # an untrained baseline cannot be trained at all, and says so
    assert not run.exists()


# ---------------------------------------------------------------------------------------- the tiny data


def _synthetic_treebank(folder: Path, *, n_train: int = 120, n_dev: int = 16, seed: int = 0,
                        trees: bool = True) -> Path:
    """What ``preprocess`` writes, from synthetic sentences: ``{train,dev}.conllu`` (every token, XPOS, UPOS,
    heads and labels), the punctuation-free ``.txt`` views, ``vocab.json`` and, with ``trees``, ``.trees``."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", n_train), ("dev", n_dev)):
        drawn = [synthetic_sentence(rng) for _ in range(count)]
        blocks = []
        for i, (words, tags, heads, _) in enumerate(drawn, start=1):
            blocks.append(format_conllu(Sentence(
                words=words, xpos=tags, upos=[_UPOS[t] for t in tags], heads=heads,
                deprels=synthetic_labels(tags, heads), sent_id=f"{split}:{i}",
                metadata={"sent_id": f"{split}:{i}", "punct_rule": "ptb"})))
        (folder / f"{split}.conllu").write_text("".join(blocks))
        (folder / f"{split}.txt").write_text("".join(" ".join(w[:-1]) + "\n" for w, _, _, _ in drawn))
        if trees:
            (folder / f"{split}.trees").write_text("".join(t.replace(" (. .)", "") + "\n" for *_, t in drawn))
        if split == "train":
            Vocab.build((w[:-1] for w, _, _, _ in drawn), min_freq=1).save(folder / "vocab.json")
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[Path, Path | None]]:
    """(data folder, run directory) of a backend, trained on first use and shared by this module's tests; an
    untrained backend has no run.  A backend that reads whole CoNLL-U sentences (RNGTr) gets the folder
    ``preprocess ud`` writes (no ``.trees``), the others the one ``preprocess ptb`` writes."""
    root = tmp_path_factory.mktemp("conformance")
    folders = {trees: _synthetic_treebank(root / ("ptb" if trees else "ud"), trees=trees) for trees in (True, False)}
    done: dict[str, tuple[Path, Path | None]] = {}

    def get(name: str) -> tuple[Path, Path | None]:
        if name not in done:
            cls = CLASSES[name]
            data = folders[not cls.capabilities.whole_sentences]
            run = None
            if cls.capabilities.trainable:
                run = root / name
                sets = [f"model_config.{s}" for s in SHRINK.get(name, ())] + [f"train.{s}" for s in TRAIN]
                threads = torch.get_num_threads()
                result = CliRunner().invoke(cli, ["train", "--model", name, "--data", str(data), "--out", str(run),
                                                  "--quiet", "--threads", "1",
                                                  *[a for s in sets for a in ("--set", s)]])
                torch.set_num_threads(threads)
                assert result.exit_code == 0, result.output
            done[name] = (data, run)
        return done[name]

    return get


# ---------------------------------------------------------------------------------------------- batch-mates


def _scores(backend: Backend, sentences: Sequence[Sentence]) -> list[ParseScores]:
    """The scores the parse pipeline asks for: whole sentences, the visible tokens with their tags, or the
    visible words, as the backend's capabilities say."""
    if backend.capabilities.whole_sentences:
        return backend.parse_sentences(sentences)
    hidden = [sentence_punct_mask(s) for s in sentences]
    if backend.capabilities.reads_tags:
        return backend.parse_sentences([visible_sentence(s, h) for s, h in zip(sentences, hidden)])
    return backend.parse_scores([[w for w, hide in zip(s.words, h) if not hide] for s, h in zip(sentences, hidden)])


def _same(a: ParseScores, b: ParseScores) -> None:
    for field in ("heads", "distances", "heights", "labels"):
        x, y = getattr(a, field), getattr(b, field)
        assert (x is None) == (y is None), field
        if x is not None:
            assert x.shape == y.shape and torch.allclose(x.float(), y.float(), atol=1e-5, rtol=1e-4), field
    assert a.fixed_heads == b.fixed_heads
    assert a.label_names == b.label_names


@pytest.mark.parametrize("name", BACKENDS)
def test_a_sentences_scores_do_not_depend_on_its_batch_mates(name: str, runs) -> None:  # type: ignore[no-untyped-def]
    data, run = runs(name)
    sentences = read_conllu(str(data / "dev.conllu"))
    by_length = sorted(sentences, key=len)
    short, middle, long = by_length[0], by_length[len(by_length) // 2], by_length[-1]
    assert len(short) < len(middle) < len(long)  # padding on both sides of the sentence looked at
    backend = load_model(str(run) if run is not None else name)
    if name == "random":  # its scores are seeded draws, documented to depend on the order of the input
        again = load_model(name)
        for a, b in zip(_scores(backend, [long, middle, short]), _scores(again, [long, middle, short])):
            _same(a, b)
        return
    with torch.no_grad():
        alone = _scores(backend, [middle])[0]
        batched = _scores(backend, [long, middle, short])[1]
    assert any(getattr(alone, f) is not None for f in ("heads", "distances", "fixed_heads"))
    _same(alone, batched)


# ------------------------------------------------------------------------------------------ end to end


def _eval(gold: Path, pred: Path) -> dict:
    result = CliRunner().invoke(cli, ["eval", "--gold", str(gold), "--pred", str(pred), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["metrics"]


@pytest.mark.parametrize("name", BACKENDS)
def test_train_parse_eval_gives_back_the_recorded_dev_scores(name: str, runs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The run holds what a run holds; ``parse`` of dev (with the run's own decoder) scored by ``eval`` gives
    the dev figures the run recorded for its saved model: training and evaluation share one protocol."""
    data, run = runs(name)
    cls = CLASSES[name]
    model = str(run) if run is not None else name
    best: dict[str, float] = {}
    if run is not None:
        for file in ("config.yaml", "vocab.json", "model.pt", "metrics.jsonl", "manifest.json"):
            assert (run / file).is_file(), file
        records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        best = next(r for r in reversed(records) if r.get("best"))
        assert best["select"] in best and best["best_value"] == best[best["select"]]
        assert any(key in best for key in DEV_METRICS)
    runner = CliRunner()
    checked = 0
    if cls.capabilities.dependency:
        parsed = runner.invoke(cli, ["parse", "--model", model, "--input-format", "conllu", "--quiet",
                                     str(data / "dev.conllu")])
        assert parsed.exit_code == 0, parsed.output
        pred = tmp_path / "dev.pred.conllu"
        pred.write_text(parsed.stdout)
        metrics = _eval(data / "dev.conllu", pred)
        assert 0.0 <= metrics["dda"] <= metrics["uda"] <= 100.0
        for key in ("dev_dda", "dev_uda", "dev_las"):
            if key in best:
                assert metrics[DEV_METRICS[key]] == pytest.approx(best[key], abs=1e-6), key
                checked += 1
    if cls.capabilities.constituency and (data / "dev.trees").is_file():
        parsed = runner.invoke(cli, ["parse", "--model", model, "--input-format", "conllu", "--format", "brackets",
                                     "--quiet", str(data / "dev.conllu")])
        assert parsed.exit_code == 0, parsed.output
        pred = tmp_path / "dev.pred.trees"
        pred.write_text(parsed.stdout)
        metrics = _eval(data / "dev.trees", pred)
        assert 0.0 <= metrics["uf1_sentence"] <= 100.0
        if "dev_uf1" in best:
            assert metrics["uf1_sentence"] == pytest.approx(best["dev_uf1"], abs=1e-6)
            checked += 1
    assert checked > 0 or run is None, f"{name}: no recorded dev figure was compared"


@pytest.mark.parametrize("name", BACKENDS)
def test_every_decoder_and_format_the_backend_offers_writes_every_token(name: str, runs,  # type: ignore[no-untyped-def]
                                                                       tmp_path: Path) -> None:
    """Each decoder (the shared ones and the backend's own) parses dev to one row per input token, and the tree
    decoders (MST, Eisner) give trees; a backend without dependencies refuses CoNLL-U output in one line; every
    backend writes one bracketed tree per sentence."""
    data, run = runs(name)
    backend = CLASSES[name]
    model = str(run) if run is not None else name
    gold = read_conllu(str(data / "dev.conllu"))
    runner = CliRunner()
    base = ["parse", "--model", model, "--input-format", "conllu", "--quiet", str(data / "dev.conllu")]
    if backend.capabilities.dependency:
        for decoder in (*DECODERS, *backend.own_decoders):
            parsed = runner.invoke(cli, [*base, "--decoder", decoder])
            assert parsed.exit_code == 0, (decoder, parsed.output)
            pred = tmp_path / f"{decoder}.conllu"
            pred.write_text(parsed.stdout)
            sentences = read_conllu(str(pred), check_trees=False)  # argmax decoders may give non-trees
            assert [s.words for s in sentences] == [s.words for s in gold], decoder
            if decoder in ("mst", "eisner"):
                assert all(tree_problem(list(s.heads)) is None for s in sentences), decoder
    else:
        assert "induces constituency only" in _one_line_error(runner.invoke(cli, base))
    brackets = runner.invoke(cli, [*base, "--format", "brackets"])  # a dependency tree read as spans, if no more
    assert brackets.exit_code == 0, brackets.output
    trees = brackets.stdout.splitlines()
    assert len(trees) == len(gold) and all(t.startswith("(") for t in trees)
