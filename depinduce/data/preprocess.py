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

import glob
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

import depinduce
from depinduce.checksum import sha256_file
from depinduce.data.headrules import get_head_rules
from depinduce.data.normalize import Normalization, overlap_key
from depinduce.data.ptb import SPLITS, MrgFile, ldc_source, nltk_sample_source, read_mrg, tree_to_line
from depinduce.data.punct import PunctRule, sentence_punct_mask
from depinduce.structures.sentence import Sentence
from depinduce.data.text import (PRETOKENIZED_NOTE, check_pretokenized, read_nltk_corpus, read_pretokenized_file,
                                 read_text_file, unspaced_share)
from depinduce.data.ud import check_training_view, find_treebank_files, language_of, parse_train_on, read_ud_file
from depinduce.data.vocab import SPECIALS, Vocab
from depinduce.errors import DepinduceError, InputError, ResourceError, UsageError
from depinduce.locking import check_force_target, exclusive, make_parent
from depinduce.structures.dependency import reattach
from depinduce.io import format_conllu
from depinduce.io.outputs import DATASET_FORMAT, check_replaceable_folder
from depinduce.io.conllu_format import SentIds
from depinduce.io.lines import display_name

SHORT_MAX_WORDS = 10

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    """The default log: say nothing (the CLI passes a function that writes to stderr)."""


@dataclass(frozen=True)
class PreprocessOptions:
    """The switches shared by ``preprocess ptb|ud|text``; defaults follow the papers."""

    keep_punct: bool = False
    normalization: Normalization = field(default_factory=Normalization)
    max_length: int | None = None
    min_freq: int = 2
    max_vocab: int | None = None
    extra_text: tuple[str, ...] = ()
    one_per_line: bool = False
    force: bool = False
    progress: bool = True

    def as_dict(self) -> dict[str, object]:
        out = asdict(self)
        out.pop("force")
        out.pop("progress")
        out["extra_text"] = list(self.extra_text)
        return out

    def validate(self) -> None:
        if self.max_length is not None and self.max_length < 1:
            raise UsageError(f"--max-length must be at least 1, not {self.max_length}")
        if self.min_freq < 1:
            raise UsageError(f"--min-freq must be at least 1, not {self.min_freq}")
        if self.max_vocab is not None and self.max_vocab < 1:
            raise UsageError(f"--max-vocab must be at least 1, not {self.max_vocab}")


# --------------------------------------------------------------------------------------------- rendering


@dataclass
class Rendered:
    """One sentence as the outputs need it: its CoNLL-U block, its tree line and the model's view.

    ``words`` counts the words left after punctuation removal by the corpus's rule (what decides membership of
    the short set, whatever ``keep_punct`` says); ``tokens`` counts every token; ``key`` is the sentence's
    :func:`~depinduce.data.normalize.overlap_key`, what ``--extra-text`` sentences are checked against.
    """

    sent_id: str
    view: list[str]
    words: int
    tokens: int
    key: tuple[str, ...] = ()
    conllu: str | None = None
    conllu_nopunct: str | None = None
    repaired_root: bool = False
    tree: str | None = None


def render(sentence: Sentence, rule: PunctRule, options: PreprocessOptions, *, gold: bool = True) -> Rendered:
    """The strings one sentence contributes: the view always, the CoNLL-U block and tree line for gold data."""
    is_punct = sentence_punct_mask(sentence, rule)  # the corpus's rule, read as parse and eval read it
    keep = [True] * len(is_punct) if options.keep_punct else [not p for p in is_punct]
    view = options.normalization.words(w for w, k in zip(sentence.words, keep) if k)
    out = Rendered(sentence.sent_id or "", view, sum(not p for p in is_punct), len(sentence.words))
    if gold and view:
        out.key = overlap_key(sentence.words)
        out.conllu = format_conllu(sentence)
        if not options.keep_punct:
            stripped, out.repaired_root = without_punct(sentence, keep)
            out.conllu_nopunct = format_conllu(stripped)
        if sentence.tree is not None:
            out.tree = tree_to_line(sentence.tree, None if options.keep_punct else keep)
    return out


