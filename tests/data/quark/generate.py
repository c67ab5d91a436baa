"""Regenerates the Quark golden files of this directory with AMD Quark itself.

Needs amd-quark==0.12.post1, torch, transformers<5 and safetensors (CPU is
enough). For each scheme it quantizes the bundled demo model
(models/stories260K-hf-bf16) with Quark's LLMTemplate + ModelQuantizer on two
random calibration batches, exports it with export_safetensors(custom_mode=
"quark", weight_format="real_quantized", pack_method="reorder"), and keeps:
  <scheme>/config.json           Quark's config.json, verbatim
  <scheme>/tensors.txt           every exported tensor: name, dtype, shape
  quark_tensors.safetensors      a few modules' exported tensors, named
                                 "<scheme>/<tensor name>", bytes verbatim
  reference.safetensors          the same modules in qloom's layout-neutral
                                 form, decoded with Quark's own unpacking:
                                 "<scheme>/<module>.codes" U8 [out, in],
                                 ".scales" F32 (per_group [out, in/g]),
                                 ".zero_points" I32 (asymmetric only)
Usage: python generate.py [OUTPUT_DIR]   (default: this directory)
"""
import json, os, shutil, sys, tempfile

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM

from quark.torch import LLMTemplate, ModelQuantizer, export_safetensors
from quark.torch.utils.pack import create_pack_method

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, "..", "..", "..", "models", "stories260K-hf-bf16"))
OUT = sys.argv[1] if len(sys.argv) > 1 else HERE

# scheme, kv cache scheme, exclude patterns, modules kept
SCHEMES = [
    ("fp8", "fp8", None, ["model.layers.0.self_attn.k_proj", "model.layers.0.self_attn.v_proj"]),
    ("ptpc_fp8", None, None, ["model.layers.0.self_attn.k_proj"]),
    ("int8", None, None, ["model.layers.0.self_attn.k_proj"]),
    ("int4_wo_32", None, ["lm_head", "*down_proj"], ["model.layers.0.self_attn.k_proj", "model.layers.0.mlp.gate_proj"]),
    ("uint4_wo_32", None, ["lm_head", "*down_proj"], ["model.layers.0.self_attn.k_proj", "model.layers.0.mlp.gate_proj"]),
    ("int4_wo_per_channel", None, ["lm_head", "*down_proj"], ["model.layers.0.self_attn.k_proj"]),
    ("uint4_wo_per_channel", None, ["lm_head", "*down_proj"], ["model.layers.0.self_attn.k_proj", "model.layers.0.mlp.gate_proj"]),
    ("mxfp4", None, ["lm_head", "*down_proj"], ["model.layers.0.self_attn.k_proj"]),
]


def neutral(spec, w, scale, zp):
    """Quark's exported (weight, scale, zero_point) -> codes [out, in], scales, zero points."""
    dtype, qscheme = spec["dtype"], spec["qscheme"]
    if dtype in ("fp8_e4m3", "int8", "uint8"):
        codes = w.view(torch.uint8)
        if qscheme == "per_group":
            codes = codes.t().contiguous()
    elif dtype in ("int4", "uint4"):
        pm = create_pack_method(qscheme=qscheme, dtype=dtype)
        extra = {"origin_packed_axis_size": scale.shape[-1]} if scale.shape != torch.Size([]) else {}
        codes = pm.unpack(w, True, **extra).to(torch.int8).view(torch.uint8)
        if zp is not None:
            zp = pm.unpack(zp, True, **extra).to(torch.int32)
    elif dtype == "fp4":
        lo, hi = w & 0x0F, (w >> 4) & 0x0F
        codes = torch.stack([lo, hi], dim=-1).flatten(-2)
        # cross-check the nibble order against Quark's own fp4 unpacking
        ref = create_pack_method(qscheme=qscheme, dtype=dtype).unpack(w, True)
        table = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])
        assert torch.equal(table[codes.long()], ref.float()), "fp4 nibble order"
    else:
        raise ValueError(dtype)
    if spec.get("scale_format") == "e8m0":
        scales = torch.pow(2.0, scale.to(torch.int32).float() - 127)
    else:
        scales = scale.float()
        if qscheme == "per_group":
            scales = scales.t().contiguous()
    if zp is not None and qscheme == "per_group" and dtype in ("int8", "uint8"):
        zp = zp.t().contiguous()
    # int4/uint4 zero points: Pack_4_bits.unpack already transposed them back.
    out = {"codes": codes.contiguous(), "scales": scales.reshape(-1).contiguous()}
    if zp is not None and not spec["symmetric"]:
        out["zero_points"] = zp.to(torch.int32).reshape(-1).contiguous()
    return out


def main():
    quark_tensors, reference = {}, {}
    for scheme, kv, exclude, modules in SCHEMES:
        model = AutoModelForCausalLM.from_pretrained(SRC, torch_dtype=torch.bfloat16).eval()
        cfg = LLMTemplate.get("llama").get_config(scheme=scheme, kv_cache_scheme=kv, exclude_layers=exclude)
        torch.manual_seed(0)
        calib = [torch.randint(3, 500, (1, 32)) for _ in range(2)]
        quantizer = ModelQuantizer(cfg)
        model = quantizer.freeze(quantizer.quantize_model(model, calib))
        tmp = tempfile.mkdtemp()
        try:
            export_safetensors(model, tmp, custom_mode="quark", weight_format="real_quantized", pack_method="reorder")
            os.makedirs(os.path.join(OUT, scheme), exist_ok=True)
            shutil.copyfile(os.path.join(tmp, "config.json"), os.path.join(OUT, scheme, "config.json"))
            # Every exported tensor: name, safetensors dtype, shape.
            header_len = int.from_bytes(open(os.path.join(tmp, "model.safetensors"), "rb").read(8), "little")
            with open(os.path.join(tmp, "model.safetensors"), "rb") as fh:
                fh.seek(8)
                header = json.loads(fh.read(header_len))
            with open(os.path.join(OUT, scheme, "tensors.txt"), "w") as fh:
                for k in sorted(x for x in header if x != "__metadata__"):
                    fh.write(f"{k} {header[k]['dtype']} {header[k]['shape']}\n")
            spec = json.load(open(os.path.join(tmp, "config.json")))["quantization_config"]["global_quant_config"]["weight"]
            with safe_open(os.path.join(tmp, "model.safetensors"), "pt") as f:
                names = set(f.keys())
                for m in modules:
                    for k in sorted(n for n in names if n.startswith(m + ".")):
                        quark_tensors[f"{scheme}/{k}"] = f.get_tensor(k).contiguous()
                    zp = f.get_tensor(m + ".weight_zero_point") if m + ".weight_zero_point" in names else None
                    n = neutral(spec, f.get_tensor(m + ".weight"), f.get_tensor(m + ".weight_scale"), zp)
                    for k, v in n.items():
                        reference[f"{scheme}/{m}.{k}"] = v
        finally:
            shutil.rmtree(tmp)
    save_file(quark_tensors, os.path.join(OUT, "quark_tensors.safetensors"), metadata={"format": "pt"})
    save_file(reference, os.path.join(OUT, "reference.safetensors"), metadata={"format": "pt"})


if __name__ == "__main__":
    main()
