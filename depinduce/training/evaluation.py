"""Parsing metrics on the dev split during training, through the same code as ``depinduce parse`` + ``eval``.

The dev sentences are parsed by :func:`depinduce.pipeline.parse` (punctuation hidden from the model, the
configured decoder, punctuation re-attached) and scored by :func:`depinduce.metrics.evaluate` against the gold
``dev.conllu`` (DDA, UDA, root accuracy) and, for the PTB, against ``dev.trees`` (sentence- and corpus-level
UF1).  Model selection on these numbers therefore agrees with what a user measures on the saved model.  Where a
bracket parse would give exactly the subtrees of the decoded heads, UF1 is read off the one dependency parse
(:func:`trees_from_heads`) instead of parsing dev.trees again.
LAS is reported for backends that predict labels (supervised ones) only: for the others the parse pipeline
writes ``root``/``dep`` labels, so it would measure nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from depinduce.data.punct import sentence_punct_mask
from depinduce.io.filenames import DEV_CONLLU, DEV_TREES
from depinduce.structures.dependency import reattach, subtree_spans
from depinduce.structures.sentence import Sentence
from depinduce.structures.spans import spans_to_tree
from depinduce.errors import RecipeError
from depinduce.io import read_sentences
from depinduce.metrics import evaluate
from depinduce.io.initial_graphs import InitialGraph
from depinduce.training.config import CONSTITUENCY_METRICS, DEPENDENCY_METRICS, LABELLED_METRICS
from depinduce.models.base import Backend

PARSE_BATCH = 64


@dataclass
class DevTreebank:
    """Gold dev annotation, when the data folder has it: dependency trees and/or constituency trees."""

    dependencies: list[Sentence] | None = None
    trees: list[Sentence] | None = None
    folder: Path | None = None  # the data folder, named in errors about its sentences

    def source(self, name: str) -> str:
        """How an error names the dev file ``name`` (``dev.conllu``, ``dev.trees``): its path."""
        return name if self.folder is None else str(self.folder / name)

    @classmethod
    def load(cls, data_dir: Path) -> "DevTreebank":
        conllu, trees = data_dir / DEV_CONLLU, data_dir / DEV_TREES
        dependencies = read_sentences(conllu, fmt="conllu") if conllu.is_file() else None
        constituents = read_sentences(trees, fmt="brackets") if trees.is_file() else None
        if dependencies is not None and not any(s.heads for s in dependencies):
            dependencies = None
        if constituents is not None and not any(s.tree is not None for s in constituents):
            constituents = None
        return cls(dependencies or None, constituents or None, data_dir)

    def available(self, backend: type[Backend] | Backend) -> set[str]:
        """The dev metrics this gold annotation and this backend's capabilities allow."""
        caps = backend.capabilities
        out: set[str] = set()
        if self.dependencies and caps.dependency:
            out |= DEPENDENCY_METRICS
            if caps.supervised:
                out |= LABELLED_METRICS
        # dev.trees has words and Penn tags only: a backend that reads whole sentences (every token with its UPOS)
        # cannot parse it, and its trees cannot be read off the dependency parse (:func:`trees_from_heads`)
        if self.trees and (caps.constituency or caps.dependency) and not caps.whole_sentences:
            out |= CONSTITUENCY_METRICS
        return out


def _length_order(sentences: list[Sentence]) -> list[int]:
    """Similar lengths in one parse batch pad less; corpus metrics do not depend on sentence order."""
    return sorted(range(len(sentences)), key=lambda k: len(sentences[k].words))


def _parsed(sentences: list[Sentence], backend: Backend, request: Any, *, what: str, progress: bool,
            init: list[InitialGraph] | None = None) -> None:
    """Parse ``sentences`` in place, with a bar on stderr when ``progress`` (a slow backend's dev evaluation takes
    minutes; training's own bar stands still meanwhile)."""
    from depinduce.pipeline import parse  # the parse pipeline pulls in every decoder

    # on a terminal only: in a log file a second bar's cursor moves would be noise around the status lines
    with tqdm(total=len(sentences), desc=f"dev evaluation ({what})", unit="sent", file=sys.stderr, leave=False,
              disable=not (progress and sys.stderr.isatty()), mininterval=0.5) as bar:
        for _ in parse(sentences, backend, request, progress=False, init=init):
            bar.update(1)


