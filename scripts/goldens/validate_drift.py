#!/usr/bin/env python3
"""Goldens for validate's benign-drift rules (tests/validate/drift_test.cpp).

What transformers 5 writes when it re-saves a model's config and tokenizer
(AutoConfig / AutoTokenizer .from_pretrained(...).save_pretrained(...)), as an
exporter running on it does:

  tests/data/validate/drift/demo/resaved/{config,tokenizer_config}.json
      models/stories260K-hf-bf16 re-saved (its source is in the repo).
  tests/data/validate/drift/smollm2/source/{config,tokenizer_config}.json
      SmolLM2-135M-Instruct with a transformers-4.x style config.json
      (top-level rope_theta, torch_dtype), copied from SMOLLM2_DIR.
  tests/data/validate/drift/smollm2/resaved/{config,tokenizer_config}.json
      the same re-saved.

It also checks the claim the rules rest on: loading each source and each
re-saved file (beside the source's other tokenizer files) in transformers 5
gives the same config (to_dict(), transformers_version aside) and the same
token ids on a sample text. It prints the outcome; README.md records it.

Run: /tmp/heavy/bin/python scripts/goldens/validate_drift.py [SMOLLM2_DIR]
(SMOLLM2_DIR defaults to /tmp/smollm2-hf-v4; no weights are read or written).
"""
import json
import os
import shutil
import sys
import tempfile

from transformers import AutoConfig, AutoTokenizer

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(REPO, "tests", "data", "validate", "drift")
DEMO = os.path.join(REPO, "models", "stories260K-hf-bf16")
SAMPLE = "Once upon a time, there was a little girl named Lily.\n\nShe  liked <s> cats!"
FILES = ("config.json", "tokenizer_config.json")


def copy_meta(src, dst):
    """The source's non-weight files, so loaders see a model dir."""
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if not f.endswith(".safetensors"):
            shutil.copy(os.path.join(src, f), dst)


def resave(src, dst):
    with tempfile.TemporaryDirectory() as tmp:
        AutoConfig.from_pretrained(src).save_pretrained(tmp)
        AutoTokenizer.from_pretrained(src).save_pretrained(tmp)
        os.makedirs(dst, exist_ok=True)
        for f in FILES:
            shutil.copy(os.path.join(tmp, f), os.path.join(dst, f))


def config_dict(d):
    c = AutoConfig.from_pretrained(d).to_dict()
    c.pop("transformers_version", None)
    c.pop("_name_or_path", None)
    return c


def same_meaning(src, resaved):
    """Source vs (source with the re-saved config + tokenizer_config)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy_meta(src, tmp)
        for f in FILES:
            shutil.copy(os.path.join(resaved, f), os.path.join(tmp, f))
        same_cfg = config_dict(src) == config_dict(tmp)
        a = AutoTokenizer.from_pretrained(src)(SAMPLE)["input_ids"]
        b = AutoTokenizer.from_pretrained(tmp)(SAMPLE)["input_ids"]
        return same_cfg, a == b


def main():
    smol = sys.argv[1] if len(sys.argv) > 1 else "/tmp/smollm2-hf-v4"
    resave(DEMO, os.path.join(OUT, "demo", "resaved"))
    src = os.path.join(OUT, "smollm2", "source")
    os.makedirs(src, exist_ok=True)
    for f in FILES:
        shutil.copy(os.path.join(smol, f), os.path.join(src, f))
    resave(smol, os.path.join(OUT, "smollm2", "resaved"))
    for name, source in (("demo", DEMO), ("smollm2", smol)):
        cfg, ids = same_meaning(source, os.path.join(OUT, name, "resaved"))
        print(f"{name}: same config after reload: {cfg}; same token ids: {ids}")


if __name__ == "__main__":
    main()
