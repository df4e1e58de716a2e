"""The parse pipeline: input → hide punctuation → backend scores → shared decoders → full-token trees.

Unsupervised backends only ever see the visible (non-punctuation) words — punctuation by the one rule that
``eval`` removes by too (:func:`depinduce.data.punct.sentence_punct_mask`); a backend that reads whole sentences
(``capabilities.whole_sentences``: RNGTr, trained on every token with its UPOS) gets the full sentences, and
optionally an initial graph each to refine.  Everything after their scores is done here, once, so every backend
gets every decoder and output format:

- dependencies: the chosen decoder over the head scores (``argmax`` takes the highest word as the root when the
  backend gives word heights, StructFormer's own decoder), then punctuation re-attached by
  :func:`depinduce.structures.dependency.attach_hidden` (final punctuation → the root word, any other → the
  nearest word before it, or after it at the start of the sentence); labels, when the backend scores them, are
  each word's best label under its decoded head (otherwise ``root``/``dep``); CoNLL-U input loses its enhanced
  graph (DEPS, empty nodes), gold annotation that the prediction does not have;
- constituency: the top-down tree from split distances when the backend has them, else the subtree spans of the
  dependency tree; visible spans are mapped back onto the full token sequence, so a punctuation token becomes a
  leaf of the lowest constituent that covers both of its neighbours.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import conllu.models
import torch
from tqdm import tqdm

from depinduce.data.punct import sentence_punct_mask
from depinduce.structures.sentence import Sentence
from depinduce.data.tokenize import tokenize_line
from depinduce.errors import InputError, ModelError, UsageError
from depinduce.io.conllu_format import without_enhanced_graph
from depinduce.io.initial_graphs import InitialGraph
from depinduce.io.lines import display_name
from depinduce.io.lines import read_text as read_lines_text
from depinduce.io.parse_defaults import DEFAULT_MAX_WORDS, OUTPUT_FORMATS, PROBS_FORMATS
from depinduce.models.base import Backend, ParseScores
from depinduce.structures.decode import DECODERS, decode_batch
from depinduce.structures.dependency import attach_hidden, subtree_spans
from depinduce.structures.spans import (
    binary_tree_from_distances,
    labelled_spans,
    nary_tree_from_distances,
    spans_to_tree,
)

DEPENDENCY_FORMATS = ("conllu", "conllx")
# Pictures draw the heads and, where the model induces one, its own tree (never one derived from the heads).
PICTURE_FORMATS = ("html", "svg")


def read_text(path: str, *, pretokenized: bool = False,
              on_blank: Callable[[list[int]], None] | None = None) -> list[Sentence]:
    """One sentence per line; blank lines are skipped and ``sent_id`` is the input line number.

    ``on_blank`` receives the numbers of the blank lines (when there are any), so the caller can warn that the
    output no longer lines up with the input line for line.

    Each sentence carries a conllu TokenList as ``source`` with ``SpaceAfter=No`` where the text had no space, so
    the CoNLL-U writer reproduces ``# text`` exactly.
    """
    label = display_name(path)
    sentences: list[Sentence] = []
    blank: list[int] = []
    for lineno, raw_line in enumerate(read_lines_text(path).split("\n"), start=1):
        line = raw_line.strip()
        if not line:
            blank.append(lineno)
            continue
        sentences.append(text_sentence(line, lineno, pretokenized=pretokenized, label=label))
    if blank and blank[-1] == lineno and raw_line == "":
        blank.pop()  # the final newline ends the last line; it is not a blank line
    if not sentences:
        raise InputError(label, None, "no sentences (the input is empty or blank)")
    if blank and on_blank is not None:
        on_blank(blank)
    return sentences


def text_sentence(line: str, lineno: int, *, pretokenized: bool = False, label: str = "<input>") -> Sentence:
    """One line of text (already stripped, not blank) as a sentence, tokenised as ``parse`` tokenises text.

    Shared by :func:`read_text` and the Python API, so a string parsed from a notebook gets exactly the tokens,
    ``sent_id`` and ``SpaceAfter`` the command line gives the same line of a file."""
    try:
        tokens = tokenize_line(line, pretokenized=pretokenized)
    except ValueError as exc:
        raise InputError(label, lineno, str(exc)) from exc
    return tokens_sentence(tokens.forms, tokens.space_after, sent_id=str(lineno), text=line, line=lineno)


def tokens_sentence(forms: Sequence[str], space_after: Sequence[bool], *, sent_id: str, text: str,
                    line: int | None = None) -> Sentence:
    """A tokenised sentence whose ``source`` is a conllu TokenList with ``SpaceAfter=No`` where the text had no
    space, so the CoNLL-U writer reproduces ``# text`` exactly."""
    source = conllu.models.TokenList(
        [
            conllu.models.Token(
                id=i,
                form=form,
                lemma="_",
                upos=None,
                xpos=None,
                feats=None,
                head=None,
                deprel=None,
                deps=None,
                misc=None if space else {"SpaceAfter": "No"},
            )
            for i, (form, space) in enumerate(zip(forms, space_after), start=1)
        ],
        metadata={"sent_id": sent_id, "text": text},
    )
    return Sentence(words=list(forms), sent_id=sent_id, text=text, line=line, source=source)