def without_punct(sentence: Sentence, keep: Sequence[bool]) -> tuple[Sentence, bool]:
    """The sentence restricted to the kept words, each word whose head was removed re-attached to its nearest
    kept ancestor; ``# text`` becomes the kept words (the original no longer matches the forms).

    When the root itself was punctuation (``$`` heading ``$ 5 million``), re-attachment leaves several words on
    ROOT, which CoNLL-U cannot hold: the leftmost becomes the root and the others attach to it.  The second
    value says whether that repair was needed (the evaluator, which re-attaches on its own, is not affected).
    """

    def kept(column: Sequence[str] | None) -> list[str] | None:
        return None if column is None else [v for v, k in zip(column, keep) if k]

    words = [w for w, k in zip(sentence.words, keep) if k]
    heads = None if sentence.heads is None else reattach(sentence.heads, keep)
    deprels = kept(sentence.deprels)
    repaired = False
    if heads is not None:
        roots = [i for i, h in enumerate(heads) if h == 0]
        repaired = len(roots) > 1
        for extra in roots[1:]:
            heads[extra] = roots[0] + 1
        if deprels is not None and roots:
            deprels[roots[0]] = "root"
            for extra in roots[1:]:
                deprels[extra] = "dep" if deprels[extra] == "root" else deprels[extra]
    metadata = {k: v for k, v in sentence.metadata.items() if k == "punct_rule"}
    stripped = Sentence(words=words, xpos=kept(sentence.xpos), upos=kept(sentence.upos), heads=heads,
                        deprels=deprels, sent_id=sentence.sent_id, text=" ".join(words), metadata=metadata)
    return stripped, repaired


@dataclass(frozen=True)
class _Failure:
    """A user error raised in a worker, sent back as plain data (its kind, location and message) so the parent
    raises the same kind with the same line."""

    kind: type[DepinduceError]
    path: str | None
    line: int | None
    problem: str

    def error(self) -> DepinduceError:
        return self.kind(self.problem) if self.path is None else InputError(self.path, self.line, self.problem)


def _render_mrg(job: tuple[str, bytes, str, bool, PreprocessOptions]) -> list[Rendered] | _Failure:
    """One .mrg file, read, converted and rendered (run in worker processes; arguments pickle cheaply)."""
    name, data, rules_name, keep_function_tags, options = job
    try:
        sentences = read_mrg(data, name, rules=get_head_rules(rules_name), keep_function_tags=keep_function_tags)
        return [render(s, "ptb", options) for s in sentences]
    except InputError as exc:
        return _Failure(InputError, exc.path, exc.line, exc.problem)
    except DepinduceError as exc:
        return _Failure(type(exc), None, None, str(exc))


