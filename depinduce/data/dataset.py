"""A preprocessed dataset's contents, from rendered sentences to files: the filters (no words, ``max_length``),
the training view (train split, ``--train-on`` splits, ``--extra-text`` minus dev/test overlap), the vocabulary,
the short set and the manifest (see :mod:`depinduce.data.preprocess` for what each file holds)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from depinduce.data.normalize import overlap_key
from depinduce.data.ptb import SPLITS
from depinduce.data.punct import PunctRule
from depinduce.data.rendering import PreprocessOptions, Rendered, render
from depinduce.data.staging import staged_output, write_lines, write_manifest
from depinduce.data.text import check_pretokenized, read_nltk_corpus, read_pretokenized_file, read_text_file
from depinduce.data.vocab import SPECIALS, Vocab
from depinduce.errors import UsageError
from depinduce.io.filenames import MANIFEST_FILE, TRAIN_TXT, VOCAB_FILE
from depinduce.io.lines import display_name
from depinduce.structures.sentence import Sentence
from depinduce.version import __version__

SHORT_MAX_WORDS = 10

Log = Callable[[str], None]


def quiet(_: str) -> None:
    """The default log: say nothing (the CLI passes a function that writes to stderr)."""


@dataclass
class Dataset:
    """Rendered gold sentences per split and what the manifest says about where they came from."""

    command: str
    source: dict[str, object]
    splits: dict[str, list[Rendered]]
    rule: PunctRule
    short_name: str
    trees: bool
    notes: list[str] = field(default_factory=list)
    train_on: tuple[str, ...] = ()
    pretokenized_extra: bool = False


def filter_rendered(items: list[Rendered], max_length: int | None) -> tuple[list[Rendered], dict[str, int]]:
    """Drop sentences without words and, when ``max_length`` is given, longer ones; count both."""
    kept = [r for r in items if r.view]
    counts = {"read": len(items), "dropped_no_words": len(items) - len(kept)}
    if max_length is not None:
        short = [r for r in kept if len(r.view) <= max_length]
        counts["dropped_too_long"] = len(kept) - len(short)
        kept = short
    return kept, counts


def write_dataset(out: Path, dataset: Dataset, options: PreprocessOptions, log: Log = quiet) -> dict[str, object]:
    """Write every output of ``dataset`` into ``out`` (atomically); returns the manifest."""
    options.validate()
    splits: dict[str, list[Rendered]] = {}
    counts: dict[str, dict[str, int]] = {}
    for split, items in dataset.splits.items():
        splits[split], counts[split] = filter_rendered(items, options.max_length if split == "train" else None)
    held_out = [r for split in ("dev", "test") for r in splits.get(split, [])]
    extra, extra_counts = _extra_text_views(options, held_out, log, pretokenized=dataset.pretokenized_extra)
    borrowed, borrowed_counts = _borrowed_views(splits, dataset.train_on, options.max_length)
    counts.setdefault("train", {}).update({**borrowed_counts, **extra_counts})
    train_views = [r.view for r in splits.get("train", [])] + borrowed + extra
    if not train_views:
        raise UsageError("the training view has no sentence left after filtering; nothing to learn from")
    vocab = Vocab.build(train_views, min_freq=options.min_freq, max_vocab=options.max_vocab,
                        normalization=options.normalization)
    short = [r for split in SPLITS for r in splits.get(split, []) if 1 <= r.words <= SHORT_MAX_WORDS]

    with staged_output(out, options.force) as tmp:
        for split, items in splits.items():
            views = train_views if split == "train" else [r.view for r in items]
            _write_forms(tmp, split, items, views, trees=dataset.trees, nopunct=not options.keep_punct)
            counts[split].update(_split_counts(items, views, vocab))
        if "train" not in splits:
            write_lines(tmp / TRAIN_TXT, (" ".join(v) for v in train_views))
            counts["train"].update(_split_counts([], train_views, vocab))
        _write_forms(tmp, dataset.short_name, short, [r.view for r in short], trees=dataset.trees,
                     nopunct=not options.keep_punct)
        vocab.save(tmp / VOCAB_FILE)
        write_manifest(tmp, {
            "depinduce_version": __version__,
            "command": dataset.command,
            "source": dataset.source,
            "options": options.as_dict(),
            "punct_rule": dataset.rule,
            "splits": counts,
            "missing_splits": [s for s in SPLITS if s not in dataset.splits],
            "short_set": {"name": dataset.short_name, "max_words": SHORT_MAX_WORDS, "sentences": len(short)},
            "vocab": {"size": len(vocab), "words": len(vocab) - len(SPECIALS)},
            "training_view": dataset.source.get("training_view")
                             or training_view(dataset.splits, (), options.extra_text, options.extra_corpora),
            "notes": dataset.notes,
        })
    for split, c in counts.items():
        log(f"{split}: {c['sentences']} sentences, {c['words']} words in the model's view")
    log(f"{dataset.short_name}: {len(short)} sentences; vocabulary: {len(vocab)} entries; written to {out}")
    return json.loads((out / MANIFEST_FILE).read_text(encoding="utf-8"))


def _write_forms(
    tmp: Path, name: str, items: Sequence[Rendered], views: Sequence[Sequence[str]], *, trees: bool, nopunct: bool
) -> None:
    """``name.conllu`` (gold sentences), ``name.nopunct.conllu`` (their punctuation-free trees, unless punctuation
    is kept), ``name.trees`` (when the corpus has trees) and ``name.txt`` (views)."""
    with (tmp / f"{name}.conllu").open("w", encoding="utf-8", newline="\n") as stream:
        for r in items:
            stream.write(r.conllu or "")
    if nopunct:
        with (tmp / f"{name}.nopunct.conllu").open("w", encoding="utf-8", newline="\n") as stream:
            for r in items:
                stream.write(r.conllu_nopunct or "")
    if trees:
        write_lines(tmp / f"{name}.trees", (r.tree or "" for r in items))
    write_lines(tmp / f"{name}.txt", (" ".join(v) for v in views))


def _split_counts(items: Sequence[Rendered], views: Sequence[Sequence[str]], vocab: Vocab) -> dict[str, int]:
    return {
        "sentences": len(views),
        "gold_sentences": len(items),
        "tokens": sum(r.tokens for r in items),
        "words": sum(len(v) for v in views),
        "unknown_words": sum(1 for v in views for w in v if w not in vocab),
        "nopunct_roots_repaired": sum(r.repaired_root for r in items),
    }


def _borrowed_views(
    splits: dict[str, list[Rendered]], train_on: Sequence[str], max_length: int | None
) -> tuple[list[list[str]], dict[str, int]]:
    """The views of the ``--train-on`` splits, as training sees them (``max_length`` applies), and their counts."""
    if not train_on:
        return [], {}
    views = [r.view for split in train_on for r in splits[split]]
    kept = [v for v in views if max_length is None or len(v) <= max_length]
    return kept, {"train_on_sentences": len(kept), "train_on_dropped_too_long": len(views) - len(kept)}


def _read_extra_text(path: str, options: PreprocessOptions, pretokenized: bool) -> list[Sentence]:
    """One ``--extra-text`` file: pre-tokenised lines (scripts without spaces) or raw text, checked either way."""
    if pretokenized:
        return read_pretokenized_file(path)
    sentences = read_text_file(path, one_per_line=options.one_per_line)
    check_pretokenized(sentences, display_name(path))
    return sentences


def _extra_text_views(
    options: PreprocessOptions, held_out: Sequence[Rendered], log: Log, *, pretokenized: bool = False
) -> tuple[list[list[str]], dict[str, int]]:
    """Views of the ``--extra-text`` sentences (and of the NLTK corpora of ``extra_corpora``, tokenised by their
    makers) that occur in neither dev nor test, and what was removed."""
    if not options.extra_text and not options.extra_corpora:
        return [], {}
    keys = {r.key for r in held_out}
    sentences = [s for path in options.extra_text for s in _read_extra_text(path, options, pretokenized)]
    for corpus in options.extra_corpora:
        log(f"extra text: NLTK's {corpus} corpus")
        sentences += read_nltk_corpus(corpus)
    fresh = [s for s in sentences if overlap_key(s.words) not in keys]
    views, counts = filter_rendered([render(s, "shape", options, gold=False) for s in fresh], options.max_length)
    log(f"extra text: {len(sentences)} sentences read, {len(sentences) - len(fresh)} removed because they occur "
        "in dev or test")
    return [r.view for r in views], {
        "extra_text_read": len(sentences),
        "extra_text_removed_overlap": len(sentences) - len(fresh),
        "extra_text_dropped_no_words": counts["dropped_no_words"],
        "extra_text_dropped_too_long": counts.get("dropped_too_long", 0),
        "extra_text_sentences": len(views),
    }


def training_view(files: Mapping[str, object], train_on: Sequence[str], extra_text: Sequence[str],
                  extra_corpora: Sequence[str] = ()) -> dict[str, Any]:
    """Where the training text comes from, as the manifest records it."""
    view = {
        "treebank_train": "train" in files,
        "train_on": list(train_on),
        "extra_text": list(extra_text),
        "transductive": bool(train_on),
    }
    if extra_corpora:
        view["extra_corpora"] = list(extra_corpora)
    return view

