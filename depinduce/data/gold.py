"""Gold trees in the one form every dependency scorer reads: what ``depinduce convert`` writes.

Any gold depinduce reads — CoNLL-U (comments, multiword tokens, empty nodes, an enhanced graph), CoNLL-X (PHEAD
and PDEPREL), word/tag/head columns, or labelled PTB trees, turned into heads by the head rules ``preprocess ptb``
uses — becomes sentences of syntactic words with integer heads, for the writer of ``parse``'s default output:
ten columns, no comment, DEPS ``_`` (MaltEval reads column 9 as PHEAD and aborts on ``0:root``).

What a comment said about punctuation (``# punct_rule = ptb`` in ``preprocess ptb``'s files, whose UPOS is mapped
to UD tags, so ``$`` is SYM there but a PTB punctuation tag) must survive without it, so that ``eval`` removes
from the written gold exactly what it removes from the original.  Each sentence's UPOS column is therefore the
first of these with which the one punctuation rule (:func:`~depinduce.data.punct.sentence_punct_mask`), reading
the written sentence, finds exactly the punctuation it finds in the input: under the PTB rule the PTB tags
themselves (both POS columns hold them, as in Penn2Malt's CoNLL-X); the UPOS as given; the UPOS with ``PUNCT``
exactly on the punctuation (and ``X`` where a tag said punctuation that the rule does not).
"""

from __future__ import annotations

from collections.abc import Sequence

from conllu.models import TokenList

from depinduce.data.headrules import get_head_rules
from depinduce.data.punct import UD_PUNCT_UPOS, ptb_tag_column, sentence_punct_mask, sentence_punct_rule
from depinduce.errors import InputError
from depinduce.io import parse_sentences_text
from depinduce.io.brackets import looks_labelled, parse_bracket_nodes
from depinduce.io.conllu_format import UPOS_TAGS, without_enhanced_graph
from depinduce.io.detect import detect_format_text
from depinduce.io.lines import display_name, read_text
from depinduce.structures.sentence import Sentence

_NO_TAG = (None, "", "_")


def read_gold(path: str, fmt: str = "auto", *, head_rules: str = "penn2malt") -> list[Sentence]:
    """Every sentence of a gold file (``-``: stdin), with heads: CoNLL-U, CoNLL-X and word/tag/head columns as
    ``eval`` reads them, labelled PTB trees (``.mrg``, ``.trees``) converted by ``head_rules`` as ``preprocess ptb``
    converts them (traces removed, tags kept as XPOS).  A sentence without heads is a located error."""
    name = display_name(path)
    text = read_text(path)
    if fmt == "auto":
        fmt = detect_format_text(text, name)
    if fmt == "brackets":
        sentences = _trees(text, name, head_rules)
    else:
        sentences = parse_sentences_text(text, name, fmt)
    for number, sentence in enumerate(sentences, start=1):
        if sentence.heads is None:
            raise InputError(name, sentence.line, f"sentence {number} has no heads; convert writes gold trees, which "
                                                  "need a HEAD for every word")
    return sentences


def _trees(text: str, name: str, head_rules: str) -> list[Sentence]:
    """Labelled PTB trees with heads by the head rules (the reader of ``preprocess ptb``)."""
    from depinduce.data.ptb import read_mrg, split_trees  # nltk's corpus reader: only for trees

    rules = get_head_rules(head_rules)
    roots = parse_bracket_nodes(text, name)
    if roots and not looks_labelled(roots):
        raise InputError(name, roots[0].line, "unlabelled trees have no phrase labels or tags for head rules; "
                                              "convert needs labelled PTB trees (such as .mrg files)")
    sentences = read_mrg(text.encode("utf-8"), name, rules=rules)
    kept = {int(s.sent_id.rsplit(":", 1)[1]) for s in sentences if s.sent_id}
    for number, tree in enumerate(split_trees(text, name), start=1):
        if number not in kept:  # dropped, the gold would pair every later parse with the wrong sentence
            raise InputError(name, tree.line, f"tree {number} has no words (only traces or empty elements); a gold "
                                              "file needs a word in every tree, so that the parses line up with it")
    return sentences


def for_scorers(sentences: Sequence[Sentence], name: str) -> list[Sentence]:
    """The sentences with the UPOS that carries their punctuation rule without comments (module docstring), their
    enhanced graph and comments dropped; ``name`` is the file named when a sentence's rule cannot be carried."""
    out = []
    for number, sentence in enumerate(sentences, start=1):
        upos = _carrying_upos(sentence)
        if upos is None:
            raise InputError(name, sentence.line, f"sentence {number}: its '# punct_rule' comment finds other "
                                                  "punctuation than its tags would, which no tag column can say "
                                                  "without the comment; remove the comment or fix the tags")
        out.append(_with_upos(sentence, upos))
    return out


def _carrying_upos(sentence: Sentence) -> list[str] | None:
    """The first UPOS column (module docstring) with which the written sentence keeps its punctuation."""
    rule = sentence_punct_rule(sentence)
    wanted = sentence_punct_mask(sentence, rule)
    given = [tag if tag not in _NO_TAG else "X" for tag in (sentence.upos or ["X"] * len(sentence.words))]
    marked = [UD_PUNCT_UPOS if punct else (tag if tag in UPOS_TAGS and tag != UD_PUNCT_UPOS else "X")
              for tag, punct in zip(given, wanted)]
    candidates = [given, marked]
    ptb_tags = ptb_tag_column(sentence) if rule == "ptb" else None
    if ptb_tags is not None:
        candidates.insert(0, [tag if tag not in _NO_TAG else "X" for tag in ptb_tags])
    for upos in candidates:
        written = Sentence(words=sentence.words, upos=upos, xpos=sentence.xpos)
        if sentence_punct_mask(written) == wanted:
            return upos
    return None


def _with_upos(sentence: Sentence, upos: list[str]) -> Sentence:
    """A copy with ``upos`` (in its CoNLL-U source too, whose columns the writer keeps) and no comment."""
    source = sentence.source
    if isinstance(source, TokenList):
        source = without_enhanced_graph(source)
        for token, tag in zip((t for t in source if isinstance(t.get("id"), int)), upos):
            token["upos"] = tag
    return Sentence(words=sentence.words, xpos=sentence.xpos, upos=upos, heads=sentence.heads,
                    deprels=sentence.deprels, sent_id=sentence.sent_id, text=sentence.text, line=sentence.line,
                    token_lines=sentence.token_lines, source=source)
