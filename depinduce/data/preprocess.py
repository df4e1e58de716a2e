"""``preprocess``: turn a treebank or raw text into the files every model trains and is scored on.

What is written (into a temporary folder next to ``out``, renamed to ``out`` only when everything succeeded, so
an error never leaves a half-written dataset; an existing ``out`` is replaced only with ``force``):

- ``{split}.conllu`` — every token of the gold sentences, punctuation included, with gold heads;
- ``{split}.nopunct.conllu`` — the same sentences without punctuation, heads re-attached to the nearest kept
  ancestor: the gold tree over exactly the words of ``{split}.txt`` (not written with ``keep_punct``; see
  :func:`without_punct` for the rare sentence whose root was punctuation);
- ``{split}.trees`` — (PTB only) the gold constituency tree of each sentence, punctuation removed, one per line;
- ``{split}.txt`` — the model's view: normalised words without punctuation, one sentence per line;
- the short set (``wsj10`` for PTB, ``len10`` for UD): every sentence of every split with at most 10 words after
  punctuation removal, in the same forms;
- ``vocab.json`` — built from the training view only;
- ``manifest.json`` — source, options, counts, the training view and the sha256 of every other file.

The training view (``train.txt``) is, in this order: the treebank's train split, the unlabelled text of the
evaluation splits named by ``--train-on`` (UD only: the transductive setting), then ``--extra-text``.  Line *i*
of a ``.txt`` or ``.trees`` file is sentence *i* of the ``.conllu`` files of the same name; the lines after the
treebank's train split have no gold counterpart, and a treebank without a train split gets ``train.txt`` but no
``train.conllu`` (there are no training trees, and the evaluation splits' trees must not become training data).
The manifest's ``training_view`` (copied into ``source``, which every run's manifest records) names where the
training text came from; ``train`` prints a note when it includes dev or test text.  Model selection on dev
still scores against the dev gold trees, transductive or not.

Raw text (``preprocess text``) has no gold trees and no held-out splits: it gives ``train.txt``, ``vocab.json``
and ``manifest.json``.

Rules that shape the numbers:

- punctuation is removed by the corpus's rule (PTB word tags, UD ``PUNCT``, token shape for raw text); in the
  CoNLL-U it stays, and the evaluator removes it again with re-attachment (``keep_punct`` keeps it everywhere);
- ``max_length`` limits the *training* split only (by words in the model's view); dev, test and the short set
  stay complete, because evaluation subsets are chosen when scoring (``eval --max-length``);
- sentences with no word left after punctuation removal are dropped from every output (they have nothing to
  score) and counted in the manifest;
- ``--extra-text`` is appended to the training view only, after removing every sentence that also occurs in dev
  or test (compared on lower-cased alphanumeric tokens, see :func:`~depinduce.data.normalize.overlap_key`).

Each gold sentence is *rendered* once into the strings the outputs need (CoNLL-U block, tree line, view); for
the PTB this happens in worker processes, file by file, because it is nearly all of the time a full WSJ takes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from depinduce.data.dataset import (SHORT_MAX_WORDS, Dataset, Log, filter_rendered, quiet, training_view,
                                    write_dataset)
from depinduce.data.headrules import get_head_rules
from depinduce.data.ptb import SPLITS, ldc_source, nltk_sample_source
from depinduce.data.rendering import PreprocessOptions, Rendered, default_workers, render, render_files, without_punct
from depinduce.data.staging import (DATA_ROOT, check_output, default_output, locked, staged_output,
                                    terminate_as_exit, write_lines, write_manifest)
from depinduce.data.text import (PRETOKENIZED_NOTE, read_nltk_corpus, read_text_file, require_nltk_corpus,
                                 unspaced_share)
from depinduce.data.ud import check_training_view, find_treebank_files, language_of, parse_train_on, read_ud_file
from depinduce.data.vocab import SPECIALS, Vocab
from depinduce.errors import UsageError
from depinduce.io.conllu_format import SentIds
from depinduce.io.filenames import MANIFEST_FILE, TRAIN_TXT, VOCAB_FILE
from depinduce.structures.sentence import Sentence
from depinduce.version import __version__

# ------------------------------------------------------------------------------------------- entry points

# What ``preprocess ptb`` adds to NLTK's Penn Treebank sample: NLTK's Brown corpus (57,340 sentences, about 1M
# words once punctuation is removed) as raw training text, and a vocabulary of the 10,000 most frequent words
# (the size of the paper setting's PTB vocabulary).  The neural CPU recipes are measured on this training view;
# on the sample's 59k words alone their models end below right-branching.
SAMPLE_EXTRA = ("brown",)
SAMPLE_MAX_VOCAB = 10_000


def with_sample_extra(options: PreprocessOptions) -> PreprocessOptions:
    """``options`` with Brown as extra training text and, unless a vocabulary size was given, 10,000 words."""
    return replace(options, extra_corpora=tuple(dict.fromkeys((*options.extra_corpora, *SAMPLE_EXTRA))),
                   max_vocab=options.max_vocab if options.max_vocab is not None else SAMPLE_MAX_VOCAB)



def _preprocess_ptb(
    out: str | Path,
    *,
    ptb_dir: str | Path | None = None,
    head_rules: str = "penn2malt",
    keep_function_tags: bool = False,
    workers: int | None = None,
    sample_only: bool = False,
    options: PreprocessOptions = PreprocessOptions(),
    log: Log = quiet,
) -> dict[str, object]:
    """Convert the Penn Treebank (an LDC tree, or NLTK's sample) into a dataset in ``out``; returns the manifest.

    ``workers`` processes read and convert the trees (default: the usable CPUs, at most 8; 1 = this process).
    NLTK's sample gets NLTK's Brown corpus as extra training text (:data:`SAMPLE_EXTRA`) unless ``sample_only``:
    its 59k training words are too few for the neural models to learn structure that beats right-branching.
    """
    out = Path(out)
    check_output(out, options.force)
    options.validate()
    rules = get_head_rules(head_rules)
    source = ldc_source(ptb_dir) if ptb_dir is not None else nltk_sample_source()
    if ptb_dir is None and not sample_only:
        options = with_sample_extra(options)
        for corpus in SAMPLE_EXTRA:  # before the trees are read: a missing corpus costs nothing
            require_nltk_corpus(corpus, "or keep the sample alone: --sample-only")
    log(f"reading the Penn Treebank ({source.kind}) from {source.location}")
    if source.missing_sections:
        log(f"note: sections {', '.join(source.missing_sections)} are absent; the splits use the others")
    splits = render_files(source.files, rules.name, keep_function_tags, options,
                           default_workers() if workers is None else workers)
    _require_unique_ids(splits)
    description = {**source.describe(), "head_rules": rules.name, "keep_function_tags": keep_function_tags}
    return write_dataset(out, Dataset("ptb", description, splits, "ptb", "wsj10", trees=True), options, log)


def _require_unique_ids(splits: dict[str, list[Rendered]]) -> None:
    """PTB sentence ids are ``FILE:N``; two files with one name would give the CoNLL-U repeated ids."""
    seen: set[str] = set()
    for items in splits.values():
        for r in items:
            if r.sent_id in seen:
                raise UsageError(f"sentence id {r.sent_id} occurs twice: two .mrg files share a name")
            seen.add(r.sent_id)


def _preprocess_ud(
    out: str | Path,
    *,
    treebank: Sequence[str | Path],
    train_on: Sequence[str] = (),
    pretokenized: bool = False,
    options: PreprocessOptions = PreprocessOptions(),
    log: Log = quiet,
) -> dict[str, object]:
    """Turn a UD treebank (folder or split files) into a dataset in ``out``; returns the manifest.

    ``train_on`` names evaluation splits (``dev``, ``test``) whose unlabelled text joins the training view: the
    transductive setting, recorded in the manifest (see the module docstring).  ``pretokenized`` reads
    ``--extra-text`` as one sentence per line with tokens separated by spaces, as it always is for a treebank in
    a script written without spaces (Chinese, Japanese); otherwise English sentence and token rules apply.
    """
    out = Path(out)
    check_output(out, options.force)
    options.validate()
    train_on = parse_train_on(",".join(train_on)) if train_on else ()
    files = find_treebank_files(treebank)
    check_training_view(files, train_on, options.extra_text, ", ".join(str(t) for t in treebank))
    notes = [_missing_split_note(split) for split in SPLITS if split not in files]
    view = training_view(files, train_on, options.extra_text)
    if view["transductive"]:
        notes.append(_transductive_note(train_on))
    for note in notes:
        log(f"note: {note}")
    sent_ids = SentIds()
    splits: dict[str, list[Rendered]] = {}
    words: list[str] = []
    for split, path in tqdm(list(files.items()), desc="reading treebank", unit="file", file=sys.stderr,
                            leave=False, disable=not options.progress or None):
        sentences = read_ud_file(path)
        for ordinal, sentence in enumerate(sentences, start=1):
            # Ids must stay unique in every file written, the short set mixing splits included.
            sentence.sent_id = sent_ids.claim(sentence.sent_id, ordinal)
            sentence.metadata["sent_id"] = sentence.sent_id
            if sentence.source is not None:
                sentence.source.metadata["sent_id"] = sentence.sent_id
        splits[split] = [render(s, "ud", options) for s in sentences]
        words.extend(w for s in sentences for w in s.words)
    unspaced = unspaced_share(words) >= 0.5
    if options.extra_text and unspaced:
        log(f"note: the treebank is written without spaces between words, so --extra-text {PRETOKENIZED_NOTE}")
    elif options.extra_text and not pretokenized and language_of(files) not in ("en", None):
        log("note: --extra-text is split into sentences and tokenised by English (Penn Treebank) rules; for "
            "text already tokenised like the treebank (one sentence per line), pass --pretokenized")
    pretokenized = pretokenized or unspaced
    view["extra_text_pretokenized"] = pretokenized and bool(options.extra_text)
    source = {"kind": "ud", "files": {split: str(path) for split, path in files.items()}, "training_view": view}
    dataset = Dataset("ud", source, splits, "ud", "len10", trees=False, notes=notes, train_on=train_on,
                      pretokenized_extra=pretokenized)
    return write_dataset(out, dataset, options, log)


def _missing_split_note(split: str) -> str:
    if split == "train":
        return ("the treebank has no train split: train.txt holds the text named by --train-on/--extra-text and "
                "no train.conllu is written (supervised backends need one)")
    return f"the treebank has no {split} split; no {split} files were written"


def _transductive_note(train_on: Sequence[str]) -> str:
    return (f"transductive: the training view includes the unlabelled text of {', '.join(train_on)} "
            f"(--train-on {','.join(train_on)}); scores on {'/'.join(train_on)} are transductive, and model "
            "selection on dev still uses the dev gold trees")


def _preprocess_text(
    out: str | Path,
    *,
    inputs: Sequence[str] = (),
    nltk_corpus: str | None = None,
    options: PreprocessOptions = PreprocessOptions(),
    log: Log = quiet,
) -> dict[str, object]:
    """Turn raw text (files, ``-`` for stdin, and/or an NLTK corpus) into a training set in ``out``.

    Writes ``train.txt``, ``vocab.json`` and ``manifest.json``: raw text has no gold trees and no held-out split.
    """
    out = Path(out)
    check_output(out, options.force)
    options.validate()
    if not inputs and nltk_corpus is None:
        raise UsageError("give an INPUT file ('-' for standard input) or --nltk-corpus")
    sentences: list[Sentence] = []
    for path in inputs:
        sentences.extend(read_text_file(path, one_per_line=options.one_per_line))
    if nltk_corpus is not None:
        log(f"reading NLTK's {nltk_corpus} corpus")
        sentences.extend(read_nltk_corpus(nltk_corpus))
    kept, counts = filter_rendered([render(s, "shape", options, gold=False) for s in sentences], options.max_length)
    views = [r.view for r in kept]
    if not views:
        raise UsageError("the text has no sentence with a word in it")
    vocab = Vocab.build(views, min_freq=options.min_freq, max_vocab=options.max_vocab,
                        normalization=options.normalization)
    counts.update({"sentences": len(views), "words": sum(len(v) for v in views),
                   "unknown_words": sum(1 for v in views for w in v if w not in vocab)})
    with staged_output(out, options.force) as tmp:
        write_lines(tmp / TRAIN_TXT, (" ".join(v) for v in views))
        vocab.save(tmp / VOCAB_FILE)
        write_manifest(tmp, {
            "depinduce_version": __version__,
            "command": "text",
            "source": {"kind": "text", "inputs": list(inputs), "nltk_corpus": nltk_corpus,
                       "sentence_splitting": "one per line" if options.one_per_line else "rule-based"},
            "options": options.as_dict(),
            "punct_rule": "shape",
            "splits": {"train": counts},
            "missing_splits": ["dev", "test"],
            "vocab": {"size": len(vocab), "words": len(vocab) - len(SPECIALS)},
            "notes": ["raw text has no gold trees: only train.txt is written"],
        })
    log(f"train: {counts['sentences']} sentences, {counts['words']} words; vocabulary: {len(vocab)} entries; "
        f"written to {out}")
    return json.loads((out / MANIFEST_FILE).read_text(encoding="utf-8"))




def preprocess_ptb(out: str | Path, **kwargs: Any) -> dict[str, object]:
    """Convert the Penn Treebank (an LDC tree, or NLTK's sample) into a dataset in ``out``; returns the manifest.
    Keywords as :func:`_preprocess_ptb`."""
    options = kwargs.get("options", PreprocessOptions())
    inputs = [kwargs.get("ptb_dir"), *options.extra_text]
    return locked("ptb", out, inputs, options.force, lambda: _preprocess_ptb(out, **kwargs))


def preprocess_ud(out: str | Path, **kwargs: Any) -> dict[str, object]:
    """Turn a UD treebank into a dataset in ``out``; keywords as :func:`_preprocess_ud`."""
    options = kwargs.get("options", PreprocessOptions())
    inputs = [*kwargs.get("treebank", ()), *options.extra_text]
    return locked("ud", out, inputs, options.force, lambda: _preprocess_ud(out, **kwargs))


def preprocess_text(out: str | Path, **kwargs: Any) -> dict[str, object]:
    """Turn raw text into a training set in ``out``; keywords as :func:`_preprocess_text`."""
    options = kwargs.get("options", PreprocessOptions())
    return locked("text", out, list(kwargs.get("inputs", ())), options.force,
                   lambda: _preprocess_text(out, **kwargs))


__all__ = [
    "DATA_ROOT",
    "Dataset",
    "PreprocessOptions",
    "Rendered",
    "SHORT_MAX_WORDS",
    "check_output",
    "default_output",
    "default_workers",
    "preprocess_ptb",
    "preprocess_text",
    "preprocess_ud",
    "render",
    "staged_output",
    "terminate_as_exit",
    "training_view",
    "without_punct",
    "write_dataset",
]
