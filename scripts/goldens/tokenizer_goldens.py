#!/usr/bin/env python3
"""Writes the tokenizer golden files under tests/data/tokenizers/<style>/.

Run with a Python that has `tokenizers` 0.22.1 (and `sentencepiece` for the
tokenizer.model goldens of the demo model), from the repository root:

    /tmp/tokvenv/bin/python scripts/goldens/tokenizer_goldens.py

Deterministic: the constructed tokenizers are trained single-threaded
(RAYON_NUM_THREADS=1) on wikitext-2 wiki.valid.raw with fixed settings, and
the string list below is fixed.

Per style the directory holds tokenizer.json (and tokenizer_config.json where
one matters) plus goldens.json: one case per line,
  {"text": str, "ids": [...], "ids_plain": [...], "decoded": str, "decoded_skip": str}
where ids = encode(text, add_special_tokens=True), ids_plain = the same with
False, decoded = decode(ids, skip_special_tokens=False), decoded_skip = with
True; plus "decode_cases" lines {"ids": [...], "decoded": ..., "decoded_skip": ...}
for id sequences cut in the middle of multi-byte characters.
"""
import json
import os
import sys

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers  # noqa: E402
from tokenizers import pre_tokenizers, processors, trainers  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "data", "tokenizers")
WIKI = os.environ.get("QLOOM_WIKITEXT_DIR", "/work/shared/data/wikitext-2-raw")
DEMO = os.path.join(ROOT, "models", "stories260K-hf-bf16")
GPT2_SOURCE = os.environ.get("QLOOM_GPT2_TOKENIZER_JSON", "/tmp/tokreal/gpt2.json")

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                  r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

SPECIALS = ["<s>", "</s>", "<unk>", "<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>",
            "<|eot_id|>", "<|im_start|>", "<|im_end|>", "<|tool|>", "<think>"]


