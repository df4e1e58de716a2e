"""How one gold sentence becomes the strings ``preprocess`` writes (its CoNLL-U blocks, its tree line and the
model's view), and the worker processes that render a whole Penn Treebank file by file (nearly all of the time a
full WSJ takes), so :mod:`depinduce.data.preprocess` only gathers and writes."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field

from tqdm import tqdm

from depinduce.data.headrules import get_head_rules
from depinduce.data.normalize import Normalization, overlap_key
from depinduce.data.ptb import MrgFile, read_mrg, tree_to_line
from depinduce.data.punct import PunctRule, sentence_punct_mask
from depinduce.errors import DepinduceError, InputError, UsageError
from depinduce.io import format_conllu
from depinduce.structures.dependency import reattach
from depinduce.structures.sentence import Sentence


@dataclass(frozen=True)
class PreprocessOptions:
    """The switches shared by ``preprocess ptb|ud|text``; defaults follow the papers."""

    keep_punct: bool = False
    normalization: Normalization = field(default_factory=Normalization)
    max_length: int | None = None
    min_freq: int = 2
    max_vocab: int | None = None
    extra_text: tuple[str, ...] = ()
    # NLTK corpora appended to the training view as ``extra_text`` is (``preprocess ptb`` adds Brown to the sample)
    extra_corpora: tuple[str, ...] = ()
    one_per_line: bool = False
    force: bool = False
    progress: bool = True

    def as_dict(self) -> dict[str, object]:
        out = asdict(self)
        out.pop("force")
        out.pop("progress")
        out["extra_text"] = list(self.extra_text)
        out["extra_corpora"] = list(self.extra_corpora)
        return out

    def validate(self) -> None:
        if self.max_length is not None and self.max_length < 1:
            raise UsageError(f"--max-length must be at least 1, not {self.max_length}")
        if self.min_freq < 1:
            raise UsageError(f"--min-freq must be at least 1, not {self.min_freq}")
        if self.max_vocab is not None and self.max_vocab < 1:
            raise UsageError(f"--max-vocab must be at least 1, not {self.max_vocab}")


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


def render_files(
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