def default_workers() -> int:
    """Processes for rendering the PTB: the CPUs this process may use, at most 8."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 8))


def _render_files(
    files: dict[str, list[MrgFile]],
    rules_name: str,
    keep_function_tags: bool,
    options: PreprocessOptions,
    workers: int,
) -> dict[str, list[Rendered]]:
    """Render every file of every split, in order, in ``workers`` processes (1: in this one)."""
    order = [(split, mrg) for split, mrgs in files.items() for mrg in mrgs]
    jobs = ((mrg.name, mrg.read_bytes(), rules_name, keep_function_tags, options) for _, mrg in order)
    out: dict[str, list[Rendered]] = {split: [] for split in files}
    with tqdm(total=len(order), desc="reading trees", unit="file", file=sys.stderr, leave=False,
              disable=not options.progress or None) as bar, ExitStack() as stack:
        if workers < 2 or len(order) < 4 * workers:
            results: Iterable[list[Rendered] | _Failure] = map(_render_mrg, jobs)
        else:
            pool = stack.enter_context(ProcessPoolExecutor(max_workers=workers))
            stack.callback(pool.shutdown, cancel_futures=True)  # on an error, skip the files not yet started
            results = pool.map(_render_mrg, jobs, chunksize=4)
        for (split, _), rendered in zip(order, results):
            if isinstance(rendered, _Failure):
                raise rendered.error()
            out[split].extend(rendered)
            bar.update(1)
    return out


# ------------------------------------------------------------------------------------------ output staging


DATA_ROOT = Path("data")


def default_output(command: str, *, treebank: Sequence[str] = (), inputs: Sequence[str] = (),
                   nltk_corpus: str | None = None) -> Path:
    """Where ``preprocess`` writes without ``--out``: ``data/ptb``, ``data/<treebank folder name>`` (of a
    folder, or of the folder holding the split files), ``data/<input stem>`` or ``data/<nltk corpus>``."""
    if command == "ptb":
        return DATA_ROOT / "ptb"
    if command == "ud":
        if not treebank:
            raise UsageError("preprocess ud: give --treebank PATH")
        first = Path(treebank[0])
        folder = first if first.is_dir() else first.parent
        name = folder.resolve().name
        return DATA_ROOT / name
    if nltk_corpus is not None:
        return DATA_ROOT / nltk_corpus
    named = [i for i in inputs if i != "-"]
    if not named:
        raise UsageError("preprocess text: reading stdin, so there is no name to derive the output from; "
                         "give --out DIR")
    return DATA_ROOT / Path(named[0]).stem


def check_output(out: Path, force: bool) -> None:
    """Refuse an existing output before any work is done: without ``force`` always, with it unless the folder
    is a dataset depinduce wrote and holds nothing else (see :mod:`depinduce.io.outputs`)."""
    check_replaceable_folder(out, force, "dataset")


@contextmanager
def staged_output(out: Path, force: bool) -> Iterator[Path]:
    """A temporary folder beside ``out`` that becomes ``out`` when the block ends without error."""
    check_output(out, force)
    make_parent(out)
    for stale in sorted(out.parent.glob(f".{glob.escape(out.name)}.*.partial")):
        # the caller holds the folder's lock, so no live process is writing these: leftovers of a killed run
        shutil.rmtree(stale, ignore_errors=True)
        print(f"removed {stale}, left half-written by an interrupted preprocess", file=sys.stderr)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    except OSError as exc:
        raise ResourceError(f"{out}: cannot create the output folder ({exc.strerror or exc})") from None
    try:
        try:
            yield tmp
        except OSError as exc:  # a full disk, a quota: name the output, not <stdout>
            raise ResourceError(f"{out}: cannot write {Path(exc.filename).name if exc.filename else 'the dataset'} "
                                f"({exc.strerror or exc})") from None
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)  # mkdtemp makes a private folder; the dataset is an ordinary one
        check_output(out, force)
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
            old.rmdir()
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_lines(path: Path, lines: Iterable[str]) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as stream:
        for line in lines:
            stream.write(line)
            stream.write("\n")


def _write_manifest(folder: Path, manifest: dict[str, object]) -> None:
    """Add the checksum of every file already in ``folder`` and write ``manifest.json`` beside them."""
    manifest["files"] = {p.name: {"sha256": sha256_file(p), "bytes": p.stat().st_size} for p in sorted(folder.iterdir())}
    text = json.dumps({"format": DATASET_FORMAT, **manifest}, indent=2, ensure_ascii=False) + "\n"
    (folder / "manifest.json").write_text(text, encoding="utf-8")


# ------------------------------------------------------------------------------------------- the dataset


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


def _filter(items: list[Rendered], max_length: int | None) -> tuple[list[Rendered], dict[str, int]]:
    """Drop sentences without words and, when ``max_length`` is given, longer ones; count both."""
    kept = [r for r in items if r.view]
    counts = {"read": len(items), "dropped_no_words": len(items) - len(kept)}
    if max_length is not None:
        short = [r for r in kept if len(r.view) <= max_length]
        counts["dropped_too_long"] = len(kept) - len(short)
        kept = short
    return kept, counts


def write_dataset(out: Path, dataset: Dataset, options: PreprocessOptions, log: Log = _quiet) -> dict[str, object]:
    """Write every output of ``dataset`` into ``out`` (atomically); returns the manifest."""
    options.validate()
    splits: dict[str, list[Rendered]] = {}
    counts: dict[str, dict[str, int]] = {}
    for split, items in dataset.splits.items():
        splits[split], counts[split] = _filter(items, options.max_length if split == "train" else None)
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
            _write_lines(tmp / "train.txt", (" ".join(v) for v in train_views))
            counts["train"].update(_split_counts([], train_views, vocab))
        _write_forms(tmp, dataset.short_name, short, [r.view for r in short], trees=dataset.trees,
                     nopunct=not options.keep_punct)
        vocab.save(tmp / "vocab.json")
        _write_manifest(tmp, {
            "depinduce_version": depinduce.__version__,
            "command": dataset.command,
            "source": dataset.source,
            "options": options.as_dict(),
            "punct_rule": dataset.rule,
            "splits": counts,
            "missing_splits": [s for s in SPLITS if s not in dataset.splits],
            "short_set": {"name": dataset.short_name, "max_words": SHORT_MAX_WORDS, "sentences": len(short)},
            "vocab": {"size": len(vocab), "words": len(vocab) - len(SPECIALS)},
            "training_view": dataset.source.get("training_view")
                             or training_view(dataset.splits, (), options.extra_text),
            "notes": dataset.notes,
        })
    for split, c in counts.items():
        log(f"{split}: {c['sentences']} sentences, {c['words']} words in the model's view")
    log(f"{dataset.short_name}: {len(short)} sentences; vocabulary: {len(vocab)} entries; written to {out}")
    return json.loads((out / "manifest.json").read_text(encoding="utf-8"))


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
        _write_lines(tmp / f"{name}.trees", (r.tree or "" for r in items))
    _write_lines(tmp / f"{name}.txt", (" ".join(v) for v in views))


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
    """Views of the ``--extra-text`` sentences that occur in neither dev nor test, and what was removed."""
    if not options.extra_text:
        return [], {}
    keys = {r.key for r in held_out}
    sentences = [s for path in options.extra_text for s in _read_extra_text(path, options, pretokenized)]
    fresh = [s for s in sentences if overlap_key(s.words) not in keys]
    views, counts = _filter([render(s, "shape", options, gold=False) for s in fresh], options.max_length)
    log(f"extra text: {len(sentences)} sentences read, {len(sentences) - len(fresh)} removed because they occur "
        "in dev or test")
    return [r.view for r in views], {
        "extra_text_read": len(sentences),
        "extra_text_removed_overlap": len(sentences) - len(fresh),
        "extra_text_dropped_no_words": counts["dropped_no_words"],
        "extra_text_dropped_too_long": counts.get("dropped_too_long", 0),
        "extra_text_sentences": len(views),
    }


# ------------------------------------------------------------------------------------------- entry points


def _preprocess_ptb(
    out: str | Path,
    *,
    ptb_dir: str | Path | None = None,
    head_rules: str = "penn2malt",
    keep_function_tags: bool = False,
    workers: int | None = None,
    options: PreprocessOptions = PreprocessOptions(),
    log: Log = _quiet,
) -> dict[str, object]:
    """Convert the Penn Treebank (an LDC tree, or NLTK's sample) into a dataset in ``out``; returns the manifest.

    ``workers`` processes read and convert the trees (default: the usable CPUs, at most 8; 1 = this process).
    """
    out = Path(out)
    check_output(out, options.force)
    options.validate()
    rules = get_head_rules(head_rules)
    source = ldc_source(ptb_dir) if ptb_dir is not None else nltk_sample_source()
    log(f"reading the Penn Treebank ({source.kind}) from {source.location}")
    if source.missing_sections:
        log(f"note: sections {', '.join(source.missing_sections)} are absent; the splits use the others")
    splits = _render_files(source.files, rules.name, keep_function_tags, options,
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
    log: Log = _quiet,
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


def training_view(files: Mapping[str, object], train_on: Sequence[str], extra_text: Sequence[str]) -> dict[str, Any]:
    """Where the training text comes from, as the manifest records it."""
    return {
        "treebank_train": "train" in files,
        "train_on": list(train_on),
        "extra_text": list(extra_text),
        "transductive": bool(train_on),
    }


def _preprocess_text(
    out: str | Path,
    *,
    inputs: Sequence[str] = (),
    nltk_corpus: str | None = None,
    options: PreprocessOptions = PreprocessOptions(),
    log: Log = _quiet,
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
    kept, counts = _filter([render(s, "shape", options, gold=False) for s in sentences], options.max_length)
    views = [r.view for r in kept]
    if not views:
        raise UsageError("the text has no sentence with a word in it")
    vocab = Vocab.build(views, min_freq=options.min_freq, max_vocab=options.max_vocab,
                        normalization=options.normalization)
    counts.update({"sentences": len(views), "words": sum(len(v) for v in views),
                   "unknown_words": sum(1 for v in views for w in v if w not in vocab)})
    with staged_output(out, options.force) as tmp:
        _write_lines(tmp / "train.txt", (" ".join(v) for v in views))
        vocab.save(tmp / "vocab.json")
        _write_manifest(tmp, {
            "depinduce_version": depinduce.__version__,
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
    return json.loads((out / "manifest.json").read_text(encoding="utf-8"))


def _locked(command: str, out: str | Path, inputs: Sequence[str | Path | None], force: bool,
            run: Callable[[], dict[str, object]]) -> dict[str, object]:
    """Run one preprocess command holding the output folder's lock; SIGTERM cleans up like an error."""
    real_inputs = [p for p in inputs if p is not None and str(p) != "-"]
    if force:
        check_force_target(out, real_inputs, "--out")
    with exclusive(out, f"preprocess {command}"), terminate_as_exit():
        return run()


def preprocess_ptb(out: str | Path, **kwargs: Any) -> dict[str, object]:
    """Convert the Penn Treebank (an LDC tree, or NLTK's sample) into a dataset in ``out``; returns the manifest.
    Keywords as :func:`_preprocess_ptb`."""
    options = kwargs.get("options", PreprocessOptions())
    inputs = [kwargs.get("ptb_dir"), *options.extra_text]
    return _locked("ptb", out, inputs, options.force, lambda: _preprocess_ptb(out, **kwargs))


def preprocess_ud(out: str | Path, **kwargs: Any) -> dict[str, object]:
    """Turn a UD treebank into a dataset in ``out``; keywords as :func:`_preprocess_ud`."""
    options = kwargs.get("options", PreprocessOptions())
    inputs = [*kwargs.get("treebank", ()), *options.extra_text]
    return _locked("ud", out, inputs, options.force, lambda: _preprocess_ud(out, **kwargs))


def preprocess_text(out: str | Path, **kwargs: Any) -> dict[str, object]:
    """Turn raw text into a training set in ``out``; keywords as :func:`_preprocess_text`."""
    options = kwargs.get("options", PreprocessOptions())
    return _locked("text", out, list(kwargs.get("inputs", ())), options.force,
                   lambda: _preprocess_text(out, **kwargs))


@contextmanager
def terminate_as_exit() -> Iterator[None]:
    """SIGTERM raises SystemExit while the block runs, so the staged folder is removed as on any error."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


__all__ = [
    "Dataset",
    "PreprocessOptions",
    "Rendered",
    "preprocess_ptb",
    "preprocess_text",
    "preprocess_ud",
    "render",
    "write_dataset",
]
