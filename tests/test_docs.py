"""The documentation: the site builds strictly, its getting-started and API pages run as written, README's set-up
commands are the ones CI runs, README stays short, and no page speaks of sessions a reader cannot know."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
README = REPO / "README.md"
SHARED_NLTK = REPO.parent / "shared" / "nltk_data"

# A block is run unless the line before its opening fence is `<!-- not run: why -->`; `<!-- needs: NLTK_DATA -->`
# runs it only where the Penn Treebank sample can be found.
_BLOCK = re.compile(r"(?:^<!-- (?P<note>[^>]*) -->\n)?^```(?P<lang>[a-z]*)[^\n]*\n(?P<body>.*?)^```$", re.M | re.S)


def _blocks(page: Path) -> list[tuple[str, str, str]]:
    """(language, note, body) of every fenced block of a page, in order."""
    return [(m["lang"], (m["note"] or "").strip(), m["body"]) for m in _BLOCK.finditer(page.read_text())]


def _nltk_data() -> str | None:
    if os.environ.get("NLTK_DATA"):
        return os.environ["NLTK_DATA"]
    return str(SHARED_NLTK) if SHARED_NLTK.is_dir() else None


def _run_page(page: Path, workdir: Path) -> int:
    """Run a page's bash and python blocks in order in one folder (each block sees what the earlier ones wrote);
    returns how many ran."""
    nltk_data = _nltk_data()
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    if nltk_data:
        env["NLTK_DATA"] = nltk_data
    ran = 0
    for lang, note, body in _blocks(page):
        if lang not in ("bash", "python") or note.startswith("not run"):
            continue
        if note == "needs: NLTK_DATA" and not nltk_data:
            continue
        command = ["bash", "-euo", "pipefail", "-c", body] if lang == "bash" else [sys.executable, "-c", body]
        done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{page.name}: this {lang} block failed:\n{body}\nstderr:\n{done.stderr}"
        ran += 1
    return ran


@pytest.mark.slow
@pytest.mark.parametrize("page", ["getting-started.md", "api.md"])
def test_page_code_blocks_run(page: str, tmp_path: Path) -> None:
    assert _run_page(DOCS / page, tmp_path) > 0


def test_every_block_note_is_known() -> None:
    for page in DOCS.rglob("*.md"):
        for _, note, _ in _blocks(page):
            assert not note or note.startswith("not run:") or note == "needs: NLTK_DATA" \
                or note.startswith("SLOT") or note.startswith("END SLOT"), f"{page}: unknown block note {note!r}"


# What a page must never show a reader, found in the built HTML (the Markdown looks fine in each case).
_PARAGRAPH = re.compile(r"<p>((?:(?!</p>).)*)</p>", re.S)
_RUN_ON_LIST = re.compile(r"\n\s*(?:[-*+]|\d+\.) ")  # a list Markdown did not take as one (no blank line above)
_RAW_ROLE = re.compile(r":(?:class|func|meth|data|mod|attr|exc|obj):<code>")
_ONE_LINE_SIGNATURE = re.compile(r'<div class="doc-signature[^"]*"[^>]*>(?:(?!</div>).){160,}?</div>', re.S)


def site_problems(name: str, html: str) -> list[str]:
    """What is wrong with one built page: run-on lists, click's internal default marker, options without help,
    raw Sphinx roles, long signatures on one line, links to the developers' ../shared folder."""
    problems = [f"{name}: a list rendered as a paragraph: {m[1][:70]!r}" for m in _PARAGRAPH.finditer(html)
                if _RUN_ON_LIST.search(m[1])]
    if "Sentinel.UNSET" in html:
        problems.append(f"{name}: click's Sentinel.UNSET shown as a default")
    if "<td>N/A</td>" in html:
        problems.append(f"{name}: an option without help text (N/A)")
    problems += [f"{name}: a raw Sphinx role {m[0]!r}" for m in _RAW_ROLE.finditer(html)]
    problems += [f"{name}: a long signature on one line" for m in _ONE_LINE_SIGNATURE.finditer(html)
                 if "\n" not in m[0]]
    if "../shared" in html:
        problems.append(f"{name}: points at ../shared, a folder readers do not have")
    return problems