def check_whole_sentence_input(backend: Backend, sentences: Sequence[Sentence], label: str) -> None:
    """A backend that reads UPOS with the words (RNGTr) needs a tag on every token: refuse the first without."""
    if not backend.capabilities.whole_sentences:
        return
    for sentence in sentences:
        tags = sentence.upos or ["_"] * len(sentence.words)
        missing = next((k for k, tag in enumerate(tags) if tag in ("_", "")), None)
        if missing is not None:
            raise InputError(label, sentence.line, f"token {missing + 1} ({sentence.words[missing]!r}) of the "
                                                   f"sentence starting here has no UPOS ('_'); model "
                                                   f"'{backend.name}' reads UPOS from the input")


def needs_conllu_message(backend: Backend) -> str:
    """Why text input is refused for a backend that reads UPOS tags (the CLI and the API say the same)."""
    return (f"model '{backend.name}' reads UPOS tags with the words: give CoNLL-U input "
            "(--input-format conllu)")


def describe_blank_lines(label: str, lines: Sequence[int]) -> str:
    """The one-line warning for blank input lines (shown by ``parse``)."""
    shown = ", ".join(map(str, lines[:10])) + (f", … ({len(lines)} in all)" if len(lines) > 10 else "")
    return (f"warning: {label}: line{'s' if len(lines) > 1 else ''} {shown} held no sentence and "
            f"{'were' if len(lines) > 1 else 'was'} skipped; the output has one sentence per non-blank line "
            "(sent_id = its input line number in the full UD form)")


def mark_punctuation(sentence: Sentence, hidden: Sequence[bool]) -> None:
    """Tokens hidden from the model as punctuation get DEPREL ``punct`` (unless they are the root) and, where
    the input gave no part of speech, UPOS ``PUNCT`` — so MaltEval (``--ExcludeDeprels punct``) and UD tools
    can leave out exactly what depinduce left out."""
    if not any(hidden):
        return
    n = len(sentence.words)
    upos = list(sentence.upos) if sentence.upos is not None else ["_"] * n
    source_words = []
    if isinstance(sentence.source, conllu.models.TokenList):
        source_words = [t for t in sentence.source if isinstance(t.get("id"), int)]
        if len(source_words) != n:
            source_words = []
    for i, is_hidden in enumerate(hidden):
        if not is_hidden:
            continue
        if upos[i] in ("", "_", "X"):
            upos[i] = "PUNCT"
        if source_words and source_words[i].get("upos") in (None, "", "_", "X"):
            source_words[i]["upos"] = "PUNCT"
        if sentence.deprels is not None and sentence.heads is not None and sentence.heads[i] != 0:
            sentence.deprels[i] = "punct"
    sentence.upos = upos


