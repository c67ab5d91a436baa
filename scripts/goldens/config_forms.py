#!/usr/bin/env python3
"""config.json in the forms transformers 4.x and 5.x write (tests/engine/config_forms_test.cpp).

For every engine fixture architecture (tests/data/engine/<name>/, the same
tiny sizes and overrides as scripts/goldens/engine_fixtures.py) and for a few
extra RoPE variants of the llama fixture, this builds the config with
AutoConfig.for_model(model_type, **overrides) and saves it with
save_pretrained into tests/data/engine/config_forms/<name>/v<major>.json
(only config.json is kept). Run it once with each transformers:

    /tmp/heavy/bin/python scripts/goldens/config_forms.py   # transformers 5.x -> v5.json
    /tmp/tf4/bin/python   scripts/goldens/config_forms.py   # transformers 4.x -> v4.json
    (/tmp/tf4: python3 -m venv /tmp/tf4 && /tmp/tf4/bin/pip install "transformers<5"; no torch needed)

The 4.x run also writes v4_torch_dtype.json: the same config with "dtype"
renamed "torch_dtype", as transformers before 4.56 writes it.
Names of the RoPE variants: rope_<type> on the llama fixture (weights of
tests/data/engine/llama); dynamic, yarn and longrope are types qloom's engine
does not compute (the test expects kUnsupported naming the field and type).
"""
import json
import os
import shutil
import sys
import tempfile

import transformers
from transformers import AutoConfig

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(REPO, "tests", "data", "engine", "config_forms")
SLIDE = 8
BASE = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            max_position_embeddings=128, rms_norm_eps=1e-5, tie_word_embeddings=False,
            bos_token_id=1, eos_token_id=2, pad_token_id=0)
SMALL = dict(BASE, hidden_size=32, intermediate_size=64, head_dim=8)

# name -> (model_type, dtype, overrides): as engine_fixtures.py FIXTURES.
FORMS = {
    "llama": ("llama", "bfloat16", dict(BASE)),
    "llama3_rope": ("llama", "float32", dict(
        SMALL, tie_word_embeddings=True, attention_bias=True, mlp_bias=True, rope_theta=10000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 32})),
    "mistral": ("mistral", "bfloat16", dict(BASE, sliding_window=SLIDE)),
    "qwen2": ("qwen2", "float32", dict(SMALL, num_hidden_layers=3, use_sliding_window=True,
                                       sliding_window=SLIDE, max_window_layers=1)),
    "qwen3": ("qwen3", "bfloat16", dict(BASE, head_dim=24)),
    "gemma": ("gemma", "bfloat16", dict(BASE, tie_word_embeddings=True, hidden_act="gelu_pytorch_tanh")),
    "gemma2": ("gemma2", "bfloat16", dict(
        BASE, num_hidden_layers=3, intermediate_size=96, tie_word_embeddings=True,
        sliding_window=SLIDE, query_pre_attn_scalar=24, attn_logit_softcapping=2.0, final_logit_softcapping=10.0)),
    "gemma3_text": ("gemma3_text", "bfloat16", dict(
        BASE, num_hidden_layers=3, intermediate_size=96, tie_word_embeddings=True,
        sliding_window=SLIDE, sliding_window_pattern=2, query_pre_attn_scalar=24, attn_logit_softcapping=2.0,
        final_logit_softcapping=10.0, rope_theta=1000000.0, rope_local_base_freq=10000.0,
        rope_scaling={"rope_type": "linear", "factor": 2.0})),
    "phi3": ("phi3", "float32", dict(SMALL, partial_rotary_factor=0.5, sliding_window=12)),
    "mixtral": ("mixtral", "bfloat16", dict(BASE, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2)),
    "qwen2_moe": ("qwen2_moe", "bfloat16", dict(
        BASE, num_hidden_layers=3, intermediate_size=48, num_experts=6, num_experts_per_tok=2,
        moe_intermediate_size=16, shared_expert_intermediate_size=32, norm_topk_prob=False, mlp_only_layers=[1])),
    "qwen3_moe": ("qwen3_moe", "bfloat16", dict(
        BASE, num_experts=6, num_experts_per_tok=2, moe_intermediate_size=24, norm_topk_prob=True)),
    # RoPE variants on the llama fixture's weights.
    "rope_linear": ("llama", "bfloat16", dict(BASE, rope_theta=50000.0,
                                              rope_scaling={"rope_type": "linear", "factor": 4.0})),
    "rope_llama3": ("llama", "bfloat16", dict(BASE, rope_theta=500000.0, rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 32})),
    "rope_dynamic": ("llama", "bfloat16", dict(BASE, rope_scaling={"rope_type": "dynamic", "factor": 2.0})),
    "rope_yarn": ("llama", "bfloat16", dict(BASE, rope_scaling={
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32})),
    "rope_longrope": ("llama", "bfloat16", dict(BASE, rope_scaling={
        "rope_type": "longrope", "short_factor": [1.0] * 8, "long_factor": [2.0] * 8,
        "original_max_position_embeddings": 32})),
}


def save(name, model_type, dtype, overrides, major):
    config = AutoConfig.for_model(model_type, **overrides)
    config.dtype = dtype
    with tempfile.TemporaryDirectory() as tmp:
        config.save_pretrained(tmp)
        with open(os.path.join(tmp, "config.json")) as f:
            saved = json.load(f)
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"v{major}.json"), "w") as f:
        json.dump(saved, f, indent=2, sort_keys=True)
        f.write("\n")
    if major == 4:
        legacy = {("torch_dtype" if k == "dtype" else k): v for k, v in saved.items()}
        with open(os.path.join(d, "v4_torch_dtype.json"), "w") as f:
            json.dump(legacy, f, indent=2, sort_keys=True)
            f.write("\n")
    print(f"{name:12s} v{major}: {len(saved)} keys")


def main():
    major = int(transformers.__version__.split(".")[0])
    only = set(sys.argv[1:])
    for name, (mt, dt, ov) in FORMS.items():
        if not only or name in only:
            save(name, mt, dt, json.loads(json.dumps(ov)), major)


if __name__ == "__main__":
    main()
