#!/usr/bin/env python3
"""Writes the seed corpus for the tokenizer.json fuzzer into fuzz/corpus_tokenizer/.

Seeds: the test tokenizers of tests/data/tokenizers (every real style and
component variant) cut down to their first ids, so each stays a few KB;
small synthetic files for every model type (BPE loads; WordPiece, Unigram
and WordLevel are rejected as unsupported), every normalizer,
pre-tokenizer, decoder and post-processor kind qloom reads; and the hostile
cases of issue 30 (huge, negative, non-integer and duplicate ids, text
multiplying normalizers and decoders, a catastrophically backtracking
regex, deep nesting, oversized strings). Deterministic: rerunning rewrites
identical files.
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(ROOT, "tests", "data", "tokenizers")
OUT = os.path.join(HERE, "corpus_tokenizer")
KEEP_IDS = 300


def dump(doc):
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def minimized(doc):
    """`doc` with its vocab cut to ids < KEEP_IDS (and byte pieces) and the merges that still apply."""
    model = doc["model"]
    vocab = {t: i for t, i in model["vocab"].items() if i < KEEP_IDS or (t.startswith("<0x") and len(t) == 6)}
    merges = []
    prefix = model.get("continuing_subword_prefix") or ""
    for m in model.get("merges", []):
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        merged = a + (b[len(prefix):] if prefix and b.startswith(prefix) else b)
        if a in vocab and b in vocab and merged in vocab:
            merges.append(m)
    out = dict(doc)
    out["model"] = dict(model, vocab=vocab, merges=merges)
    return out


def real_seeds():
    seeds = {}
    for style in sorted(os.listdir(DATA)):
        dirs = [style] if style != "variants" else [os.path.join("variants", v) for v in sorted(os.listdir(os.path.join(DATA, style)))]
        for d in dirs:
            path = os.path.join(DATA, d, "tokenizer.json")
            if not os.path.isfile(path):
                continue
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
            seeds["real_" + d.replace(os.sep, "_")] = dump(minimized(doc))
    return seeds


VOCAB = {"<unk>": 0, "<s>": 1, "</s>": 2, "a": 3, "b": 4, "c": 5, "ab": 6, "abc": 7, " ": 8, "\u2581": 9,
         "\u2581a": 10, "1": 11, "2": 12, "!": 13, "h": 14, "i": 15, "hi": 16, "##b": 17, "a</w>": 18}
for _b in range(256):
    VOCAB["<0x%02X>" % _b] = 19 + _b
MERGES = ["a b", "ab c", "\u2581 a", "h i"]
ADDED = [{"id": 1, "content": "<s>", "special": True, "normalized": False},
         {"id": 2, "content": "</s>", "special": True, "normalized": False},
         {"id": 300, "content": "<sep>", "special": True, "lstrip": True, "rstrip": True},
         {"id": 301, "content": "word", "single_word": True, "normalized": True}]


def bpe(**options):
    model = {"type": "BPE", "vocab": VOCAB, "merges": MERGES, "unk_token": "<unk>"}
    model.update(options)
    return model


def tok(model=None, normalizer=None, pre=None, post=None, decoder=None, added=ADDED):
    return {"version": "1.0", "added_tokens": added, "normalizer": normalizer, "pre_tokenizer": pre,
            "post_processor": post, "decoder": decoder, "model": model or bpe()}


def replace(pattern, content, kind="String"):
    return {"type": "Replace", "pattern": {kind: pattern}, "content": content}


def split(pattern, behavior, invert=False, kind="Regex"):
    return {"type": "Split", "pattern": {kind: pattern}, "behavior": behavior, "invert": invert}


TEMPLATE = {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]},
                               "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}}


def synthetic_seeds():
    s = {}
    # Model types.
    s["model_bpe_options"] = tok(bpe(fuse_unk=True, byte_fallback=True, ignore_merges=True,
                                     continuing_subword_prefix="##", end_of_word_suffix="</w>"))
    s["model_bpe_pair_merges"] = tok(bpe(merges=[["a", "b"], ["ab", "c"]]))
    s["model_wordpiece"] = tok({"type": "WordPiece", "unk_token": "<unk>", "continuing_subword_prefix": "##",
                                "max_input_chars_per_word": 100, "vocab": VOCAB})
    s["model_unigram"] = tok({"type": "Unigram", "unk_id": 0, "byte_fallback": False,
                              "vocab": [["<unk>", 0.0], ["a", -1.0], ["b", -2.0], ["ab", -1.5]]})
    s["model_wordlevel"] = tok({"type": "WordLevel", "vocab": VOCAB, "unk_token": "<unk>"})
    # Normalizers.
    for kind in ["NFC", "NFD", "NFKC", "NFKD", "Lowercase"]:
        s["norm_" + kind.lower()] = tok(normalizer={"type": kind})
    s["norm_strip"] = tok(normalizer={"type": "Strip", "strip_left": True, "strip_right": False})
    s["norm_sequence"] = tok(normalizer={"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"}, replace(" ", "\u2581"), replace("[0-9]+", "1", "Regex"),
        {"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Strip", "strip_left": False, "strip_right": True}]})
    # Pre-tokenizers.
    s["pre_bytelevel"] = tok(pre={"type": "ByteLevel", "add_prefix_space": True, "use_regex": True},
                             decoder={"type": "ByteLevel"}, post={"type": "ByteLevel"})
    s["pre_bytelevel_noregex"] = tok(pre={"type": "ByteLevel", "add_prefix_space": False, "use_regex": False})
    for b in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]:
        s["pre_split_" + b.lower()] = tok(pre=split("\\s+|[0-9]", b))
    s["pre_split_invert_string"] = tok(pre=split(" ", "Removed", True, "String"))
    for scheme in ["always", "first", "never"]:
        s["pre_metaspace_" + scheme] = tok(pre={"type": "Metaspace", "replacement": "\u2581",
                                                 "prepend_scheme": scheme, "split": scheme != "never"},
                                            decoder={"type": "Metaspace", "replacement": "\u2581",
                                                     "prepend_scheme": scheme})
    s["pre_metaspace_legacy"] = tok(pre={"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": False})
    s["pre_sequence"] = tok(pre={"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, {"type": "Whitespace"}, {"type": "WhitespaceSplit"}]})
    s["pre_digits_runs"] = tok(pre={"type": "Digits", "individual_digits": False})
    # Decoders and post-processors.
    s["dec_sentencepiece"] = tok(bpe(byte_fallback=True, fuse_unk=True), decoder={"type": "Sequence", "decoders": [
        replace("\u2581", " "), {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}, post=TEMPLATE)
    s["post_roberta"] = tok(post={"type": "RobertaProcessing", "cls": ["<s>", 1], "sep": ["</s>", 2]})
    s["post_bert"] = tok(post={"type": "BertProcessing", "cls": ["<s>", 1], "sep": ["</s>", 2]})
    s["post_sequence"] = tok(post={"type": "Sequence", "processors": [{"type": "ByteLevel"}, TEMPLATE]})
    s["minimal"] = {"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}
    return {k: dump(v) for k, v in s.items()}


def hostile_seeds():
    s = {}
    big = dict(VOCAB, zz=400_000_000)
    s["bad_vocab_id_400m"] = tok(bpe(vocab=big))
    s["bad_vocab_id_int32max"] = tok(bpe(vocab=dict(VOCAB, zz=2**31 - 1)))
    s["bad_vocab_id_dup"] = tok(bpe(vocab=dict(VOCAB, zz=3)))
    s["bad_added_id_negative"] = tok(added=[{"id": -5, "content": "a"}])
    s["bad_added_id_float"] = tok(added=[{"id": 1.5, "content": "<x>"}])
    s["bad_post_id"] = tok(post={"type": "RobertaProcessing", "cls": ["<s>", -1], "sep": ["</s>", 2**40]})
    s["bad_norm_multiply"] = tok(normalizer={"type": "Sequence", "normalizers": [replace("a", "b" * 1000)] * 3})
    # Doubling 24 times: small steps, 16M x in all.
    s["bad_norm_doubling"] = tok(normalizer={"type": "Sequence", "normalizers":
                                             [{"type": "Prepend", "prepend": "ab"}] + [replace("a", "aa")] * 24})
    s["bad_dec_multiply"] = tok(decoder={"type": "Sequence", "decoders": [replace("a", "a" * 1000)] * 3})
    s["bad_dec_doubling"] = tok(decoder={"type": "Sequence", "decoders": [replace("a", "aa")] * 24})
    s["bad_regex_backtrack"] = tok(pre=split("(a|aa)+$|(\\w+\\s?)+$", "Isolated"))
    s["bad_regex_syntax"] = tok(pre=split("(a", "Isolated"))
    s["bad_merge_unknown"] = tok(bpe(merges=["q r"]))
    s["bad_many_ids"] = tok(post={"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "x"}}] * 3,
                                  "special_tokens": {"x": {"id": "x", "ids": [1] * 1500}}})
    nested = {"type": "Lowercase"}
    for _ in range(70):
        nested = {"type": "Sequence", "normalizers": [nested]}
    s["bad_nesting"] = tok(normalizer=nested)
    out = {k: dump(v) for k, v in s.items()}
    out["bad_not_json"] = b'{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ['
    out["bad_nul"] = b'{"model": {"type": "BPE", "vocab": {"a\x00": 0}, "merges": []}}'
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {}
    seeds.update(real_seeds())
    seeds.update(synthetic_seeds())
    seeds.update(hostile_seeds())
    for name, data in sorted(seeds.items()):
        with open(os.path.join(OUT, name + ".json"), "wb") as f:
            f.write(data)
    print(f"wrote {len(seeds)} seeds to {OUT}")


if __name__ == "__main__":
    main()