@dataclass(frozen=True)
class ParseRequest:
    """What the user asked ``parse`` for."""

    fmt: str = "conllu"
    decoder: str = "mst"
    batch_size: int = 32
    # Longest sentence (in the words the backend sees) a score-matrix backend is given: its memory grows with the
    # square of the length, so a longer one is refused in one line before memory runs out.  None: no limit.
    max_words: int | None = DEFAULT_MAX_WORDS
    # The input's name, for errors located as FILE:LINE.
    source: str = "<input>"
    # Each word's head distribution (``--probs``), read as ``Backend.head_probs`` says, into Sentence.head_probs.
    probs: bool = False


def decoders_for(backend: Backend) -> tuple[str, ...]:
    """The decoders ``parse --decoder`` accepts for this backend: the shared ones, then its own (the authors')."""
    return (*DECODERS, *backend.own_decoders)


def check_request(backend: Backend, request: ParseRequest) -> None:
    """Refuse impossible combinations before any work is done."""
    caps = backend.capabilities
    if request.decoder not in decoders_for(backend):
        raise UsageError(f"decoder '{request.decoder}' does not apply to model '{backend.name}'; choose one of "
                         f"{', '.join(decoders_for(backend))} (`depinduce models` lists each backend's own)")
    if request.fmt not in OUTPUT_FORMATS:
        raise UsageError(f"unknown output format '{request.fmt}'; choose one of {', '.join(OUTPUT_FORMATS)}")
    if request.fmt in DEPENDENCY_FORMATS and not caps.dependency:
        raise ModelError(
            f"model '{backend.name}' induces constituency only and cannot write {request.fmt}; "
            "use --format brackets (or jsonl)"
        )
    if not (caps.dependency or caps.constituency):
        raise ModelError(f"model '{backend.name}' produces neither dependencies nor constituency")
    if request.probs:
        check_probs(backend, request.fmt)


def check_probs(backend: Backend, fmt: str) -> None:
    """``--probs`` needs a model that computes a head distribution and a format that can carry it."""
    if backend.head_probs == "none" or not backend.capabilities.dependency:
        what = "its trees come from split scores, not heads" if not backend.capabilities.dependency else "none"
        raise ModelError(f"model '{backend.name}' computes no head distribution ({what}); --probs applies to "
                         "dmv, probformer, udgn, structformer, rngtr and the baselines")
    if fmt not in PROBS_FORMATS:
        raise UsageError(f"--probs writes to {' or '.join(f'--format {f}' for f in PROBS_FORMATS)}, not {fmt}")


def full_head_probs(backend: Backend, scores: ParseScores, visible_heads: Sequence[int],
                    hidden: Sequence[bool]) -> list[list[float] | None]:
    """Each token's head distribution over ROOT and every token, from the distribution the model computed over
    ROOT and the visible words (or probability 1 for the decoded head where the backend computes none); a
    hidden token (punctuation, attached by rule) gets None."""
    m = len(visible_heads)
    if backend.head_probs == "decoded":
        visible = torch.zeros((m, m + 1), dtype=torch.float64)
        visible[torch.arange(m), torch.as_tensor(list(visible_heads), dtype=torch.long)] = 1.0
    else:
        visible = backend.word_head_probs(scores).double().cpu()
    positions = [0] + [i + 1 for i, h in enumerate(hidden) if not h]  # visible index -> token index (0 = ROOT)
    full = torch.zeros((m, len(hidden) + 1), dtype=torch.float64)
    full[:, positions] = visible
    rows = iter(full.tolist())
    return [None if h else next(rows) for h in hidden]


def check_refines(backend: Backend) -> None:
    """Initial graphs (``--init``) are for refining backends only."""
    if not backend.capabilities.refines:
        raise ModelError(f"model '{backend.name}' does not refine a graph; --init applies to refining "
                         "backends (rngtr)")


