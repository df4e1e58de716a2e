"""``preprocess`` and ``perplexity`` from Python, each the function its command calls (``parse``, ``eval``,
``train``, ``convert``, ``show``, ``analyze`` and ``models`` have their own modules; ``report`` is
:func:`depinduce.api.reporting.command.report_runs`, a layer above the API).
"""

from __future__ import annotations

import os
from os import PathLike
from pathlib import Path
from typing import Any

from depinduce.api.words import python_words
from depinduce.errors import UsageError

PREPROCESS_KINDS = ("ptb", "ud", "text")


@python_words
def preprocess(kind: str, out: str | PathLike[str] | None = None, *, options: Any = None,
               **inputs: Any) -> dict[str, object]:
    """``depinduce preprocess KIND``: ``kind`` is ``ptb`` (``ptb_dir=``, ``head_rules=``), ``ud``
    (``treebank=[paths]``, ``train_on="dev,test"``, ``pretokenized=``) or ``text`` (``inputs=[paths]`` or
    ``nltk_corpus=``); ``out`` defaults as on the command line (``data/ptb`` …); ``options`` is a
    :class:`~depinduce.data.preprocess.PreprocessOptions` (``depinduce.PreprocessOptions``: punctuation,
    normalisation, length and vocabulary limits, ``force``, ``progress``: none by default); ``log`` takes the
    summary lines the command prints on stderr (default: none).  Returns the dataset's manifest."""
    from depinduce.data import preprocess as steps
    from depinduce.data.ud import parse_train_on

    if kind not in PREPROCESS_KINDS:
        raise UsageError(f"kind: expected one of {', '.join(PREPROCESS_KINDS)}, not {kind!r}")
    options = options if options is not None else steps.PreprocessOptions(progress=False)  # quiet unless asked
    if not isinstance(options, steps.PreprocessOptions):
        raise UsageError(f"options: expected PreprocessOptions, not {type(options).__name__}")
    for name in ("treebank", "inputs"):  # one path is a list of one
        if isinstance(inputs.get(name), (str, PathLike)):
            inputs[name] = (os.fspath(inputs[name]),)
    if "train_on" in inputs and (inputs["train_on"] is None or isinstance(inputs["train_on"], str)):
        inputs["train_on"] = parse_train_on(inputs["train_on"])  # None: no evaluation split joins training
    if not out:  # None, or the command line's empty --out
        out = steps.default_output(kind, treebank=inputs.get("treebank", ()), inputs=inputs.get("inputs", ()),
                                   nltk_corpus=inputs.get("nltk_corpus"))
    run = {"ptb": steps.preprocess_ptb, "ud": steps.preprocess_ud, "text": steps.preprocess_text}[kind]
    return run(out, options=options, **inputs)


@python_words
def perplexity(run_dir: str | PathLike[str], text: str | PathLike[str], *, device: str = "cpu",
               batch_tokens: int | None = None, progress: bool = False) -> Any:
    """``depinduce perplexity RUN_DIR FILE``: the run's own objective over ``text`` (one normalised sentence per
    line, as ``preprocess`` writes); a :class:`~depinduce.training.perplexity.Perplexity` (``.perplexity``,
    ``.loss``, ``.as_dict()``)."""
    from depinduce.training.perplexity import measure

    return measure(Path(run_dir), Path(text), device=device, batch_tokens=batch_tokens, progress=progress)

