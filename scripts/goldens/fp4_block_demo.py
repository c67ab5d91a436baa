"""Quark 0.13's exported bytes of a few demo-model linears for the fp4 block
schemes (nvfp4, amdfp4, amdfp4_g32, amdfp4_global16), the fixture of
tests/quant/fp4_block_test.cpp.

Needs amd-quark==0.13, torch, transformers, safetensors (CPU). For each scheme
it quantizes models/stories260K-hf-bf16 with LLMTemplate("llama").get_config(
scheme, exclude_layers=["lm_head", "*down_proj"]) (down_proj's in_features 172
is not a multiple of 16), ModelQuantizer on two random calibration batches,
freeze, export_safetensors(custom_mode="quark", weight_format=
"real_quantized", pack_method="reorder"), and keeps layer 0's q/k/v/gate/up
weight, weight_scale, weight_scale_2 as "<scheme>/<tensor name>" (bytes
verbatim; fp8 scales as F8_E4M3).
Usage: python fp4_block_demo.py OUTPUT.safetensors
"""
import os, shutil, sys, tempfile

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM

from quark.torch import LLMTemplate, ModelQuantizer, export_safetensors

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, "..", "..", "models", "stories260K-hf-bf16"))
MODULES = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj"]
SCHEMES = ["nvfp4", "amdfp4", "amdfp4_g32", "amdfp4_global16"]


def main(out_path):
    kept = {}
    for scheme in SCHEMES:
        model = AutoModelForCausalLM.from_pretrained(SRC, torch_dtype=torch.bfloat16).eval()
        cfg = LLMTemplate.get("llama").get_config(scheme=scheme, exclude_layers=["lm_head", "*down_proj"])
        torch.manual_seed(0)
        calib = [torch.randint(3, 500, (1, 32)) for _ in range(2)]
        quantizer = ModelQuantizer(cfg)
        model = quantizer.freeze(quantizer.quantize_model(model, calib))
        tmp = tempfile.mkdtemp()
        try:
            export_safetensors(model, tmp, custom_mode="quark", weight_format="real_quantized", pack_method="reorder")
            with safe_open(os.path.join(tmp, "model.safetensors"), "pt") as f:
                for m in MODULES:
                    for suffix in ("weight", "weight_scale", "weight_scale_2"):
                        name = f"model.layers.0.{m}.{suffix}"
                        if name in f.keys():
                            kept[f"{scheme}/{name}"] = f.get_tensor(name).contiguous()
        finally:
            shutil.rmtree(tmp)
    save_file(kept, out_path, metadata={"format": "pt"})


if __name__ == "__main__":
    main(sys.argv[1])