def _full_tree(sentence: Sentence, hidden: Sequence[bool], visible: list[str], scores: ParseScores):
    """The constituency tree over every token, from distances if present (tied maxima as ``split_ties`` says),
    else from the dependency tree."""
    if scores.distances is not None:
        from_distances = nary_tree_from_distances if scores.split_ties else binary_tree_from_distances
        visible_tree = from_distances(visible, scores.distances.tolist())
        positions = [i for i, h in enumerate(hidden) if not h]
        # the visible sentence's own span becomes the whole-token root, which spans_to_tree always adds
        spans = [
            (positions[a], positions[b - 1] + 1)
            for _, a, b in labelled_spans(visible_tree)
            if (a, b) != (0, len(visible))
        ]
        return spans_to_tree(sentence.words, spans)
    if sentence.heads is None:
        raise ModelError(f"model produced neither distances nor heads for sentence {sentence.sent_id}")
    return spans_to_tree(sentence.words, subtree_spans(sentence.heads))


def _labels(scores: ParseScores, heads: Sequence[int]) -> list[str]:
    """Each word's best label under the head the decoder chose for it."""
    assert scores.labels is not None and scores.label_names is not None
    rows = torch.arange(1, len(heads) + 1)
    best = scores.labels[rows, torch.as_tensor(heads, dtype=torch.long)].argmax(dim=-1).tolist()
    return [scores.label_names[k] for k in best]


def visible_sentence(sentence: Sentence, hidden: Sequence[bool]) -> Sentence:
    """The tokens the model sees, with their UPOS/XPOS, for a backend that reads tags (``reads_tags``)."""
    def cut(values: Sequence[str] | None) -> list[str] | None:
        return None if values is None else [v for v, h in zip(values, hidden) if not h]

    return Sentence(words=cut(sentence.words) or [], upos=cut(sentence.upos), xpos=cut(sentence.xpos),
                    sent_id=sentence.sent_id, line=sentence.line)


def _apply(sentences: list[Sentence], backend: Backend, request: ParseRequest,
           init: Sequence[InitialGraph | None] | None = None) -> None:
    """Fill heads/deprels/tree of one batch in place."""
    whole = backend.capabilities.whole_sentences
    if whole:  # the backend reads every token (and its tags) itself: nothing is hidden from it
        hidden = [[False] * len(s) for s in sentences]
    else:
        hidden = [sentence_punct_mask(s) for s in sentences]
    visible = [[w for w, h in zip(s.words, mask) if not h] for s, mask in zip(sentences, hidden)]
    nonempty = [k for k, words in enumerate(visible) if words]
    if request.max_words is not None and not backend.capabilities.fixed_tree:
        for k in nonempty:
            if len(visible[k]) > request.max_words:
                sentence = sentences[k]
                raise InputError(
                    request.source, sentence.line,
                    f"sentence {sentence.sent_id or k + 1} has {len(visible[k]):,} words for "
                    f"the model; model '{backend.name}' scores every pair of words, so memory grows with the "
                    f"square of the length, and the limit is {request.max_words:,} words (--max-words N raises it)")
    scores: dict[int, ParseScores] = {}
    own = backend.own_decoders.get(request.decoder)
    reads_heads = own is None or own.reads_heads  # else ``heads`` stay unread: a lazy backend never computes them
    if nonempty:
        if whole:
            results = backend.parse_sentences([sentences[k] for k in nonempty],
                                              None if init is None else [init[k] for k in nonempty])
        elif backend.capabilities.reads_tags:  # the visible tokens with their tags (the DMV)
            results = backend.parse_sentences([visible_sentence(sentences[k], hidden[k]) for k in nonempty])
        else:
            results = backend.parse_scores([visible[k] for k in nonempty])
        scores = dict(zip(nonempty, results))
        for k in nonempty:
            _check_finite(scores[k], sentences[k], k, backend, request, heads=reads_heads)
    want_heads = request.fmt != "brackets" or not backend.capabilities.constituency
    want_tree = request.fmt in ("brackets", "jsonl") or (request.fmt in PICTURE_FORMATS
                                                         and backend.capabilities.constituency)
    if want_heads and backend.capabilities.dependency:
        fixed = {k: list(scores[k].fixed_heads) for k in nonempty if scores[k].fixed_heads is not None}
        with_heads = [k for k in nonempty if k not in fixed and (not reads_heads or scores[k].heads is not None)]
        # argmax with word heights (StructFormer): the highest word is the root, as in the paper
        roots = [
            int(scores[k].heights.argmax()) + 1 if scores[k].heights is not None else None for k in with_heads
        ]
        if own is not None:
            decoded = [own.decode(scores[k]) for k in with_heads]
        else:
            decoded = decode_batch([scores[k].heads for k in with_heads], request.decoder, roots)
        visible_heads = {**dict(zip(with_heads, decoded)), **fixed}
        for k, sentence in enumerate(sentences):
            if k in visible_heads or not visible[k]:  # an all-punctuation sentence needs no model
                sentence.heads = attach_hidden(visible_heads.get(k, []), hidden[k])
                if k in visible_heads and scores[k].labels is not None:
                    sentence.deprels = _labels(scores[k], visible_heads[k])
                else:
                    sentence.deprels = ["root" if h == 0 else "dep" for h in sentence.heads]
                if isinstance(sentence.source, conllu.models.TokenList):
                    sentence.source = without_enhanced_graph(sentence.source)
                if request.probs:
                    sentence.head_probs = ([None] * len(sentence) if k not in visible_heads else
                                           full_head_probs(backend, scores[k], visible_heads[k], hidden[k]))
                if not whole:
                    mark_punctuation(sentence, hidden[k])
    if want_tree:
        for k, sentence in enumerate(sentences):
            if not visible[k]:
                sentence.tree = spans_to_tree(sentence.words, [])
            else:
                sentence.tree = _full_tree(sentence, hidden[k], visible[k], scores[k])


