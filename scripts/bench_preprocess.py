"""Throughput of ``depinduce preprocess ptb``: sentences per second on NLTK's sample and on a 10× copy of it.

The 10× copy (≈39k trees, the size of the full WSJ treebank) is laid out as an LDC tree (sections 02–23, so every
copy lands in a split) in a temporary folder, and preprocessed through ``--ptb-dir``: the issue asks for a full
PTB in under 60 s on 2 cores.  Run with ``NLTK_DATA`` pointing at the NLTK data
(``NLTK_DATA=../shared/nltk_data python scripts/bench_preprocess.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

from depinduce.data.preprocess import PreprocessOptions, default_workers, preprocess_ptb


def build_copy(root: Path, copies: int) -> int:
    """Write ``copies`` copies of the sample's .mrg files into LDC section folders 02–23; returns the file count."""
    from nltk.corpus import treebank

    sections = list(range(2, 24))
    fileids = treebank.fileids()
    if copies * len(fileids) > 9999:
        raise SystemExit("at most 9,999 files fit the wsj_NNNN.mrg naming; use fewer copies")
    contents = []
    for fileid in fileids:
        with treebank.abspath(fileid).open() as stream:
            contents.append(stream.read())
    count = 0
    for _ in range(copies):
        for data in contents:
            folder = root / f"{sections[count % len(sections)]:02d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"wsj_{count:04d}.mrg").write_bytes(data)
            count += 1
    return count


def sentences_in(manifest: dict) -> int:
    return sum(split["gold_sentences"] for split in manifest["splits"].values())


def cpu_seconds() -> tuple[float, float]:
    """CPU time used so far by this process, and by its finished children (the worker processes)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def run(label: str, out: Path, workers: int, **kwargs: object) -> None:
    options = PreprocessOptions(progress=False)
    start, (own_start, workers_start) = time.perf_counter(), cpu_seconds()
    manifest = preprocess_ptb(out, options=options, workers=workers, **kwargs)  # type: ignore[arg-type]
    seconds = time.perf_counter() - start
    own, in_workers = (end - begin for end, begin in zip(cpu_seconds(), (own_start, workers_start)))
    n = sentences_in(manifest)
    print(f"{label}: {n} sentences in {seconds:.2f} s = {n / seconds:,.0f} sentences/s "
          f"(CPU: {own:.1f} s main process, {in_workers:.1f} s workers; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=10, help="size of the large run, in copies of the sample")
    parser.add_argument("--workers", type=int, default=default_workers(), help="processes (default: usable CPUs)")
    args = parser.parse_args()
    print(f"workers: {args.workers}")
    with tempfile.TemporaryDirectory(prefix="bench-preprocess-") as tmp:
        tmp_path = Path(tmp)
        run("NLTK sample", tmp_path / "sample", args.workers)
        files = build_copy(tmp_path / "ldc", args.copies)
        run(f"{args.copies}x sample via --ptb-dir ({files} files)", tmp_path / "large", args.workers,
            ptb_dir=tmp_path / "ldc")
        manifest = json.loads((tmp_path / "large" / "manifest.json").read_text())
        sizes = {split: c["sentences"] for split, c in manifest["splits"].items()}
        print(f"  split sizes of the large run: {sizes}")


if __name__ == "__main__":
    main()
