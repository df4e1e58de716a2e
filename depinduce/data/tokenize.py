"""Word tokenisation of raw text lines, keeping the original characters of every token.

``parse`` must write tokens exactly as they appear in the input (the UD validator checks that ``# text`` equals the
forms joined with ``SpaceAfter=No``), so we use nltk's TreebankWordTokenizer through ``span_tokenize``: the
token boundaries are Treebank's, the forms are the input's own substrings (``"`` stays ``"``, not ``````).
"""

from __future__ import annotations

from dataclasses import dataclass

from nltk.tokenize import TreebankWordTokenizer

_TREEBANK = TreebankWordTokenizer()


@dataclass
class Tokens:
    """Tokens of one line and, for each, whether a space followed it in the original text."""

    forms: list[str]
    space_after: list[bool]


def _spans_to_tokens(line: str, spans: list[tuple[int, int]]) -> Tokens:
    forms = [line[a:b] for a, b in spans]
    space_after = [b < len(line) and line[b].isspace() for _, b in spans]
    if space_after:
        space_after[-1] = True  # nothing follows the last token of a line
    return Tokens(forms, space_after)


def tokenize_line(line: str, *, pretokenized: bool = False) -> Tokens:
    """Split one line into tokens: on whitespace when ``pretokenized``, else by Treebank rules."""
    line = line.rstrip("\r\n")
    if pretokenized:
        spans, pos = [], 0
        for form in line.split():
            start = line.index(form, pos)
            spans.append((start, start + len(form)))
            pos = start + len(form)
        return _spans_to_tokens(line, spans)
    try:
        spans = list(_TREEBANK.span_tokenize(line))
    except ValueError:
        # span alignment can fail on exotic quote sequences; fall back to Treebank tokens aligned greedily.
        spans, pos = [], 0
        for form in _TREEBANK.tokenize(line):
            original = form
            start = line.find(form, pos)
            if start < 0 and form in ("``", "''"):
                original = '"'  # Treebank rewrites straight double quotes
                start = line.find(original, pos)
            if start < 0:
                raise ValueError(f"cannot align token {form!r} with the input text")
            spans.append((start, start + len(original)))
            pos = start + len(original)
    return _spans_to_tokens(line, spans)
