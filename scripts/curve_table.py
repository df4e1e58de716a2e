"""Learning-curve tables from runs' ``metrics.jsonl``: a dev metric at fixed numbers of training tokens.

Each cell is the first record (a ``curve_every_tokens`` point or an evaluation) at or past the milestone, so a run
trained with ``--set curve_every_tokens=500000 --max-tokens 2.5M`` fills 0.5/1/1.5/2/2.5M exactly; a run that
stopped earlier leaves the later cells empty.  Prints one markdown row per run (and metric).

    python scripts/curve_table.py runs/udgn-plain runs/udgn-options --metric dev_dda dev_uda \\
        --at 0.5M,1M,1.5M,2M,2.5M
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from depinduce.api.training import parse_token_count


def records(run: Path) -> list[dict]:
    path = run / "metrics.jsonl"
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut off by a kill
            continue
    return sorted((r for r in rows if "tokens_seen" in r), key=lambda r: r["tokens_seen"])


def at(rows: list[dict], milestone: int, metric: str) -> float | None:
    for row in rows:
        if row["tokens_seen"] >= milestone and row.get(metric) is not None:
            return float(row[metric])
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--metric", nargs="+", default=["dev_uda"])
    parser.add_argument("--at", default="0.5M,1M,1.5M,2M,2.5M", help="comma-separated token counts")
    parser.add_argument("--names", help="comma-separated row names (default: the run folders' names)")
    args = parser.parse_args()
    milestones = [parse_token_count(part) for part in args.at.split(",")]
    names = args.names.split(",") if args.names else [run.name for run in args.runs]
    print("| run | metric | " + " | ".join(f"{m / 1e6:g}M" for m in milestones) + " |")
    print("|---|---|" + "---|" * len(milestones))
    for name, run in zip(names, args.runs):
        rows = records(run)
        for metric in args.metric:
            cells = [at(rows, m, metric) for m in milestones]
            print(f"| {name} | {metric.removeprefix('dev_')} | "
                  + " | ".join("" if c is None else f"{c:.1f}" for c in cells) + " |")


if __name__ == "__main__":
    main()
