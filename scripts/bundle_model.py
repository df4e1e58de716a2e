"""Make the bundled default model (``depinduce/bundled/default/``) from a finished run, and measure its card.

    python scripts/bundle_model.py RUN_DIR --ptb data/ptb --ewt data/ewt \
        --command "depinduce preprocess ud ..." --command "depinduce train ..." [--force]

The run's ``config.yaml`` and ``vocab.json`` are copied, and its ``model.pt`` is stored in float16 (half the
size; loading casts it back to float32).  The decoder ``parse`` uses for it is chosen like the model, by UDA on
EWT dev (MST or Eisner), and recorded on the card.  The card's figures are then measured on the *shipped* file, exactly as
a user scores a parse: ``depinduce parse --model <bundled folder> --input-format conllu FILE`` and ``depinduce
eval --gold FILE --pred …`` on the PTB sample's test split and on EWT dev, beside right-branching on the same
files.  Prints the figures and writes ``card.json`` (which records the sha256 of ``model.pt``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from depinduce.checksum import sha256_file  # noqa: E402

OUT = REPO / "depinduce" / "bundled" / "default"


def depinduce(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "depinduce", *args], check=True, capture_output=True,
                          text=True).stdout


def score(model: str, gold: Path, decoder: str = "mst") -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        pred = Path(tmp) / "pred.conllu"
        pred.write_text(depinduce("parse", "--quiet", "--model", model, "--decoder", decoder, "--input-format",
                                  "conllu", str(gold)), encoding="utf-8")
        metrics = json.loads(depinduce("eval", "--json", "--gold", str(gold), "--pred", str(pred)))["metrics"]
    return {"dda": round(metrics["dda"], 2), "uda": round(metrics["uda"], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--ptb", type=Path, required=True, help="a `preprocess ptb` folder (NLTK sample)")
    parser.add_argument("--ewt", type=Path, required=True, help="a `preprocess ud` folder of UD English EWT")
    parser.add_argument("--command", action="append", default=[], help="the commands that made the run")
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args()
    if OUT.exists():
        if not args.force:
            sys.exit(f"{OUT} exists; --force replaces it")
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    config = (args.run_dir / "config.yaml").read_text(encoding="utf-8")
    (OUT / "config.yaml").write_text(config, encoding="utf-8")
    shutil.copyfile(args.run_dir / "vocab.json", OUT / "vocab.json")
    state = torch.load(args.run_dir / "model.pt", map_location="cpu", weights_only=True)
    half = {k: v.half() if v.is_floating_point() else v for k, v in state.items()}
    torch.save(half, OUT / "model.pt")
    manifest = json.loads((args.run_dir / "manifest.json").read_text(encoding="utf-8"))
    backend = manifest["model"]
    card = {
        "name": "default",
        "backend": backend,
        "summary": "UDGN trained by depinduce on the raw text of UD English EWT (train split), chosen on EWT dev",
        "licence": "CC BY-SA 4.0 (the weights derive from UD English EWT, CC BY-SA 4.0; attribution: the UD "
                   "English EWT contributors, Silveira et al. 2014)",
        "training": {
            "data": "UD English EWT train: 12,504 sentences, 180,981 words without punctuation (its text only; "
                    "the trees are never read in training); model selection by UDA on EWT dev",
            "commands": args.command,
            "data_sha256": {name: entry["sha256"] for name, entry in manifest["data"]["files"].items()},
        },
        "model_sha256": sha256_file(OUT / "model.pt"),
        "model_bytes": (OUT / "model.pt").stat().st_size,
        "results": [],
        "protocol": "depinduce parse --input-format conllu (the card's decoder) + depinduce eval (punctuation "
                    "removed by the gold tags, as for every model here)",
    }
    # The decoder is chosen as the model was: by UDA on EWT dev (never on the PTB test split).
    on_dev = {decoder: score(str(OUT), args.ewt / "dev.conllu", decoder) for decoder in ("mst", "eisner")}
    chosen = max(on_dev, key=lambda d: on_dev[d]["uda"])
    card["decoder"] = chosen
    card["decoder_choice"] = {"by": "UDA on UD English EWT dev", "ewt_dev": on_dev}
    print(f"decoder by EWT dev UDA: {chosen} ({on_dev})")
    for label, gold in (("PTB sample test (wsj_0150-0199; never seen in training)", args.ptb / "test.conllu"),
                        ("UD English EWT dev", args.ewt / "dev.conllu")):
        ours, baseline = score(str(OUT), gold, chosen), score("right-branching", gold)
        card["results"].append({"data": label, "model": ours, "right-branching": baseline})
        print(f"{label}: DDA {ours['dda']:.1f} / UDA {ours['uda']:.1f}; right-branching "
              f"{baseline['dda']:.1f} / {baseline['uda']:.1f}")
    (OUT / "card.json").write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({card['model_bytes']:,} bytes of weights, sha256 {card['model_sha256']})")


if __name__ == "__main__":
    main()
