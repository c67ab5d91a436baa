#!/usr/bin/env python3
"""Golden for `--dataset wikitext2` text and ids (tests/eval/wikitext_ids_test.cpp).

Joins the bundled data/datasets/wikitext-2-raw/wiki.test.raw as Quark does,
"\\n\\n".join(load_dataset("wikitext", "wikitext-2-raw-v1", split="test")["text"]),
the rows being the file's lines with their "\\n" and whitespace-only lines as
"" (what the datasets builder yields), and encodes the whole joined text once
with transformers 5's AutoTokenizer on models/stories260K-hf-bf16 (the model
ships tokenizer.model, so qloom tokenizes as AutoTokenizer: see
src/qloom/text/tokenizer_choice.h), special tokens added (BOS), as qloom eval
does. Writes tests/data/eval/wikitext2_demo_ids.json:
  text_bytes, text_sha256   the joined text, UTF-8
  count, ids_sha256         the ids, each as a little-endian int32
  first_ids, last_ids       16 of each, to read a failure by
  tokenizer_json_count      for information: the ids of HF `tokenizers` on the
                            model's tokenizer.json as written (its normalizer
                            Strip + " {2,}" -> " " runs there, not in AutoTokenizer)

Run with a venv outside the repository (transformers>=5, tokenizers, sentencepiece, protobuf):
  /work/venv-tok/bin/python scripts/goldens/wikitext_ids.py
"""
import hashlib
import json
import pathlib
import struct

import transformers
from tokenizers import Tokenizer
from transformers import AutoTokenizer

ROOT = pathlib.Path(__file__).resolve().parents[2]
WIKI = ROOT / "data" / "datasets" / "wikitext-2-raw" / "wiki.test.raw"
MODEL = ROOT / "models" / "stories260K-hf-bf16"
OUT = ROOT / "tests" / "data" / "eval" / "wikitext2_demo_ids.json"


def joined():
    with open(WIKI, encoding="utf-8") as f:
        rows = [line if line.strip() else "" for line in f]
    return "\n\n".join(rows)


def main():
    text = joined().encode("utf-8")
    ids = AutoTokenizer.from_pretrained(MODEL)(text.decode("utf-8"))["input_ids"]
    as_written = Tokenizer.from_file(str(MODEL / "tokenizer.json")).encode(text.decode("utf-8")).ids
    packed = b"".join(struct.pack("<i", i) for i in ids)
    out = {
        "how": f"scripts/goldens/wikitext_ids.py, transformers {transformers.__version__} AutoTokenizer",
        "text_bytes": len(text),
        "text_sha256": hashlib.sha256(text).hexdigest(),
        "count": len(ids),
        "ids_sha256": hashlib.sha256(packed).hexdigest(),
        "first_ids": ids[:16],
        "last_ids": ids[-16:],
        "tokenizer_json_count": len(as_written),
    }
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
