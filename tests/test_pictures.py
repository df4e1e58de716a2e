"""Tree pictures: the SVG of a sentence (arcs, punctuation, gold marks, escaping), ``depinduce show`` in text and
HTML, ``parse --format html|svg``, and the HTML page rendered by a real headless Chromium."""

from __future__ import annotations

import io
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from nltk import Tree

from depinduce.cli.main import cli
from depinduce.io import read_sentences, write_sentences
from depinduce.pictures.figures import compare, sentence_svg, write_html, write_svg
from depinduce.pictures.terminal import sentences_text
from depinduce.structures.sentence import Sentence

SVG = "{http://www.w3.org/2000/svg}"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync")


def run_cli(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def barks(heads: list[int] | None = None, deprels: list[str] | None = None) -> Sentence:
    return Sentence(words=["The", "dog", "barks", "."], upos=["DET", "NOUN", "VERB", "PUNCT"],
                    heads=heads or [2, 3, 0, 3], deprels=deprels or ["det", "nsubj", "root", "punct"])


def groups(svg: str, cls: str) -> list[ET.Element]:
    """The <g> elements of ``svg`` whose class list holds ``cls``."""
    root = ET.fromstring(svg)
    return [g for g in root.iter(f"{SVG}g") if cls in g.get("class", "").split()]


def word_texts(svg: str) -> list[str]:
    root = ET.fromstring(svg)
    return [t.text or "" for t in root.iter(f"{SVG}text") if t.get("class") == "word"]


# ------------------------------------------------------------------------------------------------ SVG


def test_svg_draws_every_word_and_one_arc_per_non_root_head() -> None:
    sentence = Sentence(words="A big dog saw two cats , and ran .".split(),
                        heads=[3, 3, 4, 0, 6, 4, 9, 9, 4, 4])
    svg = sentence_svg(sentence)
    assert word_texts(svg) == sentence.words
    arcs = groups(svg, "arc")
    assert len(arcs) == 9
    assert sorted((int(g.get("data-head")), int(g.get("data-dep"))) for g in arcs) == sorted(
        (h, d) for d, h in enumerate(sentence.heads, start=1) if h != 0)
    assert [g.get("data-dep") for g in groups(svg, "root")] == ["4"]
    # by shape (no tags): ',' and '.' are punctuation and only their arcs are drawn lighter
    assert sorted(int(g.get("data-dep")) for g in arcs if "punct" in g.get("class").split()) == [7, 10]


def test_punctuation_follows_the_tags() -> None:
    sentence = Sentence(words=["Go", "--", "now", "!"], upos=["VERB", "PUNCT", "ADV", "SYM"], heads=[0, 1, 1, 1])
    punct = [int(g.get("data-dep")) for g in groups(sentence_svg(sentence), "punct")]
    assert punct == [2]  # UPOS decides: '!' tagged SYM is a word


def test_arcs_over_more_words_are_drawn_higher() -> None:
    sentence = Sentence(words=["a", "b", "c", "d"], heads=[4, 3, 4, 0])
    arcs = {int(g.get("data-dep")): g for g in groups(sentence_svg(sentence), "arc")}

    def top(g: ET.Element) -> float:
        path = g.find(f"{SVG}path").get("d")
        return min(float(point.split(",")[1]) for point in path.replace("M", " ").replace("L", " ")
                   .replace("Q", " ").split() if "," in point)

    assert top(arcs[1]) < top(arcs[2]) and top(arcs[1]) < top(arcs[3])  # 4→1 covers both others
    assert top(arcs[2]) == top(arcs[3])  # neither covers the other: one level


def test_gold_marks_exactly_the_wrong_arcs() -> None:
    gold = barks()
    pred = barks(heads=[3, 3, 0, 2], deprels=["det", "obj", "root", "punct"])
    marks = compare(pred, gold)
    # '.' (UPOS PUNCT) is not scored, as in eval: its wrong head is no error, and its arc is dim
    assert marks.wrong_heads == {1} and marks.wrong_labels == {2} and marks.unscored == {4}
    svg = sentence_svg(pred, marks)
    predicted = [g for g in groups(svg, "arc") if "gold" not in g.get("class").split()]
    assert sorted(int(g.get("data-dep")) for g in predicted if "wrong" in g.get("class").split()) == [1]
    assert [int(g.get("data-dep")) for g in predicted if "punct" in g.get("class").split()] == [4]
    gold_arcs = groups(svg, "gold")
    assert sorted((int(g.get("data-head")), int(g.get("data-dep"))) for g in gold_arcs) == [(2, 1)]
    wrong_labels = [t.text for t in ET.fromstring(svg).iter(f"{SVG}text") if "wrong-label" in t.get("class", "")]
    assert wrong_labels == ["obj"]
    # a correct prediction has nothing marked
    clean = sentence_svg(gold, compare(gold, gold))
    assert not groups(clean, "wrong") and not groups(clean, "gold") and not groups(clean, "missing")


def test_gold_tree_spans_missing_from_the_prediction_are_highlighted() -> None:
    words = ["the", "old", "man", "saw", "it"]
    gold = Sentence(words=words, tree=Tree.fromstring("(S (NP the old man) (VP saw it))"))
    pred = Sentence(words=words, tree=Tree("", ["the", Tree("", ["old", "man", "saw"]), "it"]))
    marks = compare(pred, gold)
    svg = sentence_svg(pred, marks)
    missing = sorted((int(g.get("data-start")), int(g.get("data-end"))) for g in groups(svg, "missing"))
    assert missing == [(0, 3), (3, 5)]
    wrong_nodes = [(int(g.get("data-start")), int(g.get("data-end"))) for g in groups(svg, "node")
                   if "wrong" in g.get("class").split()]
    assert wrong_nodes == [(1, 4)]
    assert len(groups(svg, "node")) == 2  # the root and (old man saw): the drawn tree is the prediction's


def test_special_characters_are_escaped() -> None:
    words = ["<b>", "&", '"q"', "'", "x\x01y"]
    sentence = Sentence(words=words, heads=[0, 1, 1, 1, 1], deprels=["root", "a&b", "<c>", '"', "'"],
                        upos=["X", "<", "&", "X", "X"], tree=Tree("<S&>", words))
    svg = sentence_svg(sentence)
    assert word_texts(svg) == ["<b>", "&", '"q"', "'", "x\\x01y"]
    stream = io.StringIO()
    write_svg([sentence, sentence], stream)
    document = ET.fromstring(stream.getvalue())
    assert len([g for g in document.iter(f"{SVG}g") if g.get("class") == "sentence"]) == 2
    page = io.StringIO()
    write_html([sentence], page)
    assert "<b>" not in page.getvalue().split("<body>")[1]


def test_long_and_wide_sentences_get_wider_figures() -> None:
    def width(words: list[str]) -> float:
        return float(ET.fromstring(sentence_svg(Sentence(words=words))).get("width"))

    assert width(["w"] * 80) > 8 * width(["w"] * 8)
    assert width(["天安门广场上"]) > width(["abcdef"])
    zh = Sentence(words=["我", "喜欢", "北京", "。"], heads=[2, 0, 2, 2])
    assert word_texts(sentence_svg(zh)) == zh.words


# ------------------------------------------------------------------------------------------------ text

THE_DOG = """\
# 1: The dog barks .
           ROOT
 ┌───┐┌────┐│┌────┐
 ▼   │▼    │▼│    ▼
The  dog  barks   .
det nsubj root  punct
"""

# '.' is not scored (as in eval): its wrong head is neither counted nor marked
THE_DOG_GOLD = """\
# 1: The dog barks . (1 of 3 heads wrong)
             ROOT
         ┌────┼─────┐
  ┌──────┼───┐│     │
  │     ┌┼───┤│     │
  ▼     ▼│   │▼     ▼
 The   dog  barks   .
 det  nsubj root  punct
✗→dog
"""


def test_text_arcs_are_drawn_exactly() -> None:
    assert sentences_text([barks()]) == THE_DOG
    pred = barks(heads=[3, 3, 0, 2])
    assert sentences_text([pred], [compare(pred, barks())]) == THE_DOG_GOLD


OLD_MAN_GOLD = """\
# 1: the old man saw it (2 gold spans missing)
the old man saw it
    └────✗────┘
└─────────────────┘
└──✗ NP───┘ └✗ VP─┘
"""


def test_text_trees_are_brackets_under_the_words(tmp_path: Path) -> None:
    gold_file = tmp_path / "gold.trees"
    gold_file.write_text("(S (NP (DT the) (JJ old) (NN man)) (VP (VBD saw) (NP (PRP it))))\n", encoding="utf-8")
    pred_file = tmp_path / "pred.trees"
    pred_file.write_text("(the (old man saw) it)\n", encoding="utf-8")
    result = run_cli("show", str(gold_file))
    assert result.output == (
        "# 1: the old man saw it\n"
        "the old man saw it\n"
        "└───NP────┘     └─┘\n"
        "            └─VP──┘\n"
        "└────────S────────┘\n"
    )
    assert run_cli("show", str(pred_file), "--gold", str(gold_file)).output == OLD_MAN_GOLD


def test_text_colours_only_when_asked() -> None:
    pred = barks(heads=[3, 3, 0, 2])
    plain = sentences_text([pred], [compare(pred, barks())])
    coloured = sentences_text([pred], [compare(pred, barks())], color=True)
    assert "\x1b[" not in plain and "\x1b[31m" in coloured and "\x1b[2m" in coloured  # '.' is unscored: dim
    assert "\x1b[2m" in sentences_text([barks()], color=True)  # the punctuation arc, dim


def write_conllu(path: Path, sentences: list[Sentence]) -> Path:
    with path.open("w", encoding="utf-8") as stream:
        write_sentences(sentences, stream, "conllu")
    return path


def test_show_prints_text_and_marks_against_gold(tmp_path: Path) -> None:
    pred = write_conllu(tmp_path / "pred.conllu", [barks(heads=[3, 3, 0, 2])])
    gold = write_conllu(tmp_path / "gold.conllu", [barks()])
    result = run_cli("show", str(pred), "--gold", str(gold))
    assert result.exit_code == 0, result.output
    assert result.output == THE_DOG_GOLD


def test_show_refuses_a_gold_over_other_tokens(tmp_path: Path) -> None:
    pred = write_conllu(tmp_path / "pred.conllu", [barks(), barks()])
    other = barks()
    other.words = ["The", "cat", "barks", "."]
    gold = write_conllu(tmp_path / "gold.conllu", [barks(), other])
    result = CliRunner().invoke(cli, ["show", str(pred), "--gold", str(gold)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert lines == [f"{pred}:7: sentence 2: token 2 is 'dog' in the prediction but 'cat' in the gold ({gold})"]
    short = write_conllu(tmp_path / "short.conllu", [barks()])
    result = CliRunner().invoke(cli, ["show", str(pred), "--gold", str(short)])
    assert result.exit_code == 2 and result.output == (
        f"{pred}:6: sentence 2 has no counterpart in {short}: {short} has 1 sentences but {pred} has 2; a "
        "prediction needs exactly one sentence per gold sentence\n")


def test_show_writes_an_html_page(tmp_path: Path) -> None:
    pred = write_conllu(tmp_path / "pred.conllu", [barks(), barks(heads=[3, 3, 0, 2])])
    out = tmp_path / "page.html"
    result = run_cli("show", str(pred), "--gold", str(pred), "--html", str(out), "--sentence", "2")
    assert result.exit_code == 0 and result.output == ""
    page = out.read_text(encoding="utf-8")
    assert page.count("<figure") == 1 and "2: The dog barks . (0 of 3 heads wrong)" in page


# ------------------------------------------------------------------------------------------------ parse


def test_parse_writes_html_and_svg(tmp_path: Path) -> None:
    text = tmp_path / "in.txt"
    text.write_text("Dogs bark loudly .\nCats & <mice> sleep .\n", encoding="utf-8")
    html_result = run_cli("parse", "--model", "right-branching", "--format", "html", "--quiet", str(text))
    assert html_result.exit_code == 0
    page = html_result.stdout
    assert page.startswith("<!DOCTYPE html>") and page.count("<figure") == 2 and "http" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    svg_result = run_cli("parse", "--model", "right-branching", "--format", "svg", "--tokenized", "--quiet",
                         str(text))
    document = ET.fromstring(svg_result.stdout)
    figures = [g for g in document.iter(f"{SVG}g") if g.get("class") == "sentence"]
    assert len(figures) == 2
    words = [t.text for t in figures[1].iter(f"{SVG}text") if t.get("class") == "word"]
    assert words == ["Cats", "&", "<mice>", "sleep", "."]
    assert len([g for g in figures[1].iter(f"{SVG}g") if "arc" in g.get("class", "").split()]) == 4
    assert [g for g in figures[1].iter(f"{SVG}g") if "node" in g.get("class", "").split()]  # the model's tree


# ------------------------------------------------------------------------------------------------ browser


class _RenderedWords(HTMLParser):
    """Each figure's word elements, with the width the page's script measured in the browser."""

    def __init__(self) -> None:
        super().__init__()
        self.figures: list[list[tuple[str, float | None]]] = []
        self.drawn: str | None = None
        self._word: list[str] | None = None
        self._width: float | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "body":
            self.drawn = attributes.get("data-words-drawn")
        elif tag == "figure":
            self.figures.append([])
        elif tag == "text" and attributes.get("class") == "word":
            self._word = []
            width = attributes.get("data-width")
            self._width = float(width) if width is not None else None

    def handle_data(self, data: str) -> None:
        if self._word is not None:
            self._word.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "text" and self._word is not None:
            self.figures[-1].append(("".join(self._word), self._width))
            self._word = None


@pytest.fixture(scope="module")
def ptb(nltk_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The PTB sample preprocessed as a user would (skips with a reason when ../shared/nltk_data is absent)."""
    out = tmp_path_factory.mktemp("pictures") / "ptb"
    result = run_cli("preprocess", "ptb", "--sample-only", "--out", str(out), "--quiet")
    assert result.exit_code == 0, result.output
    return out


def test_every_token_is_rendered_by_a_real_browser(ptb: Path, tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("needs headless Chromium (Debian package 'chromium') to render the page; it is not on PATH")
    blocks = (ptb / "test.conllu").read_text(encoding="utf-8").split("\n\n")[:20]
    sample = tmp_path / "sample.conllu"
    sample.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    gold = read_sentences(sample)
    result = run_cli("parse", "--model", "right-branching", "--input-format", "conllu", "--format", "html",
                     "--quiet", str(sample))
    assert result.exit_code == 0
    page = tmp_path / "page.html"
    page.write_text(result.stdout, encoding="utf-8")
    dom = subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                          page.as_uri()], capture_output=True, text=True, timeout=120, check=True).stdout
    rendered = _RenderedWords()
    rendered.feed(dom)
    assert rendered.drawn == str(sum(len(s.words) for s in gold))  # the script ran over every word
    assert [[word for word, _ in figure] for figure in rendered.figures] == [s.words for s in gold]
    blank = [(k, word) for k, figure in enumerate(rendered.figures, start=1)
             for word, width in figure if width is None or width <= 0]
    assert not blank, f"tokens the browser drew with no width: {blank[:5]}"


def _first_with_words(path: Path, n: int) -> int:
    return next(k for k, s in enumerate(read_sentences(path), start=1) if len(s.words) == n)


def test_show_wraps_a_long_sentence_to_the_width(ptb: Path) -> None:
    from depinduce.pictures.figures import display_width

    number = _first_with_words(ptb / "test.conllu", 48)
    words = read_sentences(ptb / "test.conllu")[number - 1].words
    whole = run_cli("show", str(ptb / "test.conllu"), "--sentence", str(number), "--no-color")
    assert whole.exit_code == 0 and max(display_width(line) for line in whole.stdout.splitlines()[1:]) > 120
    wrapped = run_cli("show", str(ptb / "test.conllu"), "--sentence", str(number), "--width", "120", "--no-color")
    assert wrapped.exit_code == 0, wrapped.output
    assert max(display_width(line) for line in wrapped.stdout.splitlines()) <= 120
    lines = [line for line in wrapped.stdout.splitlines() if not line.startswith("#")]  # the caption is text
    pieces = [line for line in lines if line.startswith("… words ")]
    assert len(pieces) >= 3 and pieces[0].startswith("… words 1-") and pieces[-1].endswith(f"of {len(words)}")
    # every word is drawn once, in order, across the pieces
    drawn = [w for line in lines if not line.startswith("… words ") for w in line.split()]
    position = 0
    for word in words:
        position = drawn.index(word, position) + 1


def _long_sentence(n: int = 45, seed: int = 3) -> Sentence:
    """``n`` words whose heads lie up to 14 words away: arcs that cross the pieces a narrow terminal cuts."""
    import random

    rng = random.Random(seed)
    heads = [0 if d == 10 else rng.choice([h for h in range(max(1, d - 14), min(n, d + 14) + 1) if h != d])
             for d in range(1, n + 1)]
    words = [f"word{k}" for k in range(1, n + 1)]
    return Sentence(words=words, heads=heads, deprels=["dep"] * n, text=" ".join(words))


def test_a_wrapped_caption_breaks_between_words() -> None:
    from depinduce.pictures.figures import display_width

    sentence = _long_sentence()
    caption = [line for line in sentences_text([sentence], width=80).splitlines() if line.startswith("#")]
    assert len(caption) > 1 and all(display_width(line) <= 80 for line in caption)
    assert [w for line in caption for w in line.lstrip("# ").split()] == ["1:", *sentence.words]  # none cut
    assert sentences_text([sentence]).splitlines()[0] == f"# 1: {sentence.text}"  # no width: one line


def test_arcs_cut_by_a_piece_edge_name_the_word_at_their_other_end() -> None:
    """Each arc that leaves a piece ends at the edge in the number of the word it reaches: ``→17`` further
    right, ``←3`` further left (an arc over the whole piece gets both)."""
    import re

    from depinduce.pictures.figures import display_width

    sentence = _long_sentence()
    lines = sentences_text([sentence], width=80).splitlines()
    assert all(display_width(line) <= 80 for line in lines)
    pieces: list[tuple[int, int, list[str]]] = []
    for line in lines:
        if found := re.fullmatch(r"… words (\d+)-(\d+) of 45", line):
            pieces.append((int(found[1]), int(found[2]), []))
        elif pieces:
            pieces[-1][2].append(line)
    assert len(pieces) >= 3
    arcs = [(min(h, d), max(h, d)) for d, h in enumerate(sentence.heads, start=1) if h]
    for first, last, drawn in pieces:
        expected = sorted([f"←{lo}" for lo, hi in arcs if lo < first <= hi]
                          + [f"→{hi}" for lo, hi in arcs if lo <= last < hi])
        found = sorted(mark for line in drawn for mark in re.findall(r"[←→]\d+", line))
        assert found == expected, (first, last)
        assert expected or first == 1  # the sentence is built so that arcs cross every cut
    # a left mark sits at the start of its line, a right one at its end
    marked = [line for _, _, drawn in pieces for line in drawn if re.search(r"[←→]\d", line)]
    assert all(re.fullmatch(r" *(←\d+)?[^←→]*(→\d+)?", line) for line in marked)


def test_show_writes_one_svg_per_sentence_into_a_new_folder(ptb: Path, tmp_path: Path) -> None:
    sample = tmp_path / "three.conllu"
    sample.write_text("\n\n".join((ptb / "test.conllu").read_text().split("\n\n")[:3]) + "\n\n")
    out = tmp_path / "svgs"
    result = run_cli("show", str(sample), "--format", "svg", "--out-dir", str(out))
    assert result.exit_code == 0, result.output
    files = sorted(out.iterdir())
    assert [f.name for f in files] == ["sentence-0001.svg", "sentence-0002.svg", "sentence-0003.svg"]
    for path, sentence in zip(files, read_sentences(sample)):
        root = ET.fromstring(path.read_text())
        words = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text") if t.get("class") == "word"]
        assert words == sentence.words and root.get("viewBox")
    again = run_cli("show", str(sample), "--format", "svg", "--out-dir", str(out))
    assert again.exit_code == 2 and "--force" in again.output and "Traceback" not in again.output
    only = run_cli("show", str(sample), "--format", "svg", "--out-dir", str(out), "--force", "--sentence", "2")
    assert only.exit_code == 0 and len(list(out.iterdir())) == 3
    missing = run_cli("show", str(sample), "--format", "svg")
    assert missing.exit_code == 2 and "--out-dir" in missing.output


def test_a_48_word_sentence_fits_the_window_and_hovering_highlights_its_arcs(ptb: Path, tmp_path: Path) -> None:
    import re

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("needs headless Chromium (Debian package 'chromium') to render the page; it is not on PATH")
    number = _first_with_words(ptb / "test.conllu", 48)
    page = tmp_path / "long.html"
    result = run_cli("show", str(ptb / "test.conllu"), "--sentence", str(number), "--html", str(page))
    assert result.exit_code == 0, result.output
    text = page.read_text()
    assert "mouseenter" in text and not re.search(r"\b(src|href)=", text)  # inline only, nothing fetched
    natural = float(re.search(r'<svg [^>]*width="(\d+)"', text).group(1))
    assert natural > 1400
    dom = subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                          "--window-size=1400,900", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    rendered = float(re.search(r'data-rendered-width="(\d+)"', dom).group(1))
    assert 0 < rendered <= 1400 - 40  # inside the window, margins and all