def parsing_metrics(backend: Backend, dev: DevTreebank, *, decoder: str,
                    init: list[InitialGraph] | None = None, progress: bool = False) -> dict[str, float | None]:
    """Parse the dev sentences with ``backend`` and score them; keys as in ``metrics.jsonl`` (``dev_uda``...).

    ``init``: initial graphs of the dev sentences (in dev.conllu order) for a refining backend; ``progress``: a
    bar on stderr."""
    from depinduce.pipeline import ParseRequest

    out: dict[str, float | None] = {}
    wanted = dev.available(backend)
    if not wanted:
        return out
    trees: dict[int, Sentence] | None = None  # dev.trees index -> predicted tree, when read off the heads
    if dev.dependencies and "dev_uda" in wanted:
        order = _length_order(dev.dependencies)
        gold = [dev.dependencies[k] for k in order]
        pred = [Sentence(words=list(s.words), xpos=s.xpos, upos=s.upos, metadata=dict(s.metadata),
                         sent_id=s.sent_id, line=s.line) for s in gold]
        hidden = [sentence_punct_mask(s) for s in pred]  # before the parse marks punctuation in UPOS
        _parsed(pred, backend, ParseRequest(fmt="conllu", decoder=decoder, batch_size=PARSE_BATCH,
                                            source=dev.source(DEV_CONLLU)),
                what="dependencies", progress=progress, init=None if init is None else [init[k] for k in order])
        if dev.trees and "dev_uf1" in wanted and init is None:
            trees = trees_from_heads(backend, dict(zip(order, zip(pred, hidden))), dev.trees)
        metrics = evaluate(gold, pred, gold_path=dev.source(DEV_CONLLU), pred_path="model").metrics()
        out.update(dev_dda=metrics["dda"], dev_uda=metrics["uda"], dev_root_accuracy=metrics["root_accuracy"],
                   dev_well_formed=metrics["well_formed"])
        if "dev_las" in wanted:
            out["dev_las"] = metrics["las"]
    if dev.trees and "dev_uf1" in wanted:
        tree_order = _length_order(dev.trees)
        gold = [dev.trees[k] for k in tree_order]
        if trees is not None:
            pred = [trees[k] for k in tree_order]
        else:
            pred = [_tree_input(s) for s in gold]
            _parsed(pred, backend, ParseRequest(fmt="brackets", decoder=decoder, batch_size=PARSE_BATCH,
                                                source=dev.source(DEV_TREES)),
                    what="trees", progress=progress)
        metrics = evaluate(gold, pred, gold_path=dev.source(DEV_TREES), pred_path="model").metrics()
        out.update(dev_uf1=metrics["uf1_sentence"], dev_uf1_corpus=metrics["uf1_corpus"])
    return out


def _tree_input(gold: Sentence) -> Sentence:
    """What the bracket parse of a dev.trees sentence is given: its words and Penn tags."""
    return Sentence(words=list(gold.words), xpos=gold.xpos, metadata={"punct_rule": "ptb"}, line=gold.line)


def trees_from_heads(backend: Backend, parsed: dict[int, tuple[Sentence, list[bool]]],
                     gold_trees: list[Sentence]) -> dict[int, Sentence] | None:
    """The trees a bracket parse of ``gold_trees`` would give, read off the dependency parse of the same sentences
    (``parsed``: dev.conllu index -> parsed sentence and its hidden-punctuation mask), so the dev set is scored
    once; None where the two parses could differ.

    They agree when the backend builds its bracket trees from the decoded heads (dependency-only: the pipeline's
    tree is then the subtree spans of the heads over the visible words) and each bracket sentence gives it what
    the CoNLL-U sentence shows it — the same visible words (dev.trees has no punctuation), and the same Penn tags
    for a backend that reads tags.  A backend that reads whole sentences (their UPOS, which dev.trees lacks)
    keeps two parses."""
    caps = backend.capabilities
    if caps.constituency or not caps.dependency or caps.whole_sentences or len(parsed) != len(gold_trees):
        return None
    out: dict[int, Sentence] = {}
    for k, (sentence, hidden) in parsed.items():
        tree_input = _tree_input(gold_trees[k])
        keep = [not h for h in hidden]
        if any(sentence_punct_mask(tree_input)) or _kept(sentence.words, keep) != tree_input.words:
            return None
        if caps.reads_tags and _kept(sentence.xpos, keep) != tree_input.xpos:
            return None
        assert sentence.heads is not None
        tree_input.tree = spans_to_tree(tree_input.words, subtree_spans(reattach(sentence.heads, keep)))
        out[k] = tree_input
    return out


def _kept(values: list[str] | None, keep: list[bool]) -> list[str] | None:
    return None if values is None else [v for v, k in zip(values, keep) if k]


def check_selectable(select: str, available: set[str], *, has_dev_text: bool) -> None:
    """A one-line error when ``select`` names a metric this run cannot compute."""
    if select in ("dev_loss", "dev_ppl") and not has_dev_text:
        raise RecipeError(f"select: {select} needs dev.txt in the data folder")
    if select.startswith("dev_") and select not in ("dev_loss", "dev_ppl") and select not in available:
        raise RecipeError(
            f"select: {select} needs gold dev trees this run cannot score "
            f"(available parsing metrics: {', '.join(sorted(available)) or 'none'})"
        )
