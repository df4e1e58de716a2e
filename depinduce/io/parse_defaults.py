"""What ``parse`` writes and how long a sentence it takes by default: plain constants, apart from the parsing
pipeline (:mod:`depinduce.pipeline`, which imports torch), so that ``depinduce parse --help`` shows them at once."""

from __future__ import annotations

from depinduce.io import OUTPUT_FORMATS as TEXT_FORMATS

# the text formats written here, and the pictures drawn by depinduce.pictures
OUTPUT_FORMATS = (*TEXT_FORMATS, "html", "svg")
# the formats that carry head probabilities (parse --probs): CoNLL-U's MISC HeadProb, JSONL's head_probs
PROBS_FORMATS = ("conllu", "jsonl")
# models that score every pair of words need memory quadratic in the length
DEFAULT_MAX_WORDS = 1000