def _check_finite(scores: ParseScores, sentence: Sentence, k: int, backend: Backend, request: ParseRequest, *,
                  heads: bool = True) -> None:
    """A sentence's scores must be numbers: NaN (or +infinity) reaching a decoder would be a traceback, or worse a
    tree of whatever shape the decoder falls back to (right-branching brackets, left-branching heads).
    ``heads``: False when the decoder does not read them (they are then neither checked nor computed)."""
    for name in ("heads", "distances", "heights")[0 if heads else 1:]:
        tensor = getattr(scores, name)
        if tensor is None:
            continue
        values = torch.as_tensor(tensor)
        if values.is_floating_point() and (values.isnan().any() or values.isposinf().any()):
            raise ModelError(f"{request.source}:{sentence.line or '?'}: sentence {sentence.sent_id or k + 1}: model "
                             f"'{backend.name}' gave non-finite {name} scores (NaN or infinity), so it cannot be "
                             "parsed; the model's weights or this sentence's length may overflow its numbers")


def parse(
    sentences: Sequence[Sentence], backend: Backend, request: ParseRequest, *, progress: bool = True,
    init: Sequence[InitialGraph | None] | None = None,
) -> Iterator[Sentence]:
    """Parse sentences in batches, yielding each as soon as its batch is done (output streams).

    ``init``: one initial graph per sentence for a refining backend (``parse --init FILE``)."""
    check_request(backend, request)
    if init is not None:
        check_refines(backend)
        if len(init) != len(sentences):
            raise UsageError(f"{len(init)} initial graphs for {len(sentences)} sentences")
    bar = tqdm(total=len(sentences), unit="sent", file=sys.stderr, disable=None if progress else True, leave=False)
    try:
        for start in range(0, len(sentences), request.batch_size):
            batch = list(sentences[start : start + request.batch_size])
            _apply(batch, backend, request,
                   None if init is None else list(init[start : start + request.batch_size]))
            bar.update(len(batch))
            yield from batch
    finally:
        bar.close()