def test_site_problems_are_caught() -> None:
    """Each defect the site check looks for, in the form it takes in the HTML, is reported."""
    cases = {
        "<p>The rules:\n- one\n- two</p>": "rendered as a paragraph",
        "<td><code>Sentinel.UNSET</code></td>": "Sentinel.UNSET",
        "<td>N/A</td>": "without help text",
        "the :class:<code>Parser</code> class": "raw Sphinx role",
        '<div class="doc-signature highlight"><pre><code>' + "parse(a: int, " * 12 + ")</code></pre></div>":
            "one line",
        '<a href="../shared/papers">papers</a>': "../shared",
    }
    for html, problem in cases.items():
        assert any(problem in found for found in site_problems("page", html)), html
    assert site_problems("page", "<p>A paragraph - with a dash.</p><ul><li>a list</li></ul>") == []


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None,
                    reason="mkdocs is not installed (pip install -e '.[docs]'); CI builds the site strictly")
@pytest.mark.slow
def test_site_builds_strictly_and_renders(tmp_path: Path) -> None:
    """`mkdocs build --strict` (a broken link, a missing anchor or a page outside the nav fails), then every
    built page checked for what the Markdown hides (:func:`site_problems`)."""
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert done.returncode == 0, done.stdout + done.stderr
    site = tmp_path / "site"
    assert (site / "index.html").is_file()
    pages = [page for page in site.rglob("*.html") if page.name != "404.html"]
    problems = [problem for page in pages
                for problem in site_problems(str(page.relative_to(site)), page.read_text(encoding="utf-8"))]
    assert problems == [], "\n".join(problems)


def _readme_block(head: str) -> str:
    """What .ci/run's readme_block does: the first ``` block after the line that starts with `head`."""
    lines = README.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(head))
    fences = [i for i in range(start, len(lines)) if lines[i].startswith("```")]
    return "\n".join(lines[fences[0] + 1:fences[1]])


def test_readme_setup_commands_are_what_ci_runs() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    assert "readme_block 'Run the tests'" in ci and "readme_block 'Run the main job'" in ci
    tests = _readme_block("Run the tests")
    main_job = _readme_block("Run the main job")
    assert tests.splitlines() == [tests] and tests.startswith("python -m pip install") and "pytest" in tests
    assert main_job.splitlines() == [main_job] and main_job.startswith("python -m pip install")
    assert "depinduce eval" in main_job
    # the same awk as .ci/run, so the test reads README exactly as CI does
    awk = ("index($0, head) == 1 {found = 1} found && /^```/ {n++; next} found && n == 1 {print} n == 2 {exit}")
    for head, expected in (("Run the tests", tests), ("Run the main job", main_job)):
        done = subprocess.run(["awk", "-v", f"head={head}", awk, str(README)], capture_output=True, text=True)
        assert done.stdout.rstrip("\n") == expected


def test_readme_is_short() -> None:
    assert len(README.read_text().splitlines()) <= 200


_SESSION = re.compile(r"\b(this|that|a later|an earlier|the earlier|the later|the previous|a previous|last|"
                      r"one later|a third|the same|one|two|three)\s+session('s|s)?\b|\bsessions'", re.I)


def test_no_page_speaks_of_sessions() -> None:
    """A reader cannot know what a session was: results are keyed by commit, date and machine instead."""
    found = []
    for page in [README, *sorted(DOCS.rglob("*.md"))]:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            if _SESSION.search(line):
                found.append(f"{page.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_writing_a_backend_example_works(tmp_path: Path) -> None:
    """The worked example of docs/writing-a-backend.md, installed as a plugin through its entry point, parses."""
    page = (DOCS / "writing-a-backend.md").read_text()
    module = re.search(r'^```python title="longer_head.py"\n(.*?)^```$', page, re.M | re.S)
    toml = re.search(r'^```toml title="pyproject.toml"\n(.*?)^```$', page, re.M | re.S)
    assert module and toml
    entry = re.search(r'^\[project.entry-points."depinduce.models"\]\n(.+)$', toml[1], re.M)
    assert entry
    (tmp_path / "longer_head.py").write_text(module[1])
    info = tmp_path / "longer_head-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: longer-head\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[depinduce.models]\n" + entry[1].replace('"', "") + "\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-m", "depinduce", "parse", "--model", "longer-head", "-"],
                          input="A dog barked loudly\n", capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [line.split("\t") for line in done.stdout.splitlines() if line and not line.startswith("#")]
    # A -> dog (longer), dog -> barked, barked -> loudly, loudly = root
    assert [row[6] for row in rows] == ["2", "3", "4", "0"]


