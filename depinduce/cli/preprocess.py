"""``depinduce preprocess ptb|ud|text``: options in, :func:`depinduce.preprocess` out (see
:func:`depinduce.api.commands.preprocess`).

Errors are not caught here: a :class:`~depinduce.errors.DepinduceError` propagates to the main CLI, which prints
it as one line and exits with code 2.  Progress and the summary go to stderr; stdout stays quiet.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from depinduce.display import say
from depinduce.api.choices import HEAD_RULE_NAMES, NLTK_CORPORA

if TYPE_CHECKING:
    from depinduce.api import PreprocessOptions


def _log(message: str) -> None:
    say(message)


def _common_options(extra_text: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The output, normalisation and vocabulary options every subcommand shares."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        options = [
            click.option("--out", "out", default=None, type=click.Path(file_okay=False),
                         help="Output folder (written atomically; must not exist unless --force). Default: data/ptb, "
                              "data/<treebank folder name>, data/<input file stem> or data/<nltk corpus>."),
            click.option("--force", is_flag=True, help="Replace an existing output folder."),
            click.option("--keep-punct", is_flag=True,
                         help="Keep punctuation in the model's view (default: removed, heads re-attached)."),
            click.option("--cased", is_flag=True, help="Keep case (default: lower-case)."),
            click.option("--keep-digits", is_flag=True, help="Keep digits (default: digit runs become N)."),
            click.option("--max-length", type=int, default=None,
                         help="Drop training sentences longer than this many words (dev/test stay complete)."),
            click.option("--min-freq", type=int, default=2, show_default=True,
                         help="Minimum training frequency of a vocabulary word."),
            click.option("--max-vocab", type=int, default=None,
                         help="Keep at most this many words (most frequent first), specials not counted."),
            click.option("--one-per-line", is_flag=True,
                         help="Raw text has one sentence per line (default: rule-based sentence splitting)."),
            click.option("--quiet", "-q", is_flag=True, help="No progress bars or summary on stderr."),
        ]
        if extra_text:
            options.append(click.option(
                "--extra-text", multiple=True, type=click.Path(dir_okay=False),
                help="Raw text appended to the training view only (sentences found in dev/test are removed). "
                     "Repeatable. For Chinese/Japanese treebanks: pre-tokenised, one sentence per line, tokens "
                     "separated by spaces."))
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def _options(kwargs: dict[str, Any]) -> tuple[PreprocessOptions, Callable[[str], None]]:
    """Turn the shared click options into library options and a logger."""
    # imported here, not above: `depinduce --help` must not wait for numpy and nltk
    from depinduce.api import Normalization, PreprocessOptions

    quiet = kwargs.pop("quiet")
    options = PreprocessOptions(
        keep_punct=kwargs.pop("keep_punct"),
        normalization=Normalization(lowercase=not kwargs.pop("cased"), fold_digits=not kwargs.pop("keep_digits")),
        max_length=kwargs.pop("max_length"),
        min_freq=kwargs.pop("min_freq"),
        max_vocab=kwargs.pop("max_vocab"),
        extra_text=tuple(kwargs.pop("extra_text", ())),
        one_per_line=kwargs.pop("one_per_line"),
        force=kwargs.pop("force"),
        progress=not quiet,
    )
    return options, (lambda _: None) if quiet else _log


def _run(kind: str, out: str | None, options: PreprocessOptions, **inputs: Any) -> None:
    """:func:`depinduce.preprocess`, its errors naming this command's options even when the group is called on
    its own (not through the main command, which says so for every command)."""
    from depinduce.api.commands import preprocess as run
    from depinduce.api.words import cli_words

    with cli_words():
        run(kind, out, options=options, **inputs)


@click.group("preprocess")
def preprocess() -> None:
    """Turn a treebank or raw text into the files every model trains and is scored on."""


@preprocess.command("ptb")
@click.option("--ptb-dir", type=click.Path(file_okay=False), default=None,
              help="LDC Penn Treebank WSJ folder with sections 00-24 (default: NLTK's treebank sample).")
@click.option("--head-rules", type=click.Choice(sorted(HEAD_RULE_NAMES)), default="penn2malt", show_default=True,
              help="Head rules for the constituency-to-dependency conversion.")
@click.option("--keep-function-tags", is_flag=True, help="Keep function tags (NP-SBJ) in the written .trees.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Processes that read and convert the trees (default: usable CPUs, at most 8).")
@click.option("--sample-only", is_flag=True,
              help="NLTK's sample: train on its 59k words alone (default: NLTK's Brown corpus is added as raw "
                   "training text, with a 10,000-word vocabulary; the CPU recipes' figures are measured so).")
@_common_options(extra_text=True)
def ptb_command(
    out: str | None, ptb_dir: str | None, head_rules: str, keep_function_tags: bool, workers: int | None,
    sample_only: bool, **kwargs: Any
) -> None:
    """Penn Treebank WSJ → CoNLL-U, trees, model text, WSJ10 and vocabulary.  From NLTK's sample (no --ptb-dir),
    NLTK's Brown corpus joins the training text (python -m nltk.downloader treebank brown)."""
    options, log = _options(kwargs)
    _run("ptb", out, options, ptb_dir=ptb_dir, head_rules=head_rules, keep_function_tags=keep_function_tags,
         workers=workers, sample_only=sample_only, log=log)


@preprocess.command("ud")
@click.option("--treebank", multiple=True, required=True, type=click.Path(exists=False),
              help="A UD treebank folder (*-ud-{train,dev,test}.conllu) or split files. Repeatable.")
@click.option("--train-on", "train_on", default=None, metavar="SPLITS",
              help="Add the unlabelled text (words, no trees) of these evaluation splits to the training view: "
                   "dev, test or dev,test. The transductive setting, recorded in the manifest; for treebanks "
                   "without a train split (or use --extra-text).")
@click.option("--pretokenized", is_flag=True,
              help="--extra-text is tokenised like the treebank: one sentence per line, tokens separated by spaces "
                   "(always so for Chinese/Japanese; otherwise English sentence and token rules apply).")
@_common_options(extra_text=True)
def ud_command(out: str | None, treebank: tuple[str, ...], train_on: str | None, pretokenized: bool,
               **kwargs: Any) -> None:
    """Universal Dependencies treebank → CoNLL-U (syntactic words), model text, len10 and vocabulary.

    A treebank without a train split needs its training text named: --extra-text FILE and/or --train-on dev,test.
    """
    options, log = _options(kwargs)
    _run("ud", out, options, treebank=treebank, train_on=train_on, pretokenized=pretokenized, log=log)


@preprocess.command("text")
@click.argument("inputs", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--nltk-corpus", type=click.Choice(NLTK_CORPORA), default=None,
              help="Use an NLTK corpus as the text (brown: 57k sentences).")
@_common_options(extra_text=False)
def text_command(out: str | None, inputs: tuple[str, ...], nltk_corpus: str | None, **kwargs: Any) -> None:
    """Raw text (files, - for stdin, or an NLTK corpus) → model text and vocabulary for unsupervised training."""
    options, log = _options(kwargs)
    _run("text", out, options, inputs=inputs, nltk_corpus=nltk_corpus, log=log)
