"""evaluate(): punctuation by the gold, alignment, re-attachment, subsets, errors and rendering."""

from __future__ import annotations

import io
import json

import pytest
from nltk import Tree
from rich.console import Console

from depinduce.structures.sentence import Sentence
from depinduce.errors import DepinduceError, InputError
from depinduce.metrics import evaluate, render_table
from depinduce.metrics.evaluate import length_bucket, model_view

pytestmark = pytest.mark.lower_bounds  # numpy in scoring, quickly (scripts/check_lower_bounds.py)

# "Hello , world !" — gold: Hello <- "," <- world (root), "!" <- world.
# Removing "," and "!" re-attaches Hello to ","'s head, world: stripped gold heads [2, 0].
HELLO = ["Hello", ",", "world", "!"]
HELLO_XPOS = ["UH", ",", "NN", "."]
HELLO_GOLD = Sentence(words=HELLO, xpos=HELLO_XPOS, heads=[2, 3, 0, 3])


def pred(words: list[str], heads: list[int] | None = None, **kw: object) -> Sentence:
    return Sentence(words=words, heads=heads, **kw)  # type: ignore[arg-type]


def test_reattachment_on_both_sides_over_the_full_sequence() -> None:
    # pred: Hello -> "!" -> world (root), "," -> world. "!" removed: Hello goes to "!"'s head, world -> [2, 0]
    r = evaluate([HELLO_GOLD], [pred(HELLO, [4, 3, 0, 3])])
    dep = r.overall.dependency
    # 2 scored tokens, both heads right (after re-attachment on each side through different punctuation)
    assert (dep.tokens, dep.directed, dep.undirected, dep.root_correct) == (2, 2, 2, 1)
    assert (r.protocol.removed_tokens, r.protocol.pred_full, r.protocol.pred_stripped) == (2, 1, 0)
    assert r.protocol.rules_used == {"ptb": 1}


def test_prediction_over_the_stripped_sequence() -> None:
    # already punctuation-free prediction "hello world": world -> hello (root): heads [0, 1]
    r = evaluate([HELLO_GOLD], [pred(["hello", "WORLD"], [0, 1])])
    dep = r.overall.dependency
    # gold [2, 0] vs [0, 1]: directed 0/2; edges gold {1,2} {0,2}, pred {0,1} {1,2} -> undirected 1/2
    assert (dep.directed, dep.undirected, dep.root_correct) == (0, 1, 0)
    assert r.protocol.pred_stripped == 1


def test_keep_punct_scores_every_token() -> None:
    r = evaluate([HELLO_GOLD], [pred(HELLO, [4, 3, 0, 3])], keep_punct=True)
    dep = r.overall.dependency
    # gold [2, 3, 0, 3] vs [4, 3, 0, 3]: directed 3/4; edges gold {1,2} {2,3} {0,3} {3,4},
    # pred {1,4} {2,3} {0,3} {3,4} -> 3/4
    assert (dep.tokens, dep.directed, dep.undirected) == (4, 3, 3)
    with pytest.raises(InputError, match="sentence 1: the prediction has 2 tokens"):
        evaluate([HELLO_GOLD], [pred(["Hello", "world"], [0, 1])], keep_punct=True)


def test_punctuation_rule_is_decided_by_the_gold() -> None:
    words = ["$", "5", "!"]
    gold = Sentence(words=words, xpos=["$", "CD", "."], upos=["SYM", "NUM", "PUNCT"], heads=[0, 1, 1])
    full = pred(words, [0, 1, 1])
    # UPOS present -> UD rule: only "!" (PUNCT) removed, SYM kept -> 2 tokens
    assert evaluate([gold], [full]).overall.tokens == 2
    # the PTB preprocessing's metadata wins: "$" and "!" removed -> 1 token
    marked = Sentence(words=words, xpos=gold.xpos, upos=gold.upos, heads=gold.heads, metadata={"punct_rule": "ptb"})
    r = evaluate([marked], [full])
    assert r.overall.tokens == 1 and r.protocol.rules_used == {"ptb": 1}
    # explicit rules override the automatic choice
    assert evaluate([gold], [full], punct_rule="ptb").overall.tokens == 1
    # no tags at all -> token shape: "$" is a symbol, kept; "!" removed
    bare = Sentence(words=words, heads=[0, 1, 1])
    r = evaluate([bare], [full])
    assert r.overall.tokens == 2 and r.protocol.rules_used == {"shape": 1}
    with pytest.raises(DepinduceError, match="unknown punctuation rule"):
        evaluate([gold], [full], punct_rule="nope")