def strings():
    """The shared list of test strings (a few hundred)."""
    s = [
        "", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\t\t x", "a", "A", "hello",
        "Hello world", "Hello, world!", " Hello", "Hello ", "  Hello  ", "hello   world",
        "Hello\nworld", "Hello\n\nworld\n", "tabs\tand\ttabs", "line1\r\nline2\r\n",
        "I'm sure they'll say it's fine, don't you think? We've seen it, I'd say.",
        "I'M SURE THEY'LL SAY IT'S FINE, DON'T YOU? WE'VE, I'D, YOU'RE",
        "'s 't 're 've 'm 'll 'd", "'S 'T 'RE 'VE 'M 'LL 'D", "it's", "IT'S", "Let's go'", "''''",
        "you're", "they've", "o'clock", "rock 'n' roll",
        "12345", "3.14159", "1,000,000", "Numbers 12345 and 3.14159 and 1,000,000",
        "2024-01-15T10:30:00Z", "0x1F600", "1e-10", "phone: +1 (555) 123-4567",
        "٠١٢٣٤٥٦٧٨٩", "①②③", "Ⅻ", "½ ¾", "１２３", "x²+y³=z⁴",
        "Café naïve résumé façade Ångström", "e\u0301", "cafe\u0301", "\u00e9 vs e\u0301",
        "Ω ohm \u2126", "ﬁ ligature", "Ｆｕｌｌｗｉｄｔｈ", "ｶﾀｶﾅ",
        "你好，世界！这是一个测试。", "日本語のテキストとカタカナ ー", "한국어 텍스트입니다",
        "Россия и Україна", "Ελληνικά γράμματα ΣΊΣΥΦΟΣ", "مرحبا بالعالم", "שלום עולם",
        "हिन्दी भाषा", "ภาษาไทย", "ქართული", "Tiếng Việt có dấu",
        "Emoji: 😀👍🏽🇺🇸 and ❤️", "👨‍👩‍👧‍👦", "🏳️‍🌈", "👩🏽‍💻 codes", "😀😀😀",
        "✓ ✗ ★ ☆ ♠ ♥", "→ ← ↑ ↓ ⇒", "∑∫∂√∞≠≤≥", "©®™", "€£¥₹₿",
        "zero\u200bwidth", "non\u00a0breaking", "soft\u00adhyphen", "bom\ufeffhere",
        "ideographic\u3000space", "em\u2003space", "line\u2028sep", "nel\u0085here",
        "def foo(x):\n    return x ** 2  # square\n",
        "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
        "if x == 1 and y != 2:\n        pass", "console.log(`${a}+${b}`);",
        "<div class=\"x\">&amp;</div>", "SELECT * FROM t WHERE a='b';",
        "path/to/file.txt C:\\Windows\\System32", "https://example.com/a?b=c&d=e#f",
        "user@example.com", "#hashtag @mention $dollar %percent ^caret",
        "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}", "a_b_c __init__ snake_case CamelCase",
        "Punctuation!!! ??? ... --- (parens) [brackets] {braces}", "....", "!!!???", "---",
        "a-b–c—d", "\"quoted\" 'single' «guillemets» „low“", "…", "@-@", " @,@ ", " @.@ ",
        "    four spaces", "\t\ttwo tabs", "trailing spaces    ", "mixed \t \n \r whitespace",
        "   \n\n   \n", "a\n", "\na", " a", "a ", " a ", "word\n\n\n\nword",
        "<s>", "</s>", "<unk>", "<s>hello</s>", "<s> hello </s>", "hello<s>world",
        "hello <s> world", "<s><s></s>", "text </s> more", "<|endoftext|>",
        "Hello<|endoftext|>world", "<|endoftext|> leading", "trailing <|endoftext|>",
        "<|begin_of_text|>Hi<|eot_id|>", "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
        "a <|tool|> b", "x<|tool|>y", "  <|tool|>  ", "<think>reason</think>", "<think> spaced </think>",
        "foo", "foo bar", "afoo", "foo_bar", "(foo)", "foo.", "xfoox foo", "Ωmega Ω",
        "<s", "s>", "< s >", "<|endoftext", "|>", "<<s>>",
        "<0x41>", "<0xFF>", "\\xff\\xfe", "\u00ff\u00fe", "\ufffd", "\ufffd\ufffd", "\u0000null",
        "\u0001\u0002\u001f", "\u007f", "\U0001F9EC\U0001FAE0", "\U00010348 gothic", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
        "Ġ Ċ ĉ", "▁ ▁▁ ▁x", "▁hello", "x▁y", "\u2581\u2581",
        "The quick brown fox jumps over the lazy dog.", "THE QUICK BROWN FOX",
        "supercalifragilisticexpialidocious", "pneumonoultramicroscopicsilicovolcanoconiosis",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "abababababababababababab",
        "                                                  ", "1234567890" * 5,
        "🙂" * 10, "é" * 20, "ab cd ef gh ij kl mn op qr st uv wx yz",
        "Mr. Smith's dog's bone", "don't won't can't shouldn't", "DON'T WON'T",
        "The year 1999 and 2000s; 10% of 50 is 5.", "x = 3.0e8 m/s", "v1.2.3-rc.4",
    ]
    # Lines of wikitext (deterministic pick): real prose, wiki markup, " @-@ " etc.
    with open(os.path.join(WIKI, "wiki.test.raw"), encoding="utf-8") as f:
        lines = [ln for ln in f.read().split("\n") if ln.strip()]
    step = max(1, len(lines) // 50)
    for ln in lines[::step][:50]:
        s.append(ln + "\n")
    # A multi-line paragraph with leading space as wikitext has.
    s.append("\n".join(lines[:6]))
    return s


def added(content, special=True, **kw):
    return AddedToken(content, special=special, normalized=kw.pop("normalized", not special), **kw)


def byte_level_bpe(specials_before, vocab_size, pre_tok, normalizer=None):
    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tok
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=specials_before,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train([os.path.join(WIKI, "wiki.valid.raw")], trainer)
    tok.decoder = decoders.ByteLevel()
    return tok


def make_llama3():
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok = byte_level_bpe([], 4000, pre)
    # Llama-3 keeps whole words found in the vocab (ignore_merges).
    data = json.loads(tok.to_str())
    data["model"]["ignore_merges"] = True
    tok = Tokenizer.from_str(json.dumps(data))
    tok.add_special_tokens([added("<|begin_of_text|>"), added("<|end_of_text|>"),
                            added("<|eot_id|>"), added("<|tool|>", lstrip=True, rstrip=True)])
    tok.add_tokens([added("foo", special=False, single_word=True, normalized=False)])
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}
    return tok, config


