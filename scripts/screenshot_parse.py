"""Make docs/pictures/parse-example.png: ``depinduce parse --format html`` with the bundled model on one sentence,
photographed by headless Chromium (Debian's ``chromium`` package).

    python scripts/screenshot_parse.py [--sentence TEXT] [--out PNG] [--chromium PATH]

The window is sized from the figure's own SVG size, so the picture holds the whole sentence and little else.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SENTENCE = "The new rules will take effect in three weeks , the agency said ."
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentence", default=SENTENCE, help="the sentence to parse (one line of text)")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "pictures" / "parse-example.png")
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    args = parser.parse_args()
    if not args.chromium:
        sys.exit("no chromium on PATH: apt-get install chromium (or pass --chromium PATH)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "input.txt").write_text(args.sentence + "\n", encoding="utf-8")
        page = folder / "page.html"
        with page.open("w", encoding="utf-8") as stream:
            subprocess.run([sys.executable, "-m", "depinduce", "parse", "--model", "default", "--format", "html",
                            "--quiet", str(folder / "input.txt")], stdout=stream, check=True, cwd=REPO)
        size = re.search(r'<svg[^>]* width="(\d+)" height="(\d+)"', page.read_text(encoding="utf-8"))
        if size is None:
            sys.exit(f"{page}: no figure in the page")
        width, height = max(int(size.group(1)) + 60, 600), int(size.group(2)) + 150
        args.out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([args.chromium, *CHROMIUM_FLAGS, f"--user-data-dir={folder / 'profile'}",
                        f"--window-size={width},{height}", f"--screenshot={args.out.resolve()}",
                        page.resolve().as_uri()], check=True, capture_output=True, timeout=120)
    print(f"{args.out}: {args.out.stat().st_size:,} bytes, {width}x{height}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
