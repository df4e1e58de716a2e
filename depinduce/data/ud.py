"""Universal Dependencies treebanks: find the split files and read syntactic words with their gold trees.

A treebank is given as its folder (``*-ud-train.conllu``, ``*-ud-dev.conllu``, ``*-ud-test.conllu``) or as
explicit files whose names say the split (``train``/``dev``/``test`` as a part of the name).  Many treebanks lack
a split (UD_English-EWT as shipped here has train and dev only); a missing dev or test split is reported, not
invented.  A missing train split (the German, French, Chinese and Japanese GSD copies here have dev and test only)
needs the training text named explicitly, never chosen silently: raw text in the language (``--extra-text``)
and/or the unlabelled text of the evaluation splits (``--train-on dev,test``, the transductive setting), see
:func:`check_training_view`.

Only syntactic words are kept: multiword-token lines and empty nodes are dropped.  So that the written CoNLL-U
still spells its ``# text`` (the validator checks it), the words of a multiword token get ``SpaceAfter=No``
except the last, which inherits the token's own; when the words do not spell the token (``zum`` = ``zu dem``)
they are separated by spaces, ``# text`` is rebuilt from the words and the original goes to ``# orig_text``.
DEPS becomes ``_`` everywhere: the enhanced graph refers to the dropped empty nodes, and the validator rejects a
file in which only some sentences have one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from conllu.models import Token, TokenList

from depinduce.io.filenames import MANIFEST_FILE
from depinduce.structures.sentence import Sentence
from depinduce.errors import InputError, NotFoundError, UsageError
from depinduce.data.files import try_read_json
from depinduce.io import parse_conllu_text
from depinduce.io.conllu_format import text_from_tokens
from depinduce.io.lines import display_name, read_text

SPLITS = ("train", "dev", "test")
# The splits whose unlabelled text ``--train-on`` may add to the training view.
EVAL_SPLITS = ("dev", "test")
_SPLIT_IN_NAME = re.compile(r"(?:^|[-_.])(train|dev|test)(?:[-_.]|$)")


def split_of(path: Path) -> str | None:
    """The split a file name announces (``en_ewt-ud-dev.conllu`` → ``dev``), or None."""
    found = _SPLIT_IN_NAME.findall(path.name.lower())
    return found[-1] if found else None


def find_treebank_files(paths: Sequence[str | Path]) -> dict[str, Path]:
    """Map each split to its file, from treebank folders and/or explicit files."""
    files: dict[str, Path] = {}

    def add(split: str, path: Path) -> None:
        if split in files and files[split] != path:
            raise UsageError(f"two files for the {split} split: {files[split]} and {path}")
        files[split] = path

    for given in paths:
        path = Path(given)
        if path.is_dir():
            found = sorted(p for p in path.glob("*.conllu") if split_of(p))
            if not found:
                raise NotFoundError(f"{path}: no *-ud-{{train,dev,test}}.conllu files in this folder")
            for p in found:
                add(split_of(p) or "", p)
        elif path.is_file():
            split = split_of(path)
            if split is None:
                raise UsageError(f"{path}: cannot tell the split from the file name; name it "
                                 "*-ud-train.conllu, *-ud-dev.conllu or *-ud-test.conllu")
            add(split, path)
        else:
            raise NotFoundError(f"{path}: no such file or folder")
    return {split: files[split] for split in SPLITS if split in files}


def language_of(files: dict[str, Path]) -> str | None:
    """The language code UD file names begin with (``de_gsd-ud-dev.conllu`` → ``de``), or None."""
    codes = {m.group(1) for p in files.values() if (m := re.match(r"([a-z]{2,3})_", p.name))}
    return codes.pop() if len(codes) == 1 else None


def parse_train_on(value: str | None) -> tuple[str, ...]:
    """The splits of ``--train-on`` (``dev,test``, ``test``...), in the order SPLITS gives them; () for None."""
    if value is None:
        return ()
    names = [name.strip().lower() for name in value.split(",")]
    unknown = [name for name in names if name not in EVAL_SPLITS]
    if unknown:
        shown = ", ".join(repr(n) for n in unknown)
        raise UsageError(f"--train-on: unknown split {shown}; give dev, test or dev,test (the evaluation splits "
                         "whose unlabelled text joins the training view)")
    return tuple(split for split in EVAL_SPLITS if split in names)


def check_training_view(files: dict[str, Path], train_on: Sequence[str], extra_text: Sequence[str],
                        where: str = "the treebank") -> None:
    """Refuse a dataset whose training view would be empty or would borrow a split the treebank lacks.

    Without a train split the vocabulary and the training text must come from somewhere the user names; the
    message says what to pass rather than guessing (training on test text silently would inflate every score).
    """
    for split in train_on:
        if split not in files:
            raise UsageError(f"--train-on {split}: the treebank has no {split} split (found: "
                             f"{', '.join(files) or 'none'})")
    if "train" not in files and not train_on and not extra_text:
        raise UsageError(f"{where}: no training split (*-ud-train.conllu); name the training text: "
                         "--extra-text FILE (raw text in the language, one sentence per line with --one-per-line) "
                         "and/or --train-on dev,test (the unlabelled text of the evaluation splits: transductive)")


def _misc_with_space_after(misc: dict | None, space_after: bool) -> dict | None:
    """A copy of MISC with ``SpaceAfter=No`` set or removed."""
    out = dict(misc) if misc else {}
    if space_after:
        out.pop("SpaceAfter", None)
    else:
        out["SpaceAfter"] = "No"
    return out or None


def syntactic_tokens(tokens: TokenList) -> TokenList:
    """The words of a sentence without multiword-token lines and empty nodes; see the module docstring."""
    forms = {t["id"]: str(t["form"]) for t in tokens if isinstance(t["id"], int)}
    words: list[Token] = []
    space_after: dict[int, bool] = {}
    for token in tokens:
        token_id = token["id"]
        if isinstance(token_id, tuple):
            if token_id[1] == "-":
                first, last = token_id[0], token_id[2]
                outer = not (isinstance(token.get("misc"), dict) and token["misc"].get("SpaceAfter") == "No")
                spelled = "".join(forms.get(k, "") for k in range(first, last + 1)) == str(token["form"])
                for k in range(first, last):
                    space_after[k] = not spelled
                space_after[last] = outer
            continue
        word = Token(token)
        word["deps"] = None
        if token_id in space_after:
            word["misc"] = _misc_with_space_after(token.get("misc"), space_after[token_id])
        words.append(word)
    out = TokenList(words)
    out.metadata = type(tokens.metadata)(tokens.metadata) if tokens.metadata is not None else {}
    original = out.metadata.get("text")
    rebuilt = text_from_tokens(out)
    if original is not None and original != rebuilt:
        out.metadata["orig_text"] = original
        out.metadata["text"] = rebuilt
    return out


def read_ud_file(path: str | Path) -> list[Sentence]:
    """Gold sentences of one CoNLL-U file, syntactic words only; every sentence must carry a tree."""
    name = display_name(path)
    text = read_text(path)
    if not text.strip():
        raise InputError(name, 1, "empty file: no sentences")
    sentences = parse_conllu_text(text, name, check_trees=True)
    out: list[Sentence] = []
    for sentence in sentences:
        if sentence.heads is None:
            raise InputError(name, sentence.line, "HEAD is '_' for every word: a treebank needs gold heads")
        tokens = syntactic_tokens(sentence.source)
        metadata = {str(k): str(v) for k, v in tokens.metadata.items() if v is not None}
        out.append(
            Sentence(
                words=sentence.words,
                xpos=sentence.xpos,
                upos=sentence.upos,
                heads=sentence.heads,
                deprels=sentence.deprels,
                sent_id=sentence.sent_id,
                text=metadata.get("text", sentence.text),
                line=sentence.line,
                metadata=metadata,
                source=tokens,
            )
        )
    return out


def training_view_note(data_dir: str | Path) -> str | None:
    """The line ``train`` prints for a data folder whose training view includes dev/test text, else None.

    Read from the folder's ``manifest.json``; a folder without one (or an older one) has no such note.
    """
    manifest = try_read_json(Path(data_dir) / MANIFEST_FILE)
    view = manifest.get("training_view") if isinstance(manifest, dict) else None
    if not isinstance(view, dict) or not view.get("transductive"):
        return None
    splits = [str(s) for s in view.get("train_on") or []]
    return (f"note: transductive training: {data_dir} was preprocessed with --train-on {','.join(splits)}, so the "
            f"model trains on the unlabelled text of {', '.join(splits)}; report scores on those splits as "
            "transductive")