_DOCS_PAGE = re.compile(r"(?<![\w/.-])docs/[\w./-]+?\.md\b")
_DESIGN_PAGE = re.compile(r"(?<![\w-])((?:[\w.-]+/)*)design/([\w.-]+\.md)")
# The design notes by their bare names, as older comments cited them ("evaluation.md's anchors").
_BARE_NOTE = re.compile(r"(?<![\w/.-])(evaluation|models|conversion|architecture)\.md\b")


def _cited_sources() -> list[Path]:
    """What the rule covers: the package (the recipes included), the scripts, the tests (but this file, whose
    strings are the rule's examples) and README."""
    suffixes = {".py", ".yaml", ".yml", ".sh", ".toml"}
    found = [REPO / "README.md"]
    for folder in ("depinduce", "scripts", "tests"):
        found += [p for p in sorted((REPO / folder).rglob("*")) if p.suffix in suffixes and p.is_file()
                  and "__pycache__" not in p.parts and "data" not in p.relative_to(REPO / folder).parts[:1]]
    return [p for p in found if p != Path(__file__).resolve()]


def test_cited_pages_exist_and_nothing_cites_notes_outside_the_repository() -> None:
    """Every ``docs/`` page named in code, comments, strings, recipes or scripts is a page of this repository; a
    design note is cited by the docs/ page that holds it, never by a path outside the repository or a bare name
    (the notes in ../shared are reading material users never get)."""
    missing, outside = [], []
    for path in _cited_sources():
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            where = f"{path.relative_to(REPO)}:{number}"
            for match in _DOCS_PAGE.finditer(line):
                if not (REPO / match.group(0)).is_file():
                    missing.append(f"{where}: {match.group(0)}")
            for match in _DESIGN_PAGE.finditer(line):
                if not (match.group(1).startswith("docs/") and (REPO / match.group(0)).is_file()):
                    outside.append(f"{where}: {match.group(0)}")
            outside += [f"{where}: {m.group(0)}" for m in _BARE_NOTE.finditer(line)]
    for page in sorted(DOCS.rglob("*.md")):  # the site itself never sends a reader to a design/ note
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            outside += [f"{page.relative_to(REPO)}:{number}: {m.group(0)}" for m in _DESIGN_PAGE.finditer(line)]
    assert not missing, "pages that do not exist:\n" + "\n".join(missing)
    assert not outside, "design notes cited outside docs/:\n" + "\n".join(outside)


def test_the_citation_rule_catches_what_it_should() -> None:
    """The patterns above on lines that must and must not be reported."""
    assert _DOCS_PAGE.findall("see docs/evaluation-protocol.md.") == ["docs/evaluation-protocol.md"]
    assert _DOCS_PAGE.findall("[p](docs/guide/models.md)") == ["docs/guide/models.md"]
    assert not _DOCS_PAGE.findall("my-docs/x.md")
    assert [m.group(0) for m in _DESIGN_PAGE.finditer("see ../shared/design/models.md")] == [
        "../shared/design/models.md"]
    assert [m.group(0) for m in _DESIGN_PAGE.finditer("(design/evaluation.md)")] == ["design/evaluation.md"]
    assert not list(_DESIGN_PAGE.finditer("the design table"))
    assert _BARE_NOTE.findall("evaluation.md's anchors") == ["evaluation"]
    assert not _BARE_NOTE.findall("docs/guide/models.md and results/2026-11-27-dmv-dev-evaluation.md")