def test_labels_with_subtypes() -> None:
    gold = Sentence(words=["it", "was", "eaten"], heads=[3, 3, 0], deprels=["nsubj:pass", "aux:pass", "root"])
    p = pred(["it", "was", "eaten"], [3, 3, 0], deprels=["nsubj", "aux", "obj"])
    dep = evaluate([gold], [p]).overall.dependency
    # heads 3/3; labels nsubj:pass~nsubj, aux:pass~aux right, root vs obj wrong -> LAS 2/3
    assert (dep.directed, dep.labelled, dep.labelled_tokens) == (3, 2, 3)
    # no labels on the prediction -> LAS not reported
    assert evaluate([gold], [pred(["it", "was", "eaten"], [3, 3, 0])]).overall.dependency.las is None


def test_cycle_in_prediction_is_scored_and_counted_as_not_well_formed() -> None:
    gold = Sentence(words=["a", "b", "c"], heads=[2, 0, 2])
    r = evaluate([gold], [pred(["a", "b", "c"], [2, 1, 2])])
    dep = r.overall.dependency
    # directed a, c -> 2/3; well-formed 0/1
    assert (dep.directed, dep.well_formed, dep.sentences) == (2, 0, 1)
    assert r.metrics()["well_formed"] == 0.0


def test_mismatch_errors_name_files_sentences_and_tokens() -> None:
    gold = [Sentence(words=["a", "b"], heads=[0, 1]), Sentence(words=["The", "cat", "sat"], heads=[2, 3, 0])]
    with pytest.raises(DepinduceError, match=r"gold\.conllu has 2 sentences but out\.conllu has 1"):
        evaluate(gold, gold[:1], gold_path="gold.conllu", pred_path="out.conllu")
    bad = [gold[0], pred(["the", "dog", "sat"], [2, 3, 0], line=7)]
    with pytest.raises(InputError) as info:
        evaluate(gold, bad, gold_path="gold.conllu", pred_path="out.conllu")
    message = str(info.value)
    assert message.startswith("out.conllu:7: sentence 2: token 2")
    assert "'dog'" in message and "'cat'" in message
    with pytest.raises(InputError, match=r"head 9 of token 1 is outside 0\.\.3"):
        evaluate(gold, [gold[0], pred(["the", "cat", "sat"], [9, 3, 0])])


def test_forms_match_case_insensitively_and_through_digit_normalisation() -> None:
    assert model_view("1,984.5") == "n,n.n"
    gold = Sentence(words=["In", "1984", "."], xpos=["IN", "CD", "."], heads=[2, 0, 2])
    r = evaluate([gold], [pred(["in", "N"], [2, 0])])
    assert r.overall.dependency.directed == 2 and r.protocol.normalised_matches == 1
    # a word with a space (possible in UD) is written with "_" in the model's view
    spaced = Sentence(words=["New York", "1984"], upos=["PROPN", "NUM"], heads=[0, 1])
    assert evaluate([spaced], [pred(["new_york", "N"], [0, 1])]).protocol.normalised_matches == 2
    with pytest.raises(InputError, match="token 2 is 'n1984' in the prediction but '1984' in the gold"):
        evaluate([spaced], [pred(["new york", "n1984"], [0, 1])])


