"""The base of every trainable (torch) backend: what the training engine and ``parse`` need from a model.

A neural backend is a ``torch.nn.Module`` and a :class:`~depinduce.models.base.Backend` at once.  This class owns
what every such backend shares — hyperparameter dataclasses, the vocabulary, loading a run directory safely,
turning raw words into padded index tensors for ``parse`` — so a backend folder holds only its network.

Objective hooks (the engine owns the loops and the losses; a backend implements the hooks of its objective): a
trainable backend subclasses the contract class of its objective in :mod:`depinduce.models.contracts`
(``MaskedLMBackend``, ``NextWordLMBackend``, ``StreamingLMBackend``, ``RefinerBackend``, ``LikelihoodBackend``,
``EMBackend``), whose abstract methods are those hooks.  Every backend: ``score_tensors`` gives per-sentence
:class:`ParseScores` from index tensors, and may add ``regularizer()`` (an extra loss term, e.g. the
Probabilistic Transformer's L2 on its ternary scores).

Run directory contract (written by the engine): ``config.yaml`` with keys ``model`` (registry name) and
``model_config`` (the hyperparameter dataclass as a mapping), ``vocab.json``, ``model.pt`` (a plain state dict,
loaded with ``weights_only=True``), and ``tags.json`` for backends with ``needs_tags``.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch

from depinduce.data.run_files import read_run_config
from depinduce.data.tags import TagVocab
from depinduce.data.vocab import Vocab
from depinduce.display import quote
from depinduce.errors import InputError, ModelError, NotFoundError, RecipeError, ResourceError
from depinduce.io.filenames import CONFIG_FILE, MODEL_FILE, TAGS_FILE, VOCAB_FILE
from depinduce.models.base import Backend, ParseScores
from depinduce.models.layers.kernels import rows_linear
from depinduce.models.lazy import forward_attributes

# The masked-LM contract lives with the other objectives' (contracts.py imports this module, so it is forwarded).
__getattr__ = forward_attributes(__name__, {"MaskedLMBackend": "depinduce.models.contracts"})
# torch's allocator refusal, with the size asked for: "… you tried to allocate 140000000000 bytes"
_ALLOCATION = re.compile(r"tried to allocate (\d+) bytes")


def build_config(config_class: type, values: Mapping[str, Any] | None, *, where: str) -> Any:
    """Instantiate a hyperparameter dataclass from a mapping; unknown keys are a one-line error."""
    values = dict(values or {})
    names = {f.name for f in dataclasses.fields(config_class)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise RecipeError(f"{where}: unknown model option(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
    return config_class(**values)


def torch_load_weights_only(path: Path) -> Any:
    """``torch.load(path, weights_only=True)`` on CPU, with torch's own warnings about foreign pickles silenced:
    the caller turns a refused file into its one-line error, and nothing else may reach stderr."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.load(path, map_location="cpu", weights_only=True)


def load_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """Read a checkpoint with ``weights_only=True``; a missing, corrupted or foreign file is a one-line error."""
    if not path.is_file():
        if path.exists():
            raise ModelError(f"{path}: is not a regular file (a FIFO, device or folder); a checkpoint is a file")
        raise NotFoundError(f"{path}: checkpoint not found")
    try:
        state = torch_load_weights_only(path)
    except Exception as exc:  # torch raises many types for truncated/foreign files
        raise ModelError(f"{path}: not a readable depinduce checkpoint ({exc.__class__.__name__})") from exc
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ModelError(f"{path}: not a model state dict")
    odd = next((k for k, v in state.items() if v.is_complex() or v.layout != torch.strided or v.is_meta), None)
    if odd is not None:  # copied into the model, torch would warn and drop the imaginary part, or fail
        tensor = state[odd]
        kind = tensor.dtype if tensor.is_complex() else "meta" if tensor.is_meta else tensor.layout
        raise ModelError(f"{path}: not a model state dict: {quote(odd)} is a {str(kind).removeprefix('torch.')} "
                         "tensor; weights are dense real numbers")
    return state


