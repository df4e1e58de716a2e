"""Parsing speed of ``depinduce parse`` beside the authors' own test-time parsing, with the same trained weights.

The authors' test scripts parse one sentence at a time: a forward pass on a 1-sentence batch in eval mode under
``no_grad``, then their own decoding in Python/numpy.  This script loads a depinduce run, builds the authors'
model at the same configuration from their checkout (``scripts/bench_authors.py``'s builder), copies the weights
across, checks on a few sentences that both give the same head distributions (and distances/heights, and final
hidden states), then times, interleaved over ``--rounds`` rounds in alternating order:

- depinduce: the whole ``depinduce parse`` pipeline exactly as ``scripts/bench_parse.py`` times it (batches of
  ``--batch-size`` through :func:`depinduce.pipeline.parse`: hiding punctuation, indexing, scoring, decoding with
  ``--decoder``, re-attaching punctuation, labels);
- the authors: for each sentence, the body of their test loop — StructFormer (google-research ``structformer/
  test_phrase_grammar.py``): index lookup, ``model(data, pos)``, ``tree_utils.build_tree`` on the distances (their
  constituency decoding) and each word's ``argmax`` head (root where its height is not below the maximum: their
  dependency decoding, one line inside their loop); UDGN (yikangshen/UDGN ``test_phrase_grammar.py``):
  ``model(data, data, pos)`` and their ``dms`` tree decoder (Chu-Liu/Edmonds with each word tried as the root)
  on log(head + 1e-9).  Their gold-scoring code in the same loop (bracket F1, the UDGN label statistics) is left
  out: it is evaluation, not parsing.

Both sides parse the same words: the authors' input is depinduce's model view of each sentence (punctuation
hidden by its XPOS, the papers' word-tag filter on PTB-tagged data; words normalised and indexed by the run's
vocabulary), with the indices computed once before timing, as their corpus loader does (StructFormer's loop
looks each word up again, so that lookup is timed).  Sentences with no words for the model are skipped by both.
Sentences/s and tokens/s count every sentence and token of the file (as ``bench_parse.py`` does); ``--limit N``
times the first N sentences only, to keep a run short on a loaded machine.

What differs besides batching: the authors' test loop runs their whole masked-LM forward pass (the transformer
or DGN layers and, for UDGN, the output layer and loss over every position) although the parse needs only the
parser's output, while depinduce's ``parse`` runs the parsing network alone.  ``--batch-size 1`` shows how much
of the difference is batching.  On a machine shared with other work, timings with more than one thread suffer
most (each small operation waits for both threads); 1-thread timings are the stable ones.

The authors' code is imported from a checkout the user gives, never from this repository; it must hold their
decoders too:

    # StructFormer: google-research, the folder that holds structformer/ (structformer.py, layers.py,
    # tree_utils.py, data_ptb.py)
    python scripts/bench_parse_authors.py --model structformer --authors /tmp/google-research \\
        --run runs/sf --input data/ptb-brown/test.conllu --threads 2 --rounds 3
    # UDGN: yikangshen/UDGN (models.py, layers.py, test_phrase_grammar.py, data_dep.py, hinton.py;
    # test_phrase_grammar imports ufal.chu_liu_edmonds, nltk and numpy)
    python scripts/bench_parse_authors.py --model udgn --authors /tmp/UDGN --run runs/udgn \\
        --input data/ptb-brown/test.conllu --threads 2 --rounds 3
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import numpy
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_authors  # noqa: E402
from cpu_info import cpu_description  # noqa: E402

from depinduce.data.punct import sentence_punct_mask  # noqa: E402
from depinduce.errors import DepinduceError  # noqa: E402
from depinduce.io import read_sentences  # noqa: E402
from depinduce.models.registry import load_model  # noqa: E402
from depinduce.pipeline import OUTPUT_FORMATS, ParseRequest, check_request, parse  # noqa: E402

# Files each authors' checkout must hold (relative to the folder given): their model and their test-time decoder.
REQUIRED = {
    "structformer": ("structformer/structformer.py", "structformer/layers.py", "structformer/tree_utils.py",
                     "structformer/data_ptb.py"),
    "udgn": ("models.py", "layers.py", "test_phrase_grammar.py", "data_dep.py", "hinton.py"),
}


def fail(message: str) -> NoReturn:
    """A one-line error (exit status 2, as the CLI's)."""
    print(f"bench_parse_authors: {message}", file=sys.stderr)
    raise SystemExit(2)


# ------------------------------------------------------------------------------------------------ the checkout


def checkout_root(model_name: str, authors: Path) -> Path:
    """The folder the authors' modules import from; a missing path or file is a one-line error."""
    if not authors.is_dir():
        fail(f"{authors}: no such directory (give the authors' checkout with --authors)")
    root = authors
    if model_name == "structformer" and (authors / "structformer.py").is_file():
        root = authors.parent  # the structformer/ folder itself was given
    missing = [name for name in REQUIRED[model_name] if not (root / name).is_file()]
    if missing:
        what = "google-research's checkout root" if model_name == "structformer" else "the yikangshen/UDGN checkout"
        fail(f"{root}: not a complete checkout, missing {', '.join(missing)} (give {what})")
    return root


def authors_decoder_module(model_name: str, root: Path) -> Any:
    """Their test-time decoding module: ``structformer.tree_utils`` or UDGN's ``test_phrase_grammar``."""
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    name = "structformer.tree_utils" if model_name == "structformer" else "test_phrase_grammar"
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        fail(f"{root}: importing the authors' {name} failed ({exc}); it needs nltk"
             + ("" if model_name == "structformer" else " and ufal.chu_liu_edmonds"))


# ------------------------------------------------------------------------------------------ the weight mapping


def check_equivalent_config(model_name: str, config: dict[str, Any]) -> None:
    """Settings of depinduce's model that the authors' constructor cannot express are a one-line error."""
    if model_name == "structformer":
        expected = {"ff_size": 4 * config["hidden_size"], "leaky_slope": 0.01}
        if config.get("max_positions", 512) < 500:
            fail("max_positions below the authors' 500 position embeddings")
    else:
        expected = {"parser_hidden_size": config["hidden_size"], "gates": True, "competition": "softmax",
                    "relative_bias": True, "activation": "tanh"}
    for key, value in expected.items():
        if config.get(key, value) != value:
            fail(f"model_config {key}={config[key]!r}: the authors' model has only {key}={value!r}")


def structformer_state(ours: dict[str, torch.Tensor], n_layers: int, n_parser_layers: int) -> dict[str, torch.Tensor]:
    """depinduce's StructFormer state dict under the authors' parameter names.

    One fused q/k/v projection (rows q, k, v, each laid out head by head as theirs) splits into their three;
    the pre-attention and pre-FFN LayerNorms are their ``norm`` and ``feedforward.0``; the parser's convolutions
    sit inside their ``Conv1d`` wrapper (``.conv``) of ``nn.Sequential`` blocks; ``log_sharpness`` is their
    ``_scaler`` (they exponentiate it too), ``relation_logits`` their ``_rel_weight`` (softmax over (head,
    child) = our (parent, dependent)); the output layer is tied to the embedding in both, with its own bias.
    Their position table has 500 rows, ours ``max_positions``: the first 500 are copied.
    """
    state = {
        "emb.weight": ours["embedding.weight"], "output_layer.weight": ours["embedding.weight"],
        "output_layer.bias": ours["output_bias"], "norm.weight": ours["final_norm.weight"],
        "norm.bias": ours["final_norm.bias"], "_rel_weight": ours["relation_logits"],
        "_scaler": ours["log_sharpness"],
    }
    if "position.weight" in ours:
        state["pos_emb.weight"] = ours["position.weight"][:500]
    for i in range(n_parser_layers):
        for kind in ("weight", "bias"):
            state[f"parser_layers.{i}.0.conv.{kind}"] = ours[f"parser.convs.{i}.{kind}"]
    for kind in ("weight", "bias"):
        state[f"distance_ff.0.conv.{kind}"] = ours[f"parser.distance_conv.{kind}"]
        state[f"distance_ff.3.{kind}"] = ours[f"parser.distance_out.{kind}"]
        state[f"height_ff.0.{kind}"] = ours[f"parser.height_proj.{kind}"]
        state[f"height_ff.3.{kind}"] = ours[f"parser.height_out.{kind}"]
    for i in range(n_layers):
        ours_layer, theirs = f"layers.{i}.", f"layers.{i}."
        for kind in ("weight", "bias"):
            q, k, v = ours[f"{ours_layer}attention.qkv.{kind}"].chunk(3, dim=0)
            state.update({f"{theirs}self_attn.q_proj.{kind}": q, f"{theirs}self_attn.k_proj.{kind}": k,
                          f"{theirs}self_attn.v_proj.{kind}": v,
                          f"{theirs}self_attn.out_proj.{kind}": ours[f"{ours_layer}attention.out.{kind}"],
                          f"{theirs}norm.{kind}": ours[f"{ours_layer}attn_norm.{kind}"],
                          f"{theirs}feedforward.0.{kind}": ours[f"{ours_layer}ff_norm.{kind}"],
                          f"{theirs}feedforward.1.{kind}": ours[f"{ours_layer}ff_in.{kind}"],
                          f"{theirs}feedforward.4.{kind}": ours[f"{ours_layer}ff_out.{kind}"]})
    return state


def udgn_state(ours: dict[str, torch.Tensor], n_layers: int, parser_hidden: int) -> dict[str, torch.Tensor]:
    """depinduce's UDGN state dict under the authors' parameter names.

    The BiLSTM is an ``nn.LSTM`` in both (same parameter names under ``parser.encoder.lstm``); our parser
    projection is laid out [child | parent], theirs ``parent, child = parser_ff(h).chunk(2)``, so its two halves
    swap; the DGN projection is [q, k, v, g] blocks laid out head by head in both; our ``direction_bias`` (heads ×
    (left, right)) is their ``rels_bias`` ((left, right) × heads), transposed; the output layer is tied to the
    embedding in both, with its own bias.
    """
    weight, bias = ours["parser.project.weight"], ours["parser.project.bias"]
    state = {
        "emb.weight": ours["embedding.weight"], "output_layer.weight": ours["embedding.weight"],
        "output_layer.bias": ours["output_bias"], "parser_emb.weight": ours["parser.embedding.weight"],
        "norm.weight": ours["final_norm.weight"], "norm.bias": ours["final_norm.bias"],
        "parser_ff.weight": torch.cat([weight[parser_hidden:], weight[:parser_hidden]]),
        "parser_ff.bias": torch.cat([bias[parser_hidden:], bias[:parser_hidden]]),
    }
    prefix = "parser.encoder.lstm."
    state.update({f"parser_layers.{key[len(prefix):]}": value for key, value in ours.items() if key.startswith(prefix)})
    for i in range(n_layers):
        for kind in ("weight", "bias"):
            state[f"layers.{i}.self_attn.proj.{kind}"] = ours[f"layers.{i}.project.{kind}"]
            state[f"layers.{i}.self_attn.out_proj.{kind}"] = ours[f"layers.{i}.out.{kind}"]
        state[f"layers.{i}.self_attn.rels_bias"] = ours[f"layers.{i}.direction_bias"].t()
    return state


def authors_model(model_name: str, backend: Any, root: Path) -> Any:
    """The authors' model built by ``bench_authors.authors_step_function`` at the run's configuration and
    vocabulary size, holding the run's weights (loaded strictly: every parameter of theirs is set)."""
    config = dataclasses.asdict(backend.config)
    check_equivalent_config(model_name, config)
    bench_authors.VOCAB_SIZE = len(backend.vocab)  # the builder reads these module constants
    bench_authors.PAD = backend.vocab.pad_index
    model, _ = bench_authors.authors_step_function(model_name, config, root)
    ours = {key: value.detach().float().cpu() for key, value in backend.state_dict().items()}
    if model_name == "structformer":
        state = structformer_state(ours, config["n_layers"], config["n_parser_layers"])
    else:
        state = udgn_state(ours, config["n_layers"], config["parser_hidden_size"])
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        fail(f"copying the weights into the authors' {model_name} failed: {str(exc).splitlines()[0]}")
    return model.eval()


# ------------------------------------------------------------------------------------------------ the two sides


def model_view(path: str, backend: Any, limit: int | None) -> tuple[list[Any], list[list[str]], list[list[int]]]:
    """The file's sentences (the first ``limit``), each one's words as the model sees them (normalised) and their
    indices."""
    sentences = read_sentences(path, fmt="conllu")[:limit]
    words, ids = [], []
    for sentence in sentences:
        visible = [w for w, hidden in zip(sentence.words, sentence_punct_mask(sentence)) if not hidden]
        words.append(backend.vocab.normalization.words(visible))
        ids.append(backend.vocab.encode(words[-1], normalize=False))
    return sentences, words, ids


def authors_parse_function(model_name: str, model: Any, decoder: Any, backend: Any) -> Callable[..., list[Any]]:
    """One sentence → the authors' parse, as the body of their test loop computes it."""
    if model_name == "structformer":
        word2idx, unk = backend.vocab.stoi, backend.vocab.unk_index

        @torch.no_grad()
        def parse_structformer(sen: list[str], _ids: list[int]) -> list[Any]:
            x = [word2idx[w] if w in word2idx else unk for w in sen]
            data = torch.LongTensor([x])
            pos = torch.LongTensor([list(range(len(sen)))])
            _, p_dict = model(data, pos)
            distance = p_dict["distance"].clone().squeeze(0).cpu().numpy().tolist()
            height = p_dict["height"].clone().squeeze(0).cpu().numpy().tolist()
            head = p_dict["head"].clone().squeeze(0).cpu().numpy()
            max_height = numpy.max(height)
            parse_tree = decoder.build_tree(distance, sen, gap=0)
            heads = [numpy.argmax(ph) + 1 if c < max_height else 0 for c, ph in zip(height, head)]  # their loop's
            return [parse_tree, heads]

        return parse_structformer

    @torch.no_grad()
    def parse_udgn(_sen: list[str], x: list[int]) -> list[Any]:
        data = torch.LongTensor([x])
        pos = torch.LongTensor([list(range(len(x)))])
        _, p_dict = model(data, data, pos)
        head = p_dict["head"].clone().squeeze(0).cpu().numpy()
        weights = numpy.log(head + 1e-9).astype(float)  # their numpy.float, an alias of float removed in numpy 1.24
        return [decoder.dms(weights)]

    return parse_udgn


def time_authors(parse_one: Callable[..., list[Any]], words: list[list[str]], ids: list[list[int]]) -> float:
    """Seconds for the authors' loop over every sentence with words for the model."""
    started = time.perf_counter()
    for sen, x in zip(words, ids):
        if sen:
            parse_one(sen, x)
    return time.perf_counter() - started


def time_depinduce(path: str, backend: Any, batch_size: int, decoder: str, fmt: str, limit: int | None) -> float:
    """Seconds of ``depinduce parse`` over the file (its first ``limit`` sentences), timed as
    ``scripts/bench_parse.py`` does (fresh sentences read before the clock starts)."""
    sentences = read_sentences(path, fmt="conllu")[:limit]
    request = ParseRequest(fmt=fmt, decoder=decoder, batch_size=batch_size)
    started = time.perf_counter()
    for k in range(0, len(sentences), batch_size):
        list(parse(sentences[k : k + batch_size], backend, request, progress=False))
    return time.perf_counter() - started


# ----------------------------------------------------------------------------------------------- the agreement


@torch.no_grad()
def max_differences(model_name: str, backend: Any, model: Any, ids: list[list[int]]) -> dict[str, float]:
    """Largest absolute difference between the two implementations over the given 1-sentence batches: the
    head distribution (diagonal zero in both), StructFormer's calibrated distances (the n−1 between words) and
    heights, and the final hidden states (after the last LayerNorm)."""
    worst: dict[str, float] = {}

    def note(name: str, a: torch.Tensor, b: torch.Tensor) -> None:
        worst[name] = max(worst.get(name, 0.0), float((a.float() - b.float()).abs().max()) if a.numel() else 0.0)

    for x in ids:
        n = len(x)
        tokens = torch.LongTensor([x])
        mask = torch.ones_like(tokens, dtype=torch.bool)
        pos = torch.arange(n)[None, :]
        eye = torch.eye(n, dtype=torch.bool)
        if model_name == "structformer":
            ours = backend.structure(tokens, mask)
            _, theirs = model(tokens, pos)
            note("head distribution", ours.parent[0].masked_fill(eye, 0), theirs["head"][0])
            note("distance", ours.distance[0, : n - 1], theirs["distance"][0, : n - 1])
            note("height", ours.height[0], theirs["height"][0])
        else:
            _, theirs = model(tokens, tokens, pos)
            note("head distribution", backend.head_distribution(tokens, mask)[0].masked_fill(eye, 0),
                 theirs["head"][0])
        note("hidden states", backend.encode(tokens, mask)[0], theirs["raw_output"][0])
    return worst


# The decoder of depinduce's that reimplements the authors' test-time decoding (their output is compared with it).
SAME_DECODER = {"structformer": "structformer-argmax", "udgn": "udgn-tree"}


def authors_heads(model_name: str, parsed: list[Any]) -> list[int]:
    """The authors' dependency output as heads (1-based, 0 = ROOT): StructFormer's loop gives them so; UDGN's
    ``dms`` gives 0-based heads with a root pointing at itself."""
    if model_name == "structformer":
        return [int(h) for h in parsed[1]]
    return [0 if int(h) == i else int(h) + 1 for i, h in enumerate(parsed[0])]


@torch.no_grad()
def decoded_agreement(model_name: str, backend: Any, parse_one: Callable[..., list[Any]], words: list[list[str]],
                      ids: list[list[int]]) -> int:
    """In how many of the sentences the authors' parse has exactly the heads of depinduce's own reimplementation
    of their decoder (``SAME_DECODER``) on depinduce's scores."""
    own = backend.own_decoders[SAME_DECODER[model_name]]
    same = 0
    for sen, x in zip(words, ids):
        tokens = torch.LongTensor([x])
        scores = backend.score_tensors(tokens, torch.ones_like(tokens, dtype=torch.bool))[0]
        same += own.decode(scores) == authors_heads(model_name, parse_one(sen, x))
    return same


# ------------------------------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(REQUIRED), required=True)
    parser.add_argument("--authors", type=Path, required=True, help="the authors' checkout (see above)")
    parser.add_argument("--run", required=True, help="depinduce run directory of that model (model.pt)")
    parser.add_argument("--input", required=True, help="CoNLL-U file to parse")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="alternating measurements of each side")
    parser.add_argument("--batch-size", type=int, default=32, help="depinduce's batch (bench_parse.py's default)")
    parser.add_argument("--decoder", default="mst", help="depinduce's decoder (bench_parse.py's default: mst)")
    parser.add_argument("--fmt", default="conllu", choices=OUTPUT_FORMATS,
                        help="depinduce's output format (conllu: dependencies only; jsonl: and constituents)")
    parser.add_argument("--check", type=int, default=20, help="sentences on which the two models are compared")
    parser.add_argument("--limit", type=int, default=None, help="time the first N sentences only (a short run)")
    args = parser.parse_args()

    for name in ("threads", "rounds", "batch_size", "check", "limit"):
        if getattr(args, name) is not None and getattr(args, name) < (0 if name == "check" else 1):
            fail(f"--{name.replace('_', '-')} must be at least {0 if name == 'check' else 1}")
    root = checkout_root(args.model, args.authors)
    decoder = authors_decoder_module(args.model, root)
    torch.set_num_threads(args.threads)
    try:
        backend = load_model(args.run)
        if backend.name != args.model:
            fail(f"{args.run}: a {backend.name} run, not {args.model}")
        check_request(backend, ParseRequest(fmt=args.fmt, decoder=args.decoder, batch_size=args.batch_size))
        model = authors_model(args.model, backend, root)
        backend.eval()
        sentences, words, ids = model_view(args.input, backend, args.limit)
    except DepinduceError as exc:
        fail(str(exc))
    if not any(words):
        fail(f"{args.input}: no sentence with words for the model")
    tokens = sum(len(s.words) for s in sentences)
    checked = [x for x in ids if x][: args.check]
    differences = max_differences(args.model, backend, model, checked)
    print(json.dumps(cpu_description()))
    print(f"{args.model}: {args.run} on {args.input}: {len(sentences)} sentences, {tokens} tokens "
          f"({sum(map(len, words))} words for the model); {args.threads} thread(s)")
    print(f"max abs difference over {len(checked)} sentences: "
          + ", ".join(f"{name} {value:.2e}" for name, value in differences.items()))

    parse_one = authors_parse_function(args.model, model, decoder, backend)
    checked_words = [w for w in words if w][: args.check]
    agreeing = decoded_agreement(args.model, backend, parse_one, checked_words, checked)
    print(f"the authors' heads = depinduce's {SAME_DECODER[args.model]} heads in {agreeing} of {len(checked)} "
          "sentences")
    time_authors(parse_one, words[:32], ids[:32])  # warm-up: allocator, kernels
    time_depinduce(args.input, backend, args.batch_size, args.decoder, args.fmt, 32)
    seconds: dict[str, list[float]] = {"authors": [], "depinduce": []}
    for round_index in range(args.rounds):
        order = ("authors", "depinduce") if round_index % 2 == 0 else ("depinduce", "authors")
        for side in order:
            if side == "authors":
                seconds[side].append(time_authors(parse_one, words, ids))
            else:
                seconds[side].append(
                    time_depinduce(args.input, backend, args.batch_size, args.decoder, args.fmt, args.limit))
            print(f"round {round_index + 1}: {side:9s} {seconds[side][-1]:6.2f} s  "
                  f"{len(sentences) / seconds[side][-1]:7.1f} sentences/s  {tokens / seconds[side][-1]:8,.0f} tokens/s")
    median = {side: statistics.median(values) for side, values in seconds.items()}
    summary = {"model": args.model, **cpu_description(), "threads": args.threads, "rounds": args.rounds,
               "sentences": len(sentences), "limit": args.limit, "tokens": tokens, "depinduce_decoder": args.decoder,
               "depinduce_batch_size": args.batch_size, "max_abs_difference": differences,
               "same_heads": f"{agreeing}/{len(checked)}"}
    for side in ("authors", "depinduce"):
        summary[side] = {"sentences_per_s": round(len(sentences) / median[side], 1),
                         "tokens_per_s": round(tokens / median[side]),
                         "sentences_per_s_all": [round(len(sentences) / s, 1) for s in seconds[side]]}
        print(f"median {side:9s} {summary[side]['sentences_per_s']:7.1f} sentences/s  "
              f"{summary[side]['tokens_per_s']:8,} tokens/s")
    summary["speed_ratio"] = round(median["authors"] / median["depinduce"], 2)
    print(f"ratio depinduce / authors: {summary['speed_ratio']:.2f}x")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
