#!/usr/bin/env python3
"""Goldens for checkpoints with a SentencePiece tokenizer.model: the ids and
decoded text of transformers 5's AutoTokenizer, which qloom follows there.

Run from the repository root with a venv OUTSIDE the repository that has
transformers>=5, tokenizers, sentencepiece and protobuf (no torch needed):

    python3 -m venv /work/venv-tok
    /work/venv-tok/bin/pip install "transformers>=5" sentencepiece tokenizers protobuf
    /work/venv-tok/bin/python scripts/goldens/tokenizer_hf5_goldens.py

Writes tests/data/tokenizers/stories260k_hf5/:
  goldens.json       AutoTokenizer on models/stories260K-hf-bf16 (tokenizer.json +
                     tokenizer.model, tokenizer_class LlamaTokenizer, legacy true),
                     one case per line: text, ids (add_special_tokens=True),
                     ids_plain (False), decoded / decoded_skip (decode with
                     skip_special_tokens False / True), spm_plain (the
                     `sentencepiece` package's ids for the same text, to show
                     where it differs), plus decode_ids cases cut inside
                     multi-byte characters. The same dir without tokenizer.json
                     (tokenizer.model only) gives the same for every case: the
                     script checks it.
  wikitext.json      count and SHA-256 (ids as little-endian int32) of
                     AutoTokenizer on all of wiki.test.raw, no special tokens.
  <variant>/tokenizer_config.json + goldens.json for changed configs:
                     nonlegacy (legacy false: Metaspace prepend "first"),
                     no_prefix_space (add_prefix_space false: "never"),
                     model_only_eos (tokenizer.model only, add_bos and add_eos),
                     model_only_no_flags (tokenizer.model only, no add_* keys:
                     transformers 5 then adds no BOS).
  hf5_rule.json      the model types for which transformers 5's AutoTokenizer
                     does not build the hub's LlamaTokenizer (a generic backend
                     or another registered class wins); qloom keeps the same table.
Deterministic: two runs give byte-identical files.
"""
import hashlib
import json
import os
import shutil
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_goldens import strings  # noqa: E402  (the shared string list)

import sentencepiece as spm  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402
from transformers.models.auto import tokenization_auto  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(ROOT, "models", "stories260K-hf-bf16")
OUT = os.path.join(ROOT, "tests", "data", "tokenizers", "stories260k_hf5")
RULE = os.path.join(ROOT, "tests", "data", "tokenizers", "hf5_rule.json")
WIKI = os.path.join(ROOT, "data", "datasets", "wikitext-2-raw", "wiki.test.raw")

# Where the three encodings part: leading/trailing/repeated spaces (sentencepiece
# strips and collapses them, tokenizer.json's Strip + Replace too, transformers 5
# keeps them), leading newlines and tabs (tokenizer.json's Strip drops them).
PARITY_STRINGS = [
    "a  b", "a   b   c", "x\n\n  y", " leading", "trailing ", "  both  ", " ", "  ",
    "\n\n = Robert Boulter = \n", " @.@  hrvatski", "1  2   3", "\n a", "\t tab",
    "\u3000wide space", "a\u00a0b", "double  space\n  indented", "<s>hi</s> there",
    "hi <s> there", "  <s>  ", "", "123 4567", "héllo ∑ 日本 🙂",
]


def demo_files(names, config):
    d = tempfile.mkdtemp(prefix="hf5-")
    for n in names:
        shutil.copy(os.path.join(DEMO, n), os.path.join(d, n))
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1)
    return d


def case(tok, sp, text):
    ids = tok(text)["input_ids"]
    return {"text": text, "ids": ids, "ids_plain": tok(text, add_special_tokens=False)["input_ids"],
            "decoded": tok.decode(ids, skip_special_tokens=False),
            "decoded_skip": tok.decode(ids, skip_special_tokens=True),
            "spm_plain": sp.encode(text)}