def make_qwen2():
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok = byte_level_bpe([], 3500, pre, normalizers.NFC())
    tok.add_special_tokens([added("<|endoftext|>"), added("<|im_start|>"), added("<|im_end|>")])
    # Non-special added tokens: one matched on the raw text, one on the NFC text.
    tok.add_tokens([added("<think>", special=False, normalized=False),
                    added("</think>", special=False, normalized=False),
                    added("\u2126mega", special=False, normalized=True)])
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False,
                                              use_regex=False)
    config = {"bos_token": None, "eos_token": "<|endoftext|>"}
    return tok, config


def make_smollm2():
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
    tok = byte_level_bpe(["<|endoftext|>", "<|im_start|>", "<|im_end|>"], 3000, pre)
    tok.post_processor = processors.ByteLevel(add_prefix_space=True, trim_offsets=False,
                                              use_regex=True)
    config = {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}
    return tok, config


def make_metaspace():
    """Mistral / Llama-2 (legacy=False) shape: Metaspace(prepend_scheme=first, split=false)
    pre-tokenizer, BPE with byte_fallback and <0xXX> tokens, <s> template."""
    pre = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre
    trainer = trainers.BpeTrainer(vocab_size=2500, min_frequency=2, show_progress=False,
                                  special_tokens=[])
    tok.train([os.path.join(WIKI, "wiki.valid.raw")], trainer)
    trained = json.loads(tok.to_str())["model"]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for t, _ in sorted(trained["vocab"].items(), key=lambda kv: kv[1]):
        if t not in vocab:
            vocab[t] = len(vocab)
    data = json.loads(tok.to_str())
    data["model"] = {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                     "continuing_subword_prefix": None, "end_of_word_suffix": None,
                     "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                     "vocab": vocab, "merges": trained["merges"]}
    data["normalizer"] = None
    data["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    tok = Tokenizer.from_str(json.dumps(data))
    tok.add_special_tokens([added("<unk>", normalized=False), added("<s>", normalized=False),
                            added("</s>", normalized=False)])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B:1", special_tokens=[("<s>", 1)])
    config = {"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>",
              "eos_token": "</s>", "unk_token": "<unk>", "legacy": False}
    return tok, config


def make_gpt2():
    with open(GPT2_SOURCE, encoding="utf-8") as f:
        data = json.load(f)
    data["truncation"] = None  # the source copy was saved with max_length 50
    return Tokenizer.from_str(json.dumps(data, ensure_ascii=False)), None


def make_demo():
    with open(os.path.join(DEMO, "tokenizer.json"), encoding="utf-8") as f:
        return Tokenizer.from_str(f.read()), None


def with_components(base, **parts):
    """A copy of tokenizer `base` with some components replaced (JSON values)."""
    data = json.loads(base.to_str())
    data.update(parts)
    return Tokenizer.from_str(json.dumps(data))


def comp(x):
    """A component object as its tokenizer.json value."""
    holder = Tokenizer(models.BPE())
    if isinstance(x, pre_tokenizers.PreTokenizer):
        holder.pre_tokenizer = x
        return json.loads(holder.to_str())["pre_tokenizer"]
    if isinstance(x, normalizers.Normalizer):
        holder.normalizer = x
        return json.loads(holder.to_str())["normalizer"]
    if isinstance(x, decoders.Decoder):
        holder.decoder = x
        return json.loads(holder.to_str())["decoder"]
    holder.post_processor = x
    return json.loads(holder.to_str())["post_processor"]


def prefix_suffix_bpe(n_merges=300):
    """BPE with continuing_subword_prefix "##", end_of_word_suffix "</w>" and
    [UNK], from a tiny deterministic trainer (HF's trainer numbers "##x"
    tokens in hash-map order, so its merge ties vary between runs)."""
    import collections
    import re
    with open(os.path.join(WIKI, "wiki.valid.raw"), encoding="utf-8") as f:
        text = f.read(300000)
    counts = collections.Counter(re.findall(r"\w+|[^\w\s]+", text))

    def symbols(w):
        syms = [w[0]] + ["##" + c for c in w[1:]]
        syms[-1] += "</w>"
        return syms

    words = {w: symbols(w) for w in counts}
    sym_count = collections.Counter()
    for w, syms in words.items():
        for x in syms:
            sym_count[x] += counts[w]
    vocab = ["[UNK]"] + sorted(x for x, c in sym_count.items() if c >= 2)
    merges = []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for w, syms in words.items():
            for a, b in zip(syms, syms[1:]):
                if a in vocab and b in vocab:
                    pairs[(a, b)] += counts[w]
        if not pairs:
            break
        (a, b), _ = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))
        merged = a + (b[2:] if b.startswith("##") else b)
        merges.append([a, b])
        vocab.append(merged)
        for w, syms in words.items():
            out, i = [], 0
            while i < len(syms):
                if i + 1 < len(syms) and syms[i] == a and syms[i + 1] == b:
                    out.append(merged)
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            words[w] = out
    data = json.loads(Tokenizer(models.BPE()).to_str())
    data["added_tokens"] = [{"id": 0, "content": "[UNK]", "single_word": False, "lstrip": False,
                             "rstrip": False, "normalized": False, "special": True}]
    data["pre_tokenizer"] = comp(pre_tokenizers.Whitespace())
    data["model"] = {"type": "BPE", "dropout": None, "unk_token": "[UNK]",
                     "continuing_subword_prefix": "##", "end_of_word_suffix": "</w>",
                     "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                     "vocab": {t: i for i, t in enumerate(vocab)}, "merges": merges}
    return Tokenizer.from_str(json.dumps(data))


def make_variants():
    """Small tokenizers that exercise the components the real styles do not:
    every Split behavior and invert, Digits runs, Whitespace(Split), ByteLevel
    add_prefix_space, NFKC/NFD/Lowercase/Prepend/Replace/Strip normalizers,
    Metaspace split / prepend never, Roberta/Bert post-processors, and BPE
    with continuing_subword_prefix / end_of_word_suffix."""
    bl = byte_level_bpe(["<|endoftext|>"], 900, pre_tokenizers.ByteLevel(add_prefix_space=False))
    BL = comp(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False))

    def seq(*p):
        return {"type": "Sequence", "pretokenizers": [comp(x) for x in p] + [BL]}

    v = {}
    v["split_removed"] = with_components(bl, pre_tokenizer=seq(
        pre_tokenizers.Split(Regex(r"\s+"), behavior="removed")))
    v["split_prev"] = with_components(bl, pre_tokenizer=seq(
        pre_tokenizers.Split(" ", behavior="merged_with_previous")))
    v["split_next"] = with_components(bl, pre_tokenizer=seq(
        pre_tokenizers.Split(Regex(r"\p{P}"), behavior="merged_with_next")))
    v["split_contig"] = with_components(bl, pre_tokenizer=seq(
        pre_tokenizers.Split(Regex(r"\d"), behavior="contiguous")))
    v["split_invert"] = with_components(bl, pre_tokenizer=seq(
        pre_tokenizers.Split(Regex(r"\p{L}+"), behavior="isolated", invert=True)))
    v["split_invert_removed"] = with_components(bl, pre_tokenizer=seq(
        pre_tokenizers.Split(Regex(r"[a-z]+"), behavior="removed", invert=True)))
    v["digits_whitespace"] = with_components(bl, pre_tokenizer=seq(
        pre_tokenizers.Whitespace(), pre_tokenizers.Digits(individual_digits=False)))
    v["wssplit_lower_nfkc"] = with_components(
        bl, normalizer=comp(normalizers.Sequence([
            normalizers.NFKC(), normalizers.Lowercase(),
            normalizers.Replace(Regex(r"\d"), "#"), normalizers.Prepend("_")])),
        pre_tokenizer={"type": "Sequence", "pretokenizers": [
            comp(pre_tokenizers.WhitespaceSplit()),
            comp(pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True))]})
    v["nfd_strip_prefix"] = with_components(
        bl, normalizer=comp(normalizers.Sequence([
            normalizers.NFD(), normalizers.Strip(left=True, right=False),
            normalizers.Replace("e", "E")])),
        pre_tokenizer=comp(pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)))
    v["roberta"] = with_components(bl, post_processor=comp(processors.RobertaProcessing(
        ("<|endoftext|>", 0), ("<|endoftext|>", 0))))
    v["bert"] = with_components(bl, post_processor=comp(processors.BertProcessing(
        ("<|endoftext|>", 0), ("<|endoftext|>", 0))))

    ms, _ = make_metaspace()
    for name, scheme, split in (("metaspace_always_split", "always", True),
                                ("metaspace_never_split", "never", True)):
        v[name] = with_components(
            ms, pre_tokenizer=comp(pre_tokenizers.Metaspace(prepend_scheme=scheme, split=split)),
            decoder=comp(decoders.Metaspace(prepend_scheme=scheme, split=split)))

    v["bpe_prefix_suffix_unk"] = prefix_suffix_bpe()
    return v