def _blame_vocab(model: torch.nn.Module, state: Mapping[str, torch.Tensor], run_dir: Path, size: int) -> None:
    """When every shape that differs from ``model.pt`` is the vocabulary's size, the vocabulary is what does not
    belong to the run: say so, naming ``vocab.json``."""
    expected = model.state_dict()
    trained = [tensor.shape[k] for key, tensor in state.items() if key in expected
               and len(expected[key].shape) == len(tensor.shape)
               for k, want in enumerate(expected[key].shape) if want != tensor.shape[k] and want == size]
    differing = [key for key, tensor in state.items() if key in expected and expected[key].shape != tensor.shape]
    if trained and len(trained) >= len(differing):
        raise InputError(run_dir / VOCAB_FILE, None, f"has {size:,} entries, but {run_dir / MODEL_FILE} was "
                                                       f"trained on a vocabulary of {trained[0]:,}: it is not this "
                                                       "run's vocabulary")


def pad_batch(rows: Sequence[Sequence[int]], pad_index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad index rows into (B, T) ``tokens`` and a (B, T) boolean ``mask`` of real positions."""
    width = max((len(r) for r in rows), default=0)
    tokens = torch.full((len(rows), width), pad_index, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for b, row in enumerate(rows):
        tokens[b, : len(row)] = torch.as_tensor(row, dtype=torch.long)
        mask[b, : len(row)] = True
    return tokens, mask


class NeuralBackend(Backend, torch.nn.Module):
    """Shared machinery of trainable backends; subclasses set ``config_class`` and build their layers in
    ``__init__(config, vocab)``."""

    config_class: ClassVar[type]
    # Backends that read UPOS and predict labels get a TagVocab too (``tags.json`` in the run directory).
    needs_tags: ClassVar[bool] = False
    # Submodules that make up the backend's parser (what ``train.parser_lr`` applies to); empty: the backend has
    # no parser separate from the rest of the network.
    parser_modules: ClassVar[tuple[str, ...]] = ()
    # Trains under bfloat16 autocast (``train.precision: bf16``): its layers take torch's own ops under autocast,
    # or cast as autocast would.
    mixed_precision: ClassVar[bool] = False

    def parser_parameters(self) -> list[torch.nn.Parameter]:
        """The trainable parameters of :attr:`parser_modules` (empty when the backend names none)."""
        return [p for name in self.parser_modules for p in getattr(self, name).parameters() if p.requires_grad]

    def __init__(self, config: Any, vocab: Vocab) -> None:
        torch.nn.Module.__init__(self)
        self.config = config
        self.vocab = vocab

    @classmethod
    def from_config(cls, values: Mapping[str, Any] | None, vocab: Vocab, *, where: str = "recipe",
                    tags: TagVocab | None = None) -> "NeuralBackend":
        """A freshly initialised model from recipe values (the dataclass defaults fill the rest); sizes whose
        weights cannot be allocated are one line naming ``where`` and the size asked for."""
        config = build_config(cls.config_class, values, where=where)
        if cls.needs_tags and tags is None:
            raise ModelError(f"model '{cls.name}' needs UPOS/label vocabularies (tags.json)")
        try:
            return cls(config, vocab) if not cls.needs_tags else cls(config, vocab, tags)  # type: ignore[call-arg]
        except (MemoryError, RuntimeError) as exc:
            asked = _ALLOCATION.search(str(exc))
            if not isinstance(exc, (MemoryError, torch.OutOfMemoryError)) and asked is None:
                raise
            size = f" ({int(asked.group(1)) / 2**30:,.1f} GiB for one tensor)" if asked else ""
            raise ResourceError(f"{where}: model '{cls.name}' cannot allocate its weights{size}: the model_config "
                                "sizes are too large for this machine's memory; make them smaller") from None

    @classmethod
    def load(cls, run_dir: Path | None, *, device: str = "cpu", seed: int = 0) -> "NeuralBackend":
        if run_dir is None:
            raise ModelError(
                f"model '{cls.name}' must be trained first: pass a run directory made by "
                f"'depinduce train --model {cls.name}' to --model"
            )
        config_path = run_dir / CONFIG_FILE
        config = read_run_config(config_path)
        vocab = Vocab.load(run_dir / VOCAB_FILE)
        tags = TagVocab.load(run_dir / TAGS_FILE) if cls.needs_tags else None
        model = cls.from_config(config.get("model_config"), vocab, where=str(config_path), tags=tags)
        state = load_state_dict(run_dir / MODEL_FILE)
        try:
            model.load_state_dict(state)
        except RuntimeError as exc:
            _blame_vocab(model, state, run_dir, len(vocab))
            first = str(exc).strip().splitlines()[0]
            raise ModelError(f"{run_dir / MODEL_FILE}: does not fit the configured model ({first})") from exc
        train = config.get("train")
        if isinstance(train, dict) and isinstance(train.get("decoder"), str):
            model.default_decoder = train["decoder"]  # the run's dev evaluation's (parse's, if it gives trees)
            model.decoder_source = str(config_path)  # so a bad one is blamed on the run's config, not the user
        model.to(device)
        model.eval()
        return model

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def parse_scores(self, sentences: Sequence[Sequence[str]]) -> list[ParseScores]:
        """Normalise and index the words as the training data was, then score them with the network."""
        rows = [self.vocab.encode(words) for words in sentences]
        tokens, mask = pad_batch(rows, self.vocab.pad_index)
        was_training = self.training
        self.eval()
        try:
            with torch.inference_mode():
                scores = self.score_tensors(tokens.to(self.device), mask.to(self.device))
        finally:
            self.train(was_training)
        # float32 CPU tensors for the decoders; every other field (labels, flags) as the backend set it
        return [
            dataclasses.replace(
                s,
                heads=None if s.heads is None else s.heads.float().cpu(),
                distances=None if s.distances is None else s.distances.float().cpu(),
                heights=None if s.heights is None else s.heights.float().cpu(),
            )
            for s in scores
        ]

    @abstractmethod
    def score_tensors(self, tokens: torch.Tensor, mask: torch.Tensor) -> list[ParseScores]:
        """Per-sentence scores for a padded batch (``tokens`` (B, T), ``mask`` (B, T) true at real words); each
        ParseScores is cut to its sentence's length n (heads (n+1)×(n+1), distances n−1, heights n)."""

    def regularizer(self) -> torch.Tensor | None:
        """An extra training-loss term the engine adds (None: nothing to add)."""
        return None

    def word_inputs(self, forms: Sequence[Sequence[str]]) -> dict[str, torch.Tensor]:
        """Extra batch tensors computed from the original word forms (none by default; RNGTr's word pieces when
        its encoder is a BERT): the engine adds them to supervised batches, the backend to its parse inputs."""
        return {}


class LinearOutputLayer(ABC):
    """Mixin (listed before the backend base class) for a language model whose output layer is one linear map:
    the backend gives ``output_layer`` and inherits ``output_logits``; the engine's objectives then compute the
    loss with ``linear_cross_entropy``, which makes the output layer's gradients in the forward pass (the same
    numbers as the logits and ``F.cross_entropy``, without the logit-sized tensors autograd keeps)."""

    @abstractmethod
    def output_layer(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(x, weight, bias) of the output layer for hidden states (N, H): x is ``hidden`` as the layer reads it
        (after dropout), the logits are ``x @ weight.T + bias``."""

    def output_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits (N, V) of the output layer (oneDNN's product on CPU: ``rows_linear``)."""
        return rows_linear(*self.output_layer(hidden))

