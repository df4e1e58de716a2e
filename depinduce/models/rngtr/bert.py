"""Optional BERT initialisation of the RNGTr encoder (``train --encoder-path DIR``), as the paper's models.

Only a local HuggingFace folder is read (``local_files_only``: nothing is ever downloaded), and only when the
``transformers`` package is installed.  Word-piece handling: every word is split into pieces, ``[CLS]`` plays
``<ROOT>``, a word's UPOS embedding is added to all its pieces, the graph relations of two words connect their
*first* pieces, and the first piece's state represents (decodes) the word.  (The authors' code differs: its
sequence is ``[CLS] <ROOT> words [SEP]``, with ``<ROOT>`` a token of its own, and a word's later pieces are
joined to its first by arcs of a ``[BERT]`` relation.)  The encoder's layers
have BERT's layout (post-LN, GELU), so BERT's weights map onto them one to one; the relation tables and UPOS
embeddings are new.  The folder must still be there when the run is loaded for parsing (its tokenizer and
architecture are read again; the trained weights come from ``model.pt``).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from depinduce.errors import ModelError, NotFoundError, ResourceError


def _transformers() -> Any:
    try:
        transformers = importlib.import_module("transformers")
    except ImportError:
        raise ResourceError("encoder_path needs the 'transformers' package (pip install 'depinduce[bert]'); "
                            "the default encoder is trained from scratch without it") from None
    transformers.utils.logging.set_verbosity_error()  # results and errors are depinduce's to report
    transformers.utils.logging.disable_progress_bar()
    return transformers


def _check_folder(path: str) -> Path:
    folder = Path(path)
    if not (folder / "config.json").is_file():
        raise NotFoundError(f"{folder}: not a local HuggingFace model folder (no config.json)")
    return folder


class PieceTokenizer:
    """Words → word pieces with ``[CLS]`` first and ``[SEP]`` last; each word's pieces are cached."""

    def __init__(self, path: str) -> None:
        folder = _check_folder(path)
        try:
            self.tokenizer = _transformers().AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        except (OSError, ValueError) as exc:
            raise ModelError(f"{folder}: cannot load its tokenizer ({exc.__class__.__name__})") from exc
        tok = self.tokenizer
        if tok.cls_token_id is None or tok.sep_token_id is None or tok.unk_token_id is None:
            raise ModelError(f"{folder}: the tokenizer has no [CLS]/[SEP]/[UNK] token; a BERT tokenizer is needed")
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
        self.vocab_size = len(tok)
        self._cache: dict[str, list[int]] = {}

    def word_pieces(self, word: str) -> list[int]:
        pieces = self._cache.get(word)
        if pieces is None:
            pieces = self.tokenizer.convert_tokens_to_ids(self.tokenizer.tokenize(word)) or [self.tokenizer.unk_token_id]
            self._cache[word] = pieces
        return pieces

    def encode(self, sentences: Sequence[Sequence[str]]) -> dict[str, torch.Tensor]:
        """``piece_ids``/``piece_mask`` (B, P), ``piece_word`` (B, P): the 0-based word of each piece (−1 for
        ``[CLS]``, ``[SEP]`` and padding), ``piece_first`` (B, T): each word's first piece (0 for padding)."""
        rows, words_of, firsts = [], [], []
        for words in sentences:
            ids, owner, first = [self.tokenizer.cls_token_id], [-1], []
            for k, word in enumerate(words):
                pieces = self.word_pieces(word)
                first.append(len(ids))
                ids.extend(pieces)
                owner.extend([k] * len(pieces))
            ids.append(self.tokenizer.sep_token_id)
            owner.append(-1)
            rows.append(ids)
            words_of.append(owner)
            firsts.append(first)
        width = max(len(r) for r in rows)
        n_words = max((len(f) for f in firsts), default=0)
        piece_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        piece_mask = torch.zeros((len(rows), width), dtype=torch.bool)
        piece_word = torch.full((len(rows), width), -1, dtype=torch.long)
        piece_first = torch.zeros((len(rows), n_words), dtype=torch.long)
        for b, (ids, owner, first) in enumerate(zip(rows, words_of, firsts)):
            piece_ids[b, : len(ids)] = torch.as_tensor(ids)
            piece_mask[b, : len(ids)] = True
            piece_word[b, : len(owner)] = torch.as_tensor(owner)
            piece_first[b, : len(first)] = torch.as_tensor(first, dtype=torch.long)
        return {"piece_ids": piece_ids, "piece_mask": piece_mask, "piece_word": piece_word,
                "piece_first": piece_first}


def bert_architecture(path: str) -> dict[str, Any]:
    """The encoder shape of the BERT in ``path``, as RNGTrConfig fields."""
    folder = _check_folder(path)
    try:
        config = _transformers().AutoConfig.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ModelError(f"{folder}: cannot read its config.json ({exc.__class__.__name__})") from exc
    if getattr(config, "model_type", None) != "bert":
        raise ModelError(f"{folder}: a '{getattr(config, 'model_type', '?')}' model; encoder_path takes a BERT")
    return {"hidden_size": config.hidden_size, "n_layers": config.num_hidden_layers,
            "n_heads": config.num_attention_heads, "ff_size": config.intermediate_size,
            "max_positions": config.max_position_embeddings, "layer_norm_eps": float(config.layer_norm_eps),
            "positions": True}


def bert_state(path: str) -> dict[str, torch.Tensor]:
    """BERT's weights by their HuggingFace names (without a ``bert.`` prefix)."""
    folder = _check_folder(path)
    try:
        model = _transformers().AutoModel.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ModelError(f"{folder}: cannot load its weights ({exc.__class__.__name__})") from exc
    return {k.removeprefix("bert."): v for k, v in model.state_dict().items()}


def copy_bert_weights(encoder: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """BERT's embeddings and layers onto :class:`~.encoder.GraphEncoder` (q, k, v stacked into one qkv)."""
    with torch.no_grad():
        encoder.words.weight.copy_(state["embeddings.word_embeddings.weight"])
        encoder.positions.weight.copy_(state["embeddings.position_embeddings.weight"])
        encoder.token_type.copy_(state["embeddings.token_type_embeddings.weight"][0])
        encoder.norm.weight.copy_(state["embeddings.LayerNorm.weight"])
        encoder.norm.bias.copy_(state["embeddings.LayerNorm.bias"])
        for k, layer in enumerate(encoder.layers):
            p = f"encoder.layer.{k}."
            att = p + "attention.self."
            layer.attention.qkv.weight.copy_(torch.cat([state[att + n + ".weight"] for n in ("query", "key", "value")]))
            layer.attention.qkv.bias.copy_(torch.cat([state[att + n + ".bias"] for n in ("query", "key", "value")]))
            layer.attention.out.weight.copy_(state[p + "attention.output.dense.weight"])
            layer.attention.out.bias.copy_(state[p + "attention.output.dense.bias"])
            layer.norm1.weight.copy_(state[p + "attention.output.LayerNorm.weight"])
            layer.norm1.bias.copy_(state[p + "attention.output.LayerNorm.bias"])
            layer.ffn[0].weight.copy_(state[p + "intermediate.dense.weight"])
            layer.ffn[0].bias.copy_(state[p + "intermediate.dense.bias"])
            layer.ffn[2].weight.copy_(state[p + "output.dense.weight"])
            layer.ffn[2].bias.copy_(state[p + "output.dense.bias"])
            layer.norm2.weight.copy_(state[p + "output.LayerNorm.weight"])
            layer.norm2.bias.copy_(state[p + "output.LayerNorm.bias"])
