#!/usr/bin/env python3
"""convert_check.py GGUF HF_DIR: every tensor `qloom convert` wrote equals the
`gguf` package's dequantization of the GGUF tensor, rounded to bf16 (round to
nearest even), with llama.cpp's Q/K row permutation undone — an oracle written
independently of qloom's converter. The HF dir must hold exactly the mapped
tensors (no output.weight in the GGUF → no lm_head: tied embeddings), and its
config.json must name the architecture, sizes and rope theta the metadata gives.
Exit 0 when all match, 1 with the first mismatches listed, 77 when the light
venv lacks gguf or numpy (SKIPPED).
"""
import json
import pathlib
import re
import sys

try:
    import numpy as np
    import gguf
except ImportError as e:  # the light venv is created by scripts/setup
    print(f"SKIPPED: {e}")
    sys.exit(77)

LAYER = {
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
}
GLOBAL = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


def hf_name(name):
    base, suffix = name.rsplit(".", 1)
    m = re.fullmatch(r"blk\.(\d+)\.(\w+)", base)
    if m:
        return f"model.layers.{m.group(1)}.{LAYER[m.group(2)]}.{suffix}"
    return f"{GLOBAL[base]}.{suffix}"


def unpermute(w, heads):
    # llama.cpp stores Q/K rows of each head as [evens..., odds...] pairs
    # interleaved; HF keeps the two rotary halves apart.
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def bf16_bits(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def read_safetensors(path):
    """{name: (dtype string, shape, raw bytes)}; read directly (numpy has no bf16)."""
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    base = 8 + n
    return {k: (v["dtype"], tuple(v["shape"]), data[base + v["data_offsets"][0]:base + v["data_offsets"][1]])
            for k, v in header.items()}


def field(reader, key):
    return reader.fields[key].contents()


def main():
    gguf_path, hf_dir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    reader = gguf.GGUFReader(str(gguf_path))
    arch = field(reader, "general.architecture")
    heads = int(field(reader, f"{arch}.attention.head_count"))
    kv_heads = int(field(reader, f"{arch}.attention.head_count_kv"))
    config = json.loads((hf_dir / "config.json").read_text())
    failures = []
    expect = {"model_type": arch, "num_hidden_layers": int(field(reader, f"{arch}.block_count")),
              "hidden_size": int(field(reader, f"{arch}.embedding_length")),
              "intermediate_size": int(field(reader, f"{arch}.feed_forward_length")),
              "num_attention_heads": heads, "num_key_value_heads": kv_heads}
    for k, v in expect.items():
        if config.get(k) != v:
            failures.append(f"config.json {k} = {config.get(k)!r}, metadata says {v!r}")
    theta = float(field(reader, f"{arch}.rope.freq_base"))
    got_theta = config.get("rope_theta", (config.get("rope_parameters") or {}).get("rope_theta"))
    if got_theta != theta:
        failures.append(f"config.json rope theta = {got_theta!r}, metadata says {theta!r}")

    shards = sorted(hf_dir.glob("*.safetensors"))
    where = {}
    for p in shards:
        where.update(read_safetensors(p))
    expected_names = set()
    checked = 0
    for t in reader.tensors:
        name = hf_name(t.name)
        expected_names.add(name)
        if name not in where:
            failures.append(f"{name} (from {t.name}) missing in {hf_dir}")
            continue
        ref = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        ref = ref.reshape([int(d) for d in reversed(t.shape)])
        if t.name.endswith("attn_q.weight"):
            ref = unpermute(ref, heads)
        elif t.name.endswith("attn_k.weight"):
            ref = unpermute(ref, kv_heads)
        dtype, shape, raw = where[name]
        if dtype != "BF16" or shape != ref.shape:
            failures.append(f"{name}: {dtype} {shape}, expected BF16 {ref.shape}")
            continue
        got_bits = np.frombuffer(raw, dtype="<u2").reshape(shape)
        want = bf16_bits(ref)
        bad = np.count_nonzero(got_bits != want)
        if bad:
            failures.append(f"{name}: {bad} of {want.size} bf16 values differ from gguf's dequantize")
        checked += 1
    extra = set(where) - expected_names
    if extra:
        failures.append(f"tensors not in the GGUF: {sorted(extra)[:5]}")
    print(f"{checked} tensors compared ({len(reader.tensors)} in the GGUF, {len(where)} in {hf_dir})")
    for f in failures[:20]:
        print("MISMATCH", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