def decode_cases(tok):
    out = []
    for t in ["Emoji: 😀👍🏽🇺🇸 and ❤️", "你好，世界！", "Café ñ ü", "  two  spaces  "]:
        ids = tok(t, add_special_tokens=False)["input_ids"]
        for cut in (1, len(ids) // 2, len(ids) - 1):
            if 0 < cut < len(ids):
                out += [ids[:cut], ids[cut:]]
    out.append([len(tok) + 5, 0, 1, 2])
    return [{"decode_ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False),
             "decoded_skip": tok.decode(ids, skip_special_tokens=True)} for ids in out]


def write_lines(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("[\n" + ",\n".join(json.dumps(c, ensure_ascii=True) for c in lines) + "\n]\n")


def write_variant(name, files, config, texts, sp):
    tok = AutoTokenizer.from_pretrained(demo_files(files, config))
    assert type(tok).__name__ == "LlamaTokenizer", type(tok)
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"_files": files, **config}, f, indent=1)
        f.write("\n")
    write_lines(os.path.join(d, "goldens.json"), [case(tok, sp, t) for t in texts] + decode_cases(tok))
    print(f"{name}: {len(texts)} texts, pre_tokenizer {tok.backend_tokenizer.pre_tokenizer}", file=sys.stderr)


def write_wikitext(tok):
    with open(WIKI, encoding="utf-8") as f:
        text = f.read()
    ids = tok(text, add_special_tokens=False)["input_ids"]
    digest = hashlib.sha256(struct.pack("<%di" % len(ids), *ids)).hexdigest()
    with open(os.path.join(OUT, "wikitext.json"), "w", encoding="utf-8") as f:
        json.dump({"file": "wiki.test.raw", "count": len(ids), "sha256": digest}, f)
        f.write("\n")


def write_rule():
    names = tokenization_auto.TOKENIZER_MAPPING_NAMES
    incorrect = tokenization_auto.MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS
    generic = {"TokenizersBackend", "MistralCommonBackend", "PreTrainedTokenizerFast", "PythonBackend"}
    # A hub LlamaTokenizer gives way where the model type's registered class is a
    # generic backend, or another class that the incorrect-hub-class set enforces.
    overridden = sorted(m for m, c in names.items()
                        if c and c.removesuffix("Fast") != "LlamaTokenizer"
                        and (c in generic or m in incorrect))
    with open(RULE, "w", encoding="utf-8") as f:
        json.dump({"transformers": transformers.__version__,
                   "llama_class_overridden_for_model_types": overridden}, f, indent=1)
        f.write("\n")


def main():
    sp = spm.SentencePieceProcessor(model_file=os.path.join(DEMO, "tokenizer.model"))
    with open(os.path.join(DEMO, "tokenizer_config.json"), encoding="utf-8") as f:
        base = json.load(f)
    texts = PARITY_STRINGS + strings()
    full = AutoTokenizer.from_pretrained(DEMO)
    model_only = AutoTokenizer.from_pretrained(demo_files(["tokenizer.model", "config.json"], base))
    lines = [case(full, sp, t) for t in texts]
    for c in lines:
        assert model_only(c["text"])["input_ids"] == c["ids"], c["text"]
    write_lines(os.path.join(OUT, "goldens.json"), lines + decode_cases(full))
    differ = sum(c["ids_plain"] != c["spm_plain"] for c in lines)
    print(f"stories260k_hf5: {len(lines)} texts, {differ} differ from sentencepiece", file=sys.stderr)
    write_wikitext(full)
    short = PARITY_STRINGS + strings()[:60]
    both = ["tokenizer.json", "tokenizer.model", "config.json"]
    only = ["tokenizer.model", "config.json"]
    no_flags = {k: v for k, v in base.items() if k not in ("add_bos_token", "add_eos_token")}
    write_variant("nonlegacy", both, {**base, "legacy": False}, short, sp)
    write_variant("no_prefix_space", both, {**base, "add_prefix_space": False}, short, sp)
    write_variant("model_only_eos", only, {**base, "add_eos_token": True}, short, sp)
    write_variant("model_only_no_flags", only, no_flags, short, sp)
    write_rule()


if __name__ == "__main__":
    main()