def decode_cases(tok, texts):
    """Id sequences cut inside multi-byte characters, and out-of-range ids."""
    out = []
    for t in texts:
        ids = tok.encode(t, add_special_tokens=False).ids
        for cut in (1, len(ids) // 2, len(ids) - 1):
            if 0 < cut < len(ids):
                out.append(ids[:cut])
                out.append(ids[cut:])
    out.append([tok.get_vocab_size() + 5, 0, 1, 2])
    return out


def write_style(name, tok, config, sample_strings, wikitext=True):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    data = json.loads(tok.to_str())
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, separators=(",", ":"))
    if config is not None:
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f, ensure_ascii=False, indent=1)
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    lines = []
    for text in sample_strings:
        ids = tok.encode(text, add_special_tokens=True).ids
        plain = tok.encode(text, add_special_tokens=False).ids
        lines.append(json.dumps({"text": text, "ids": ids, "ids_plain": plain,
                                 "decoded": tok.decode(ids, skip_special_tokens=False),
                                 "decoded_skip": tok.decode(ids, skip_special_tokens=True)},
                                ensure_ascii=True))
    for ids in decode_cases(tok, ["Emoji: 😀👍🏽🇺🇸 and ❤️", "你好，世界！", "Café ñ ü", "👨‍👩‍👧‍👦"]):
        lines.append(json.dumps({"decode_ids": ids,
                                 "decoded": tok.decode(ids, skip_special_tokens=False),
                                 "decoded_skip": tok.decode(ids, skip_special_tokens=True)},
                                ensure_ascii=True))
    with open(os.path.join(d, "goldens.json"), "w", encoding="utf-8") as f:
        f.write("[\n" + ",\n".join(lines) + "\n]\n")
    if wikitext:
        write_wikitext_digest(name, tok)
    print(f"{name}: vocab {tok.get_vocab_size()}, {len(lines)} cases", file=sys.stderr)