def test_max_length_and_length_buckets() -> None:
    def chain(n: int, punct: int) -> Sentence:
        # n words then `punct` full stops; words form a right-branching chain, stops attach to the last word
        words = [f"w{i}" for i in range(n)] + ["."] * punct
        heads = [i + 2 for i in range(n - 1)] + [0] + [n] * punct
        return Sentence(words=words, xpos=["NN"] * n + ["."] * punct, heads=heads)

    gold = [chain(10, 2), chain(11, 1), chain(45, 0), Sentence(words=["."], xpos=["."], heads=[0])]
    # prediction: left-branching over the full sequence -> after stripping, w0 root, w_i -> w_{i-1}
    preds = [pred(s.words, [0] + list(range(1, len(s.words)))) for s in gold]
    r = evaluate(gold, preds)
    # lengths count scored words: 10 -> 1-10 (the 2 stops do not count), 11 -> 11-20, 45 -> 41+;
    # the all-punctuation sentence has nothing to score
    assert {k: v.sentences for k, v in r.by_length.items()} == {"1-10": 1, "11-20": 1, "21-30": 0, "31-40": 0, "41+": 1}
    assert r.overall.tokens == 66 and r.protocol.sentences_empty == 1
    # gold right chain vs predicted left chain: no head right (directed 0); the n-1 edges {i, i+1} are shared
    # undirected, the root edges {n,0} and {1,0} are not -> undirected 9 + 10 + 44 = 63 of 66
    assert r.overall.dependency.directed == 0 and r.overall.dependency.undirected == 63
    small = evaluate(gold, preds, max_length=10)
    assert (small.overall.sentences, small.overall.tokens, small.protocol.sentences_over_max) == (1, 10, 2)
    assert length_bucket(10) == "1-10" and length_bucket(41) == "41+"


PTB_GOLD = "(S (NP (DT the) (NN cat)) (, ,) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .))"


def ptb_sentence() -> Sentence:
    tree = Tree.fromstring(PTB_GOLD)
    words = tree.leaves()
    xpos = [t for _, t in tree.pos()]
    # heads over "the cat , sat on the mat ." : the->cat, cat->sat, ,->sat, sat root, on->sat, the->mat, mat->on
    return Sentence(words=words, xpos=xpos, heads=[2, 4, 4, 0, 4, 7, 5, 4], tree=tree)


def test_uf1_with_gold_punctuation_removed_and_full_or_stripped_predictions() -> None:
    gold = ptb_sentence()
    # scored words "the cat sat on the mat" (n = 6); gold spans NP (0,2), VP (2,6), PP (3,6), NP (4,6)
    # right-branching over the 6 words -> (1,6) (2,6) (3,6) (4,6): matched 3 of 4 predicted, 3 of 4 gold
    right = Tree.fromstring("(X the (X cat (X sat (X on (X the mat)))))")
    stripped = pred(["the", "cat", "sat", "on", "the", "mat"], tree=right)
    r = evaluate([gold], [stripped])
    con = r.overall.constituency
    assert (con.matched, con.predicted, con.gold) == (3, 4, 4)
    # P = R = 3/4 -> F1 75 both ways
    assert abs(con.sentence_f1 - 75.0) < 1e-9 and abs(con.corpus_f1 - 75.0) < 1e-9
    # labels: NP 1 of 2 found ((0,2) missed), VP 1/1, PP 1/1
    assert dict(con.label_total) == {"NP": 2, "VP": 1, "PP": 1} and dict(con.label_found) == {"NP": 1, "VP": 1, "PP": 1}
    # the same tree over the full sequence with punctuation leaves: the "," and "." disappear on projection
    full_tree = Tree.fromstring("(X the (X cat (X , (X sat (X on (X the (X mat .)))))))")
    r_full = evaluate([gold], [pred(gold.words, tree=full_tree)])
    assert r_full.overall.constituency == con


