"""The names the commands offer as choices — input and output formats, head rules, corpora, decoders — taken
from the layers that define them, so the command line needs nothing below the API to build its options.

Plain constants and registry metadata only: help imports this module, and must not wait for torch or numpy.
"""

from __future__ import annotations

from depinduce.data.headrules import HEAD_RULES
from depinduce.data.text import NLTK_CORPORA
from depinduce.io import INPUT_FORMATS
from depinduce.io.parse_defaults import DEFAULT_MAX_WORDS, OUTPUT_FORMATS
from depinduce.models.registry import declared_decoders
from depinduce.structures.decoder_names import DECODERS

# the head rules that turn PTB trees into dependencies (``--head-rules``), in the order they are defined
HEAD_RULE_NAMES: tuple[str, ...] = tuple(HEAD_RULES)

__all__ = ["DECODERS", "DEFAULT_MAX_WORDS", "HEAD_RULE_NAMES", "INPUT_FORMATS", "NLTK_CORPORA", "OUTPUT_FORMATS",
           "declared_decoders"]
