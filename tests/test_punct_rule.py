"""One punctuation rule for ``parse``, ``eval`` and ``show``: what ``parse`` hides from the model is what ``eval``
leaves out, and what ``show`` counts is what ``eval`` scores — on Penn2Malt-style CoNLL-X, text and the PTB."""

from __future__ import annotations

import json
import re
from pathlib import Path

from depinduce.data.punct import is_punct_form
from depinduce.io import read_sentences
from cli_support import ok, run


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def penn2malt(nltk_data: Path, n: int = 40) -> str:
    """The first n sentences of NLTK's dependency_treebank as CoNLL-X, the PTB tag in CPOSTAG and POSTAG (as
    Penn2Malt and the CoNLL-2007 English data write it)."""
    import nltk

    if str(nltk_data) not in nltk.data.path:
        nltk.data.path.insert(0, str(nltk_data))
    from nltk.corpus import dependency_treebank

    blocks = []
    for graph in dependency_treebank.parsed_sents()[:n]:
        rows = []
        for i in range(1, len(graph.nodes)):
            node = graph.nodes[i]
            label = "ROOT" if node["head"] == 0 else "DEP"
            rows.append(f"{i}\t{node['word']}\t_\t{node['tag']}\t{node['tag']}\t_\t{node['head']}\t{label}\t_\t_")
        blocks.append("\n".join(rows) + "\n\n")
    return "".join(blocks)


def test_parse_hides_exactly_what_eval_leaves_out_on_penn2malt_conllx(nltk_data: Path, tmp_path: Path) -> None:
    gold = write(tmp_path / "wsj.conllx", penn2malt(nltk_data))
    parsed = read_sentences(write(tmp_path / "rb.conllu", ok(["parse", "--model", "right-branching",
                                                              "--input-format", "conllu", "--quiet", str(gold)])))
    hidden = [[label == "punct" for label in s.deprels] for s in parsed]
    assert sum(map(sum, hidden)) > 0 and all(
        form in (",", ".", "``", "''", ":", "-LRB-", "-RRB-", "$", "#", "--", ";", "...", "`", "'", "?", "-", "!")
        for s, mask in zip(parsed, hidden) for form, h in zip(s.words, mask) if h)
    # a prediction over exactly the tokens parse showed the model is eval's punctuation-free sequence
    visible = "".join(
        "".join(f"{k}\t{w}\t_\t_\t_\t_\t{k - 1}\tdep\t_\t_\n" for k, w in
                enumerate((w for w, h in zip(s.words, mask) if not h), start=1)) + "\n"
        for s, mask in zip(parsed, hidden))
    stripped = write(tmp_path / "visible.conllu", visible)
    result = json.loads(ok(["eval", "--gold", str(gold), "--pred", str(stripped), "--json"]))
    assert result["protocol"]["removed_tokens"] == sum(map(sum, hidden))
    assert result["protocol"]["pred_stripped"] == len(parsed)
    assert result["protocol"]["rules_used"] == {"ptb": len(parsed)}


def test_symbols_in_text_are_words() -> None:
    assert not any(is_punct_form(token) for token in ("$", "%", "&", "#", "@", "US$"))
    assert all(is_punct_form(token) for token in (",", ".", "...", "--", "(", "“", "。", "-LRB-"))
    out = ok(["parse", "--model", "right-branching", "--quiet", "--tokenized", "-"],
             "Shares of A & B rose 5 % to $ 3 , # 1 .\n")
    rows = [line.split("\t") for line in out.splitlines() if line]
    marks = {r[1]: (r[3], r[7]) for r in rows}
    for word in ("&", "%", "$", "#"):
        assert marks[word] == ("X", "dep"), word
    assert marks[","] == ("PUNCT", "punct") and marks["."] == ("PUNCT", "punct")
    # the words eval scores by shape are the words parse showed the model
    gold = "Shares of A & B rose 5 % to $ 3 , # 1 .".split()
    assert sum(not is_punct_form(w) for w in gold) == sum(r[7] != "punct" for r in rows) == 13


def caption_counts(text: str, pattern: str) -> list[tuple[int, ...]]:
    return [tuple(map(int, m.groups())) for m in re.finditer(pattern, text)]


def test_show_counts_heads_as_eval_scores_them(ptb_sample: Path, tmp_path: Path) -> None:
    gold = ptb_sample / "test.conllu"
    pred = write(tmp_path / "rb.conllu", ok(["parse", "--model", "right-branching", "--input-format", "conllu",
                                             "--quiet", str(gold)]))
    shown = ok(["show", str(pred), "--gold", str(gold), "--no-color"])
    counts = caption_counts(shown, r"\((\d+) of (\d+) heads wrong")
    scored = json.loads(ok(["eval", "--gold", str(gold), "--pred", str(pred), "--json"]))["dependency"]["dda"]
    assert len(counts) == 661
    assert sum(n for _, n in counts) == scored["total"] == 13812
    assert sum(k for k, _ in counts) == scored["total"] - scored["correct"]


def test_show_aligns_parse_output_with_punctuation_to_punctuation_free_trees(ptb_sample: Path,
                                                                              tmp_path: Path) -> None:
    gold = ptb_sample / "test.trees"
    conllu = ptb_sample / "test.conllu"
    trees = write(tmp_path / "rb.trees", ok(["parse", "--model", "right-branching", "--input-format", "conllu",
                                             "--format", "brackets", "--quiet", str(conllu)]))
    scored = json.loads(ok(["eval", "--gold", str(gold), "--pred", str(trees), "--json"]))["constituency"]
    assert scored["sentences"] > 600  # eval aligns the pair
    shown = ok(["show", str(trees), "--gold", str(gold), "--no-color"])
    missing = caption_counts(shown, r"(\d+) gold spans missing")
    assert sum(k for (k,) in missing) == scored["uf1_corpus"]["gold"] - scored["uf1_corpus"]["matched"]
    heads = write(tmp_path / "rb.conllu", ok(["parse", "--model", "right-branching", "--input-format", "conllu",
                                              "--quiet", str(conllu)]))
    from_heads = json.loads(ok(["eval", "--gold", str(gold), "--pred", str(heads), "--json"]))["constituency"]
    shown = ok(["show", str(heads), "--gold", str(gold), "--no-color"])
    missing = caption_counts(shown, r"(\d+) gold spans missing")
    assert sum(k for (k,) in missing) == from_heads["uf1_corpus"]["gold"] - from_heads["uf1_corpus"]["matched"]