def test_uf1_from_dependency_subtrees_when_the_prediction_has_only_heads() -> None:
    gold = ptb_sentence()
    # stripped pred heads over "the cat sat on the mat": the->cat, cat->sat, sat root, on->sat, the->mat, mat->on
    # subtrees: cat (0,2), on (3,6), mat (4,6), sat (0,6)=whole -> scored {(0,2), (3,6), (4,6)}
    p = pred(["the", "cat", "sat", "on", "the", "mat"], [2, 3, 0, 3, 6, 4])
    r = evaluate([gold], [p])
    con = r.overall.constituency
    # gold {(0,2), (2,6), (3,6), (4,6)}: matched 3 -> P = 1, R = 3/4 -> F1 = 6/7
    assert (con.matched, con.predicted, con.gold) == (3, 3, 4)
    assert abs(con.sentence_f1 - 600 / 7) < 1e-9
    assert r.protocol.uf1_from_heads
    # dependency metrics are computed too: gold stripped heads [2, 3, 0, 3, 6, 4] -> all right
    assert r.overall.dependency.directed == 6


def test_two_word_and_one_word_sentences_in_uf1() -> None:
    two_tree = Tree.fromstring("(S (NP (NNS cats)) (VP (VBP sleep)))")
    two = Sentence(words=["cats", "sleep"], xpos=["NNS", "VBP"], tree=two_tree)
    one = Sentence(words=["Go", "."], xpos=["VB", "."], tree=Tree.fromstring("(S (VP (VB Go)) (. .))"))
    preds = [pred(["cats", "sleep"], tree=Tree("", ["cats", "sleep"])), pred(["go"], tree=Tree("", ["go"]))]
    con = evaluate([two, one], preds).overall.constituency
    # the 2-word sentence scores 100 (no spans either side); the 1-word sentence is skipped
    assert con.sentences == 1 and con.sentence_f1 == 100.0


def test_nothing_to_score_and_partial_annotation_are_errors() -> None:
    gold = [Sentence(words=["a"], heads=[0])]
    with pytest.raises(DepinduceError, match="nothing to score"):
        evaluate(gold, [pred(["a"])])
    two = [Sentence(words=["a"], heads=[0]), Sentence(words=["b"])]
    with pytest.raises(InputError, match="sentence 2 has no heads"):
        evaluate(two, [pred(["a"], [0]), pred(["b"], [0])])


def test_json_and_table_rendering() -> None:
    gold = ptb_sentence()
    r = evaluate([gold, gold], [pred(gold.words, gold.heads), pred(gold.words, [2, 4, 4, 0, 4, 7, 4, 4])])
    data = json.loads(r.to_json())
    # 6 + 6 scored tokens; second prediction gets "mat" wrong (on -> sat instead of mat -> on): 11/12
    assert data["dependency"]["dda"] == {"correct": 11, "total": 12, "percent": 100 * 11 / 12}
    assert data["protocol"]["scored_tokens"] == 12 and data["by_length"]["1-10"]["sentences"] == 2
    # UF1 from subtrees: first prediction is the gold tree's dependency form, {(0,2), (3,6), (4,6)} vs
    # gold {(0,2), (2,6), (3,6), (4,6)} -> F1 6/7; second: mat -> sat makes "on" a leaf -> {(0,2), (4,6)}:
    # P = 1, R = 2/4 -> F1 2/3. Sentence-level (6/7 + 2/3) / 2; corpus 3+2 matched, 3+2 predicted, 4+4 gold
    con = data["constituency"]
    assert abs(con["uf1_sentence"]["percent"] - 50 * (6 / 7 + 2 / 3)) < 1e-9
    assert (con["uf1_corpus"]["matched"], con["uf1_corpus"]["predicted"], con["uf1_corpus"]["gold"]) == (5, 5, 8)
    assert data["metrics"]["dda"] == 100 * 11 / 12
    out = io.StringIO()
    render_table(r, Console(file=out, width=120), by_length=True)
    text = out.getvalue()
    assert "DDA (UAS)" in text and "91.7" in text and "11/12 tokens" in text and "76.2" in text
    assert "Protocol" in text and "re-attached to its nearest kept ancestor" in text
    assert "by sentence length" in text


