"""What the user asked ``parse`` for, and the checks that refuse an impossible request before any work is done."""

from __future__ import annotations

from dataclasses import dataclass

from depinduce.errors import ModelError, UsageError
from depinduce.io.parse_defaults import DEFAULT_MAX_WORDS, OUTPUT_FORMATS, PROBS_FORMATS
from depinduce.models.base import Backend
from depinduce.pipeline.decode import decoders_for

DEPENDENCY_FORMATS = ("conllu", "conllx")
# Pictures draw the heads and, where the model induces one, its own tree (never one derived from the heads).
PICTURE_FORMATS = ("html", "svg")


@dataclass(frozen=True)
class ParseRequest:
    """What the user asked ``parse`` for."""

    fmt: str = "conllu"
    decoder: str = "mst"
    batch_size: int = 32
    # Longest sentence (in the words the backend sees) a score-matrix backend is given: its memory grows with the
    # square of the length, so a longer one is refused in one line before memory runs out.  None: no limit.
    max_words: int | None = DEFAULT_MAX_WORDS
    # The input's name, for errors located as FILE:LINE.
    source: str = "<input>"
    # Each word's head distribution (``--probs``), read as ``Backend.head_probs`` says, into Sentence.head_probs.
    probs: bool = False

    def wants_heads(self, backend: Backend) -> bool:
        """Whether the output shows heads: every format but brackets, and brackets too for a dependency-only
        model (its tree comes from its heads)."""
        return backend.capabilities.dependency and (self.fmt != "brackets" or not backend.capabilities.constituency)

    def wants_tree(self, backend: Backend) -> bool:
        """Whether the output shows a constituency tree: brackets and jsonl always, pictures when the model
        induces one."""
        return self.fmt in ("brackets", "jsonl") or (self.fmt in PICTURE_FORMATS and backend.capabilities.constituency)


def check_request(backend: Backend, request: ParseRequest) -> None:
    """Refuse impossible combinations before any work is done."""
    caps = backend.capabilities
    if request.decoder not in decoders_for(backend):
        raise UsageError(f"decoder '{request.decoder}' does not apply to model '{backend.name}'; choose one of "
                         f"{', '.join(decoders_for(backend))} (`depinduce models` lists each backend's own)")
    if request.fmt not in OUTPUT_FORMATS:
        raise UsageError(f"unknown output format '{request.fmt}'; choose one of {', '.join(OUTPUT_FORMATS)}")
    if request.fmt in DEPENDENCY_FORMATS and not caps.dependency:
        raise ModelError(
            f"model '{backend.name}' induces constituency only and cannot write {request.fmt}; "
            "use --format brackets (or jsonl)"
        )
    if not (caps.dependency or caps.constituency):
        raise ModelError(f"model '{backend.name}' produces neither dependencies nor constituency")
    if request.probs:
        check_probs(backend, request.fmt)


def check_probs(backend: Backend, fmt: str) -> None:
    """``--probs`` needs a model that computes a head distribution and a format that can carry it."""
    if backend.head_probs == "none" or not backend.capabilities.dependency:
        what = "its trees come from split scores, not heads" if not backend.capabilities.dependency else "none"
        raise ModelError(f"model '{backend.name}' computes no head distribution ({what}); --probs applies to "
                         "dmv, probformer, udgn, structformer, rngtr and the baselines")
    if fmt not in PROBS_FORMATS:
        raise UsageError(f"--probs writes to {' or '.join(f'--format {f}' for f in PROBS_FORMATS)}, not {fmt}")


def check_refines(backend: Backend) -> None:
    """Initial graphs (``--init``) are for backends whose input view refines a graph."""
    if not backend.input_view.refines:
        raise ModelError(f"model '{backend.name}' does not refine a graph; --init applies to refining "
                         "backends (rngtr)")