def write_wikitext_digest(name, tok):
    """Count and SHA-256 (of the ids as little-endian int32) of encoding all of
    wiki.test.raw at once without special tokens: checks the whole file
    without committing its ids."""
    import hashlib
    import struct
    with open(os.path.join(WIKI, "wiki.test.raw"), encoding="utf-8") as f:
        text = f.read()
    ids = tok.encode(text, add_special_tokens=False).ids
    digest = hashlib.sha256(struct.pack("<%di" % len(ids), *ids)).hexdigest()
    with open(os.path.join(OUT, name, "wikitext.json"), "w", encoding="utf-8") as f:
        json.dump({"file": "wiki.test.raw", "count": len(ids), "sha256": digest}, f)
        f.write("\n")


def write_sentencepiece(sample_strings):
    """Goldens for the demo tokenizer.model through the `sentencepiece` package:
    ids_plain = sp.encode(text); ids = [bos] + that (LlamaTokenizer add_bos_token);
    decoded = sp.decode(ids) (control tokens render empty, so both modes agree)."""
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(DEMO, "tokenizer.model"))
    d = os.path.join(OUT, "stories260k_spm")
    os.makedirs(d, exist_ok=True)
    lines = []
    for text in sample_strings:
        plain = sp.encode(text)
        ids = [sp.bos_id()] + plain
        dec = sp.decode(ids)
        lines.append(json.dumps({"text": text, "ids": ids, "ids_plain": plain,
                                 "decoded": dec, "decoded_skip": dec}, ensure_ascii=True))
    with open(os.path.join(d, "goldens.json"), "w", encoding="utf-8") as f:
        f.write("[\n" + ",\n".join(lines) + "\n]\n")
    print(f"stories260k_spm: {len(lines)} cases", file=sys.stderr)


def main():
    s = strings()
    write_style("stories260k", *make_demo(), s)
    write_style("gpt2", *make_gpt2(), s)
    write_style("llama3", *make_llama3(), s)
    write_style("qwen2", *make_qwen2(), s)
    write_style("smollm2", *make_smollm2(), s)
    write_style("metaspace", *make_metaspace(), s)
    # Variants: the hand-written strings only (not the wikitext lines).
    short = s[:len(s) - 51]
    for name, tok in make_variants().items():
        write_style(os.path.join("variants", name), tok, None, short, wikitext=False)
    try:
        write_sentencepiece(s)
    except ImportError:
        print("sentencepiece not installed: stories260k_spm goldens not rewritten", file=sys.stderr)


if __name__ == "__main__":
    main()
