"""Gold training data for supervised backends (RNGTr/SynTr): CoNLL-U of a data folder → index rows.

A data folder written by ``depinduce preprocess ud`` holds ``train.conllu`` and ``dev.conllu`` with *every* token,
punctuation included, and gold heads and labels (``*.nopunct.conllu`` and ``*.txt`` are the unsupervised models'
punctuation-free view).  Supervised parsers read the full files.

Punctuation: RNGTr trains on all tokens, punctuation included.  That is UD practice (the CoNLL 2018 scorer and the
RNGTr paper score every token, ``punct`` is a label like any other), and a parse given as ``--init``/``--init-train``
(any model's ``depinduce parse`` output) covers every token too, punctuation re-attached by the parse pipeline's
rule.  The evaluator's default still removes punctuation on both sides before scoring
(docs/evaluation-protocol.md), so scores
stay comparable with the unsupervised models; ``eval --keep-punct`` gives the CoNLL 2018 number.

Vocabularies: the data folder's ``vocab.json`` is built from the punctuation-free view, so punctuation would all be
``<unk>``; :func:`build_word_vocab` builds the same kind of :class:`~depinduce.data.vocab.Vocab` (the data folder's
normalisation and ``min_freq``) over every token of ``train.conllu``.  UPOS tags and labels:
:class:`~depinduce.data.tags.TagVocab`, from the training split only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from depinduce.io.filenames import DEV_CONLLU, TRAIN_CONLLU, VOCAB_FILE
from depinduce.structures.sentence import Sentence
from depinduce.data.tags import TagVocab
from depinduce.data.vocab import Vocab
from depinduce.errors import InputError, NotFoundError, UsageError
from depinduce.io.conllu_format import read_conllu
from depinduce.io.initial_graphs import read_initial_parse
from depinduce.models.neural import pad_batch


@dataclass
class GoldRow:
    """One sentence as indices, every token included: ``words`` (word vocab), ``upos`` (tag vocab), ``heads``
    (CoNLL convention: ``heads[i]`` is the 1-based head of token i+1, 0 = ROOT) and ``labels`` (label ids)."""

    words: list[int]
    upos: list[int]
    heads: list[int]
    labels: list[int]
    forms: list[str]  # the original word forms (a BERT encoder splits them into word pieces)

    def __len__(self) -> int:
        return len(self.words)


@dataclass
class GoldData:
    """The gold splits of a data folder and the vocabularies their indices refer to (``dev`` None when absent)."""

    vocab: Vocab
    tags: TagVocab
    train: list[GoldRow]
    dev: list[GoldRow] | None
    train_sentences: list[Sentence]
    dev_sentences: list[Sentence] | None


def read_gold_sentences(path: str | Path) -> list[Sentence]:
    """Sentences of a gold CoNLL-U file; each needs heads, labels and UPOS (a supervised parser reads all three)."""
    name = str(path)
    sentences = read_conllu(name)
    for sentence in sentences:
        if sentence.heads is None:
            raise InputError(name, sentence.line, "HEAD is '_': supervised training needs gold heads")
        if sentence.deprels is None or any(label in ("_", "") for label in sentence.deprels):
            raise InputError(name, sentence.line, "DEPREL is '_': supervised training needs gold labels")
        if sentence.upos is None or any(tag in ("_", "") for tag in sentence.upos):
            raise InputError(name, sentence.line, "UPOS is '_': the model reads UPOS from the input")
    return sentences


def build_word_vocab(sentences: Sequence[Sentence], like: Vocab) -> Vocab:
    """A word vocabulary over every token of ``sentences`` (punctuation included), normalised and thresholded as
    ``like`` (the data folder's vocabulary) was."""
    norm = like.normalization
    return Vocab.build(([norm.word(w) for w in s.words] for s in sentences), min_freq=like.min_freq,
                       max_vocab=like.max_vocab, normalization=norm)


def to_rows(sentences: Sequence[Sentence], vocab: Vocab, tags: TagVocab) -> list[GoldRow]:
    """Index rows of gold sentences."""
    return [
        GoldRow(vocab.encode(s.words), tags.encode_upos(s.upos or []), list(s.heads or []),
                tags.encode_labels(s.deprels or []), list(s.words))
        for s in sentences
    ]


def load_gold_data(data_dir: str | Path, *, vocab: Vocab | None = None, tags: TagVocab | None = None) -> GoldData:
    """Read ``train.conllu`` (and ``dev.conllu`` when present) of a preprocessed UD data folder.

    Fresh runs build the vocabularies from the training split; a resumed run or a loaded model passes its saved
    ``vocab`` and ``tags`` so the indices mean what they meant in training.
    """
    folder = Path(data_dir)
    train_path = folder / TRAIN_CONLLU
    if not train_path.is_file():
        raise NotFoundError(f"{folder}: no train.conllu; supervised training needs a folder made by "
                            "`depinduce preprocess ud`")
    train_sentences = read_gold_sentences(train_path)
    if vocab is None:
        vocab = build_word_vocab(train_sentences, Vocab.load(folder / VOCAB_FILE))
    if tags is None:
        tags = TagVocab.build(train_sentences)
    dev_path = folder / DEV_CONLLU
    dev_sentences = read_gold_sentences(dev_path) if dev_path.is_file() else None
    return GoldData(
        vocab=vocab,
        tags=tags,
        train=to_rows(train_sentences, vocab, tags),
        dev=None if dev_sentences is None else to_rows(dev_sentences, vocab, tags),
        train_sentences=train_sentences,
        dev_sentences=dev_sentences,
    )


def read_initial_graphs(path: str | Path, sentences: Sequence[Sentence], tags: TagVocab
                        ) -> list[tuple[list[int], list[int]]]:
    """(heads, label ids) of an initial parse of ``sentences`` given as CoNLL-U (``--init-train``/``--init-dev``);
    labels the training data never saw (``dep`` of an unlabelled parse) map to the unseen-label id."""
    return [(heads, tags.encode_labels(labels)) for heads, labels in read_initial_parse(path, sentences)]


def collate_gold(rows: Sequence[GoldRow], pad_index: int,
                 initial: Sequence[tuple[Sequence[int], Sequence[int]]] | None = None,
                 word_inputs: Callable[[list[list[str]]], dict[str, torch.Tensor]] | None = None
                 ) -> dict[str, torch.Tensor]:
    """Padded (B, T) tensors ``tokens``, ``mask``, ``upos``, ``heads``, ``labels`` (padding: 0 everywhere, masked
    out of every loss), plus ``init_heads``/``init_labels`` when ``initial`` graphs are given and the tensors
    ``word_inputs`` makes from the rows' word forms (a model's :meth:`word_inputs` hook)."""
    tokens, mask = pad_batch([r.words for r in rows], pad_index)
    upos, _ = pad_batch([r.upos for r in rows], TagVocab.upos_pad_index)
    heads, _ = pad_batch([r.heads for r in rows], 0)
    labels, _ = pad_batch([r.labels for r in rows], 0)
    batch = {"tokens": tokens, "mask": mask, "upos": upos, "heads": heads, "labels": labels}
    if initial is not None:
        if len(initial) != len(rows):
            raise UsageError("collate_gold: one initial graph per row is needed")
        batch["init_heads"], _ = pad_batch([h for h, _ in initial], 0)
        batch["init_labels"], _ = pad_batch([lab for _, lab in initial], 0)
    if word_inputs is not None:
        batch.update(word_inputs([r.forms for r in rows]))
    return batch
