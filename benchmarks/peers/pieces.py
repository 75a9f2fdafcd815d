#!/usr/bin/env python3
"""Write a prepared corpus as space-separated sentencepiece pieces, for fairseq and OpenNMT-py.

    pieces.py PREPARED_DIR OUT_DIR     # e.g. data/multi30k.en-de ../peers/data

Both peers split lines on whitespace, so a piece that contains a whitespace character (the
joint model has a lone no-break-space piece) is written with that character as <U+00A0>: every
piece stays one token and the token counts match ours.
"""

import json
import sys
from pathlib import Path

import sentencepiece as spm


def safe(piece: str) -> str:
    return "".join(f"<U+{ord(char):04X}>" if char.isspace() else char for char in piece)


def main() -> None:
    prepared, out = Path(sys.argv[1]), Path(sys.argv[2])
    manifest = json.loads((prepared / "manifest.json").read_text(encoding="utf-8"))
    model = spm.SentencePieceProcessor(model_file=str(prepared / "spm.model"))
    out.mkdir(parents=True, exist_ok=True)
    for split in ("train", "valid", "test"):
        for lang in (manifest["src"], manifest["tgt"]):
            lines = (prepared / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()
            pieces = model.encode(lines, out_type=str)
            text = "".join(" ".join(map(safe, line)) + "\n" for line in pieces)
            (out / f"{split}.{lang}").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
