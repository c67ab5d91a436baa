#!/usr/bin/env python3
"""Golden fixtures for the CPU forward pass (tests/engine/forward_test.cpp).

For each supported architecture this builds a tiny random-weight model
(seeded), saves it with save_pretrained(safe_serialization=True) into
tests/data/engine/<name>/, and writes reference.safetensors beside it:
  tokens_long  I32 [40]   tokens_short I32 [7]
  logits_long  F32 [40, vocab]   logits_short F32 [7, vocab]
computed by transformers in float32 with attn_implementation="eager", after
reloading the saved checkpoint (so the reference sees exactly the stored,
possibly bf16-rounded, weights). It also writes tests/data/engine/
demo_logits.safetensors for the demo model models/stories260K-hf-bf16.

Run: /tmp/qenv/bin/python scripts/goldens/engine_fixtures.py   (torch CPU,
transformers 4.57.x). Deterministic for a given torch/transformers version.
"""
import copy
import json
import math
import os
import shutil
import sys

import torch
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForCausalLM

torch.set_num_threads(2)
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(REPO, "tests", "data", "engine")
VOCAB = 256
SLIDE = 8  # sliding window, well below the 40-token test sequence

BASE = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            max_position_embeddings=128, rms_norm_eps=1e-5, tie_word_embeddings=False,
            bos_token_id=1, eos_token_id=2, pad_token_id=0)
SMALL = dict(BASE, hidden_size=32, intermediate_size=64, head_dim=8)  # for F32 fixtures

# name -> (model_type, dtype, config overrides)
FIXTURES = {
    "llama": ("llama", torch.bfloat16, dict(BASE)),
    "llama3_rope": ("llama", torch.float32, dict(
        SMALL, tie_word_embeddings=True, attention_bias=True, mlp_bias=True, rope_theta=10000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 32})),
    "mistral": ("mistral", torch.bfloat16, dict(BASE, sliding_window=SLIDE)),
    "qwen2": ("qwen2", torch.float32, dict(SMALL, num_hidden_layers=3, use_sliding_window=True,
                                            sliding_window=SLIDE, max_window_layers=1)),
    "qwen3": ("qwen3", torch.bfloat16, dict(BASE, head_dim=24)),
    "gemma": ("gemma", torch.bfloat16, dict(BASE, tie_word_embeddings=True,
                                            hidden_act="gelu_pytorch_tanh")),
    "gemma2": ("gemma2", torch.bfloat16, dict(
        BASE, num_hidden_layers=3, intermediate_size=96, tie_word_embeddings=True,
        sliding_window=SLIDE, query_pre_attn_scalar=24, attn_logit_softcapping=2.0, final_logit_softcapping=10.0)),
    "gemma3_text": ("gemma3_text", torch.bfloat16, dict(
        BASE, num_hidden_layers=3, intermediate_size=96, tie_word_embeddings=True,
        sliding_window=SLIDE, sliding_window_pattern=2, query_pre_attn_scalar=24, attn_logit_softcapping=2.0,
        final_logit_softcapping=10.0, rope_theta=1000000.0, rope_local_base_freq=10000.0,
        rope_scaling={"rope_type": "linear", "factor": 2.0})),
    "phi3": ("phi3", torch.float32, dict(SMALL, partial_rotary_factor=0.5, sliding_window=12)),
    "mixtral": ("mixtral", torch.bfloat16, dict(
        BASE, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2)),
    "qwen2_moe": ("qwen2_moe", torch.bfloat16, dict(
        BASE, num_hidden_layers=3, intermediate_size=48, num_experts=6, num_experts_per_tok=2,
        moe_intermediate_size=16, shared_expert_intermediate_size=32, norm_topk_prob=False, mlp_only_layers=[1])),
    "qwen3_moe": ("qwen3_moe", torch.bfloat16, dict(
        BASE, num_experts=6, num_experts_per_tok=2, moe_intermediate_size=24, norm_topk_prob=True)),
}


def token_sequences(vocab, seed):
    g = torch.Generator().manual_seed(seed)
    long = torch.randint(3, vocab, (40,), generator=g, dtype=torch.int64)
    long[0] = 1
    short = torch.randint(3, vocab, (7,), generator=g, dtype=torch.int64)
    short[0] = 1
    return long, short


def randomize(model, gemma_norms, seed):
    """Weights big enough that attention, routing and softcapping all matter."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                base = 0.0 if gemma_norms else 1.0
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                scale = 1.0 / math.sqrt(p.shape[-1])
                if name.endswith("gate.weight"):  # MoE routers: decisive routing
                    scale *= 2.0
                p.copy_(scale * torch.randn(p.shape, generator=g))


@torch.no_grad()
def reference_logits(path, tokens):
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    return model(tokens[None, :]).logits[0].float().contiguous()


def build(name, model_type, dtype, overrides, seed):
    path = os.path.join(OUT, name)
    if os.path.isdir(path):
        shutil.rmtree(path)
    config = AutoConfig.for_model(model_type, **overrides)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    randomize(model, model_type.startswith("gemma"), seed)
    model = model.to(dtype)
    model.save_pretrained(path, safe_serialization=True)
    long, short = token_sequences(VOCAB, seed + 1)
    ref = {
        "tokens_long": long.to(torch.int32),
        "tokens_short": short.to(torch.int32),
        "logits_long": reference_logits(path, long),
        "logits_short": reference_logits(path, short),
    }
    save_file(ref, os.path.join(path, "reference.safetensors"))
    size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    lg = ref["logits_long"]
    print(f"{name:12s} {model_type:12s} {str(dtype):15s} {size / 1024:7.1f} KiB  "
          f"logit std {lg.std():.3f} max {lg.abs().max():.3f}")


def demo():
    path = os.path.join(REPO, "models", "stories260K-hf-bf16")
    long, _ = token_sequences(512, 1234)
    g = torch.Generator().manual_seed(99)
    long = torch.cat([long, torch.randint(3, 512, (24,), generator=g)])  # 64 tokens
    logits = reference_logits(path, long)
    save_file({"tokens": long.to(torch.int32), "logits": logits},
              os.path.join(OUT, "demo_logits.safetensors"))
    print(f"demo        {tuple(logits.shape)} max {logits.abs().max():.3f}")


def main():
    os.makedirs(OUT, exist_ok=True)
    only = set(sys.argv[1:])
    for i, (name, (mt, dt, ov)) in enumerate(FIXTURES.items()):
        if not only or name in only:
            build(name, mt, dt, copy.deepcopy(ov), 1000 + 17 * i)
    if not only or "demo" in only:
        demo()


if __name__ == "__main__":
    main()
