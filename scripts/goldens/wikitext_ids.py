#!/usr/bin/env python3
"""Golden for `--dataset wikitext2` text and ids (tests/eval/wikitext_ids_test.cpp).

Joins the bundled data/datasets/wikitext-2-raw/wiki.test.raw as Quark does,
"\\n\\n".join(load_dataset("wikitext", "wikitext-2-raw-v1", split="test")["text"]),
the rows being the file's lines with their "\\n" and whitespace-only lines as
"" (what the datasets builder yields), and encodes the whole joined text once
with HF `tokenizers` on models/stories260K-hf-bf16/tokenizer.json, special
tokens added (BOS), as qloom eval does. Writes tests/data/eval/wikitext2_demo_ids.json:
  text_bytes, text_sha256   the joined text, UTF-8
  count, ids_sha256         the ids, each as a little-endian int32
  first_ids, last_ids       16 of each, to read a failure by

Run: /work/main/build/venv/bin/python scripts/goldens/wikitext_ids.py  (tokenizers 0.22.1)
"""
import hashlib
import json
import pathlib
import struct

import tokenizers
from tokenizers import Tokenizer

ROOT = pathlib.Path(__file__).resolve().parents[2]
WIKI = ROOT / "data" / "datasets" / "wikitext-2-raw" / "wiki.test.raw"
TOKENIZER = ROOT / "models" / "stories260K-hf-bf16" / "tokenizer.json"
OUT = ROOT / "tests" / "data" / "eval" / "wikitext2_demo_ids.json"


def joined():
    with open(WIKI, encoding="utf-8") as f:
        rows = [line if line.strip() else "" for line in f]
    return "\n\n".join(rows)


def main():
    text = joined().encode("utf-8")
    ids = Tokenizer.from_file(str(TOKENIZER)).encode(text.decode("utf-8")).ids
    packed = b"".join(struct.pack("<i", i) for i in ids)
    out = {
        "how": f"scripts/goldens/wikitext_ids.py, tokenizers {tokenizers.__version__}",
        "text_bytes": len(text),
        "text_sha256": hashlib.sha256(text).hexdigest(),
        "count": len(ids),
        "ids_sha256": hashlib.sha256(packed).hexdigest(),
        "first_ids": ids[:16],
        "last_ids": ids[-16:],
    }
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