def test_gold_tags_come_from_the_tree_when_xpos_is_missing_and_trees_must_cover_the_tokens() -> None:
    tree = Tree.fromstring(PTB_GOLD)
    gold = Sentence(words=tree.leaves(), tree=tree)
    words = ["the", "cat", "sat", "on", "the", "mat"]
    p = pred(words, tree=Tree.fromstring("(X the (X cat (X sat (X on (X the mat)))))"))
    r = evaluate([gold], [p])
    # the preterminals "," and "." are PTB punctuation tags -> PTB rule, 2 tokens removed, same 3/4 as above
    assert r.protocol.rules_used == {"ptb": 1} and r.protocol.removed_tokens == 2
    assert r.overall.constituency.matched == 3
    short = pred(words, tree=Tree.fromstring("(X the (X cat (X sat on)))"))
    with pytest.raises(InputError, match="sentence 1: the tree has 4 leaves for 6 tokens"):
        evaluate([gold], [short], pred_path="out.txt")


def test_table_without_length_breakdown() -> None:
    out = io.StringIO()
    render_table(evaluate([HELLO_GOLD], [pred(HELLO, [4, 3, 0, 3])]), Console(file=out, width=120))
    text = out.getvalue()
    assert "2/2 tokens" in text and "by sentence length" not in text and "UF1" not in text
    assert "-NONE-) in 1 sentence (rule chosen" in text and "Scored: 2 tokens in 1 sentence;" in text


def test_las_only_for_really_labelled_files() -> None:
    gold = Sentence(words=["a", "b"], heads=[2, 0], deprels=["nsubj:pass", "root"])
    labelled = evaluate([gold], [pred(["a", "b"], [2, 0], deprels=["nsubj", "root"])])
    assert labelled.overall.dependency.las == 100.0
    # an unlabelled parse written as root/dep: LAS would only repeat DDA, so it is not reported
    unlabelled = evaluate([gold], [pred(["a", "b"], [2, 0], deprels=["dep", "root"])])
    assert unlabelled.overall.dependency.las is None and unlabelled.metrics()["las"] is None


def test_full_prediction_against_a_punctuation_free_gold_tree() -> None:
    # gold .trees file: punctuation already removed; the parse output keeps ",", "US$" and "." (7 tokens)
    gold = Sentence(words=["it", "cost", "5", "dollars"],
                    tree=Tree.fromstring("(S (NP (PRP it)) (VP (VBD cost) (NP (CD 5) (NNS dollars))))"))
    words = ["It", ",", "cost", "US$", "5", "dollars", "."]
    # predicted spans over all 7 tokens: (cost US$ 5 dollars) = 2..6 and (US$ 5 dollars) = 3..6
    p = Sentence(words=words, tree=Tree("", [Tree("", ["It", ","]), Tree("", ["cost", Tree("", ["US$", "5", "dollars"])]), "."]))
    r = evaluate([gold], [p])
    assert r.protocol.pred_aligned == 1
    # after removal: pred spans {(1,4) cost 5 dollars, (2,4) 5 dollars}; (0,1) is trivial.
    # gold spans (excluding trivial): VP (1,4), NP (2,4) -> F1 = 100
    assert r.overall.constituency.sentence_f1 == 100.0
    # a word the gold lacks is not punctuation: a clear error, not a silent alignment
    bad = Sentence(words=["It", "really", "cost", "5", "dollars"], tree=Tree("", ["It", "really", "cost", "5", "dollars"]))
    with pytest.raises(InputError, match="the prediction has 5 tokens"):
        evaluate([gold], [bad])
