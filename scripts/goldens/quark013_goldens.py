#!/usr/bin/env python3
"""Golden set of AMD Quark 0.13's hf_format export on SmolLM2-135M (tests/data/quark013).

Runs amd-quark 0.13 itself (CPU) the way quantize_quark.py / quark-cli torch-llm-ptq do:

    model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=DATA_TYPE, attn_implementation="eager")
    config = LLMTemplate.get(model_type).get_config(scheme, algorithm, kv_cache_scheme,
                                                     attention_scheme=..., exclude_layers=...)
    model = ModelQuantizer(config).quantize_model(model, calibration samples); freeze
    export_safetensors(model, out, custom_mode="quark", weight_format="real_quantized",
                       pack_method="reorder")

DATA_TYPE is quantize_quark.py's --data_type: "float32", or "auto" (Quark's default: the
checkpoint's dtype, bf16 for SmolLM2). Calibration samples are qloom's (quant/calib_data.h):
the first NUM_CALIB (8; one for schemes without static activation scales) non-blank lines of data/datasets/calibration/c4.utf8, each tokenized
alone (special tokens added, truncated to SEQ_LEN), one sample per batch, so qloom
`--dataset c4 --num_calib_data NUM_CALIB --seq_len SEQ_LEN` sees the same tokens.

For each entry of SCHEMES it writes tests/data/quark013/<id>.json:
  settings             the run's settings (and the qloom quantize arguments that match them)
  quantization_config  config.json's quantization_config, verbatim
  tensor_count, tensor_list_sha256   every exported tensor, as sorted "name dtype shape" lines
  tensors              for the modules of TRACKED (layer 0 q/k/v/down_proj, the last layer's
                       q/down_proj, both layers' self_attn): name -> dtype, shape, sha256 of
                       the raw little-endian bytes
  scalars              every one-element tensor (static scales): name -> [dtype, hex bits]
The scheme list is data: a new Quark scheme joins by adding a line (and an id).

Usage: /work/venv-quark/bin/python scripts/goldens/quark013_goldens.py [MODEL_DIR] [ID ...]
  (default model /work/smol/smollm2-bf16; default: every id)
"""
import hashlib
import json
import os
import pathlib
import sys
import tempfile
import time

import torch
import transformers
from safetensors import safe_open
from transformers import AutoModelForCausalLM, AutoTokenizer

import quark
from quark.torch import LLMTemplate, ModelQuantizer, export_safetensors

ROOT = pathlib.Path(__file__).resolve().parents[2]
CALIB = ROOT / "data" / "datasets" / "calibration" / "c4.utf8"
OUT = pathlib.Path(os.environ.get("QUARK013_OUT", ROOT / "tests" / "data" / "quark013"))
NUM_CALIB = 8
SEQ_LEN = 128

# id, quant_scheme, data_type, extra: algorithm, kv_cache_scheme, attention_scheme,
# exclude_layers (None: the template's default, ["lm_head"] for llama).
SCHEMES = [
    # Static activation scales: Quark's default dtype (bf16) and float32 (qloom's default arithmetic).
    ("fp8_kv_attn_bf16", "fp8", "auto", {"kv_cache_scheme": "fp8", "attention_scheme": "fp8"}),
    ("int4_wo_64_gptq_bf16", "int4_wo_64", "auto", {"algorithm": ["gptq"]}),
    ("fp8_bf16", "fp8", "auto", {}),
    ("int8_bf16", "int8", "auto", {}),
    # Dynamic or no activation scales: the weights do not depend on calibration (one sample).
    ("int4_wo_64_bf16", "int4_wo_64", "auto", {"num_calib_data": 1}),
    ("uint4_wo_32_bf16", "uint4_wo_32", "auto", {"num_calib_data": 1}),
    ("int4_wo_per_channel_bf16", "int4_wo_per_channel", "auto", {"num_calib_data": 1}),
    ("ptpc_fp8_bf16", "ptpc_fp8", "auto", {"num_calib_data": 1}),
    ("mxfp4_bf16", "mxfp4", "auto", {"num_calib_data": 1}),
    ("mxfp4_weight_only_bf16", "mxfp4_weight_only", "auto", {"num_calib_data": 1}),
    ("fp8_kv_attn_f32", "fp8", "float32", {"kv_cache_scheme": "fp8", "attention_scheme": "fp8"}),
    ("int8_f32", "int8", "float32", {}),
    # The schemes Quark 0.13 added (issue 17). Dynamic or no activation scales: one sample.
    ("mxfp6_e2m3_bf16", "mxfp6_e2m3", "auto", {"num_calib_data": 1}),
    ("mxfp6_e3m2_bf16", "mxfp6_e3m2", "auto", {"num_calib_data": 1}),
    ("mxfp4_mxfp6_e2m3_bf16", "mxfp4_mxfp6_e2m3", "auto", {"num_calib_data": 1}),
    ("int4_fp8_bf16", "int4_fp8", "auto", {"num_calib_data": 1}),
    ("int4_wa_64_bf16", "int4_wa_64", "auto", {"num_calib_data": 1}),
    ("amdfp4_bf16", "amdfp4", "auto", {"num_calib_data": 1}),
    ("amdfp4_g32_bf16", "amdfp4_g32", "auto", {"num_calib_data": 1}),
    # Static input scales (mxfp4_fp8: fp8 per tensor; nvfp4: the input's global scale).
    ("mxfp4_fp8_bf16", "mxfp4_fp8", "auto", {}),
    ("nvfp4_bf16", "nvfp4", "auto", {}),
    # Not here: fp8 KV with QConfig.kv_cache_post_rope (extra {"kv_cache_post_rope": True}):
    # Quark 0.13's QuarkQuantizedCache.update() does not take the `kwargs` argument that
    # transformers 5.24's attention passes to Cache.update, so calibration fails (TypeError).
    # Not here: amdfp4_global16 / amdfp4_global32, whose Quark 0.13 export casts each group's
    # e5m3 scale with a plain integer cast to uint8 (it wraps modulo 256; the checkpoint decodes
    # to noise). qloom writes the proper e5m3 codes: tests/quant/fp4_block_test.cpp pins the
    # difference instead.
]

# Modules whose every tensor is hashed (plus each tracked layer's self_attn.prob_output_scale).
TRACKED_L0 = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.down_proj"]
TRACKED_LAST = ["self_attn.q_proj", "mlp.down_proj"]


def calibration(tokenizer, n):
    samples = []
    for line in CALIB.read_text(encoding="utf-8").split("\n"):
        if len(samples) == n:
            break
        if not line.strip():
            continue
        ids = tokenizer(line, truncation=True, max_length=SEQ_LEN, return_tensors="pt")["input_ids"]
        if ids.shape[1] > 0:
            samples.append(ids)
    return samples


def tracked(name, last):
    modules = [f"model.layers.0.{m}." for m in TRACKED_L0] + [f"model.layers.{last}.{m}." for m in TRACKED_LAST]
    attention = {f"model.layers.{n}.self_attn.prob_output_scale" for n in (0, last)}
    return name in attention or any(name.startswith(m) for m in modules)


def tensor_bytes(t):
    t = t.contiguous()
    return t.view(torch.uint8).numpy().tobytes() if t.dim() else t.reshape(1).view(torch.uint8).numpy().tobytes()


ST_DTYPE = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.int32: "I32",
            torch.int8: "I8", torch.uint8: "U8", torch.float8_e4m3fn: "F8_E4M3", torch.int64: "I64"}


def run_one(model_dir, sid, scheme, data_type, extra, tokenizer):
    n_calib = extra.pop("num_calib_data", NUM_CALIB)
    samples = calibration(tokenizer, n_calib)
    dtype = {"float32": torch.float32, "auto": "auto"}[data_type]
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="eager")
    model.eval()
    template = LLMTemplate.get(model.config.model_type)
    config = template.get_config(scheme=scheme, algorithm=extra.get("algorithm"),
                                 kv_cache_scheme=extra.get("kv_cache_scheme"),
                                 attention_scheme=extra.get("attention_scheme"),
                                 exclude_layers=extra.get("exclude_layers"))
    if extra.get("kv_cache_post_rope"):
        config.kv_cache_post_rope = True  # QConfig field; get_config has no argument for it
    t0 = time.time()
    quantizer = ModelQuantizer(config)
    with torch.no_grad():
        model = quantizer.quantize_model(model, samples)
        model = quantizer.freeze(model)
    seconds = time.time() - t0
    with tempfile.TemporaryDirectory() as out:
        with torch.no_grad():
            export_safetensors(model=model, output_dir=out, custom_mode="quark",
                               weight_format="real_quantized", pack_method="reorder")
        cfg = json.load(open(os.path.join(out, "config.json")))
        last = cfg["num_hidden_layers"] - 1
        listing, tensors, scalars = [], {}, {}
        for f in sorted(pathlib.Path(out).glob("*.safetensors")):
            with safe_open(str(f), "pt") as st:
                for name in st.keys():
                    t = st.get_tensor(name)
                    dt = ST_DTYPE[t.dtype]
                    shape = list(t.shape)
                    listing.append(f"{name} {dt} {shape}")
                    raw = tensor_bytes(t)
                    if tracked(name, last):
                        tensors[name] = {"dtype": dt, "shape": shape, "sha256": hashlib.sha256(raw).hexdigest()}
                    if t.numel() == 1:
                        scalars[name] = [dt, raw[::-1].hex()]
    listing.sort()
    args = ["--quant_scheme", scheme, "--dataset", "c4", "--num_calib_data", str(n_calib),
            "--seq_len", str(SEQ_LEN), "--data_type", "bfloat16" if data_type == "auto" else data_type]
    if extra.get("algorithm"):
        args += ["--quant_algo", ",".join(extra["algorithm"])]
    if extra.get("kv_cache_scheme"):
        args += ["--kv_cache_dtype", extra["kv_cache_scheme"]]
    if extra.get("attention_scheme"):
        args += ["--attention_dtype", extra["attention_scheme"]]
    if extra.get("kv_cache_post_rope"):
        args += ["--kv_cache_post_rope"]
    if extra.get("exclude_layers") is not None:
        args += ["--exclude_layers"] + extra["exclude_layers"]
    return {
        "id": sid,
        "settings": {"quant_scheme": scheme, "data_type": data_type, **extra,
                     "num_calib_data": n_calib, "seq_len": SEQ_LEN, "quark_seconds": round(seconds, 1),
                     "qloom_args": args},
        "quantization_config": cfg["quantization_config"],
        "tensor_count": len(listing),
        "tensor_list_sha256": hashlib.sha256("\n".join(listing).encode()).hexdigest(),
        "tensors": tensors,
        "scalars": scalars,
    }


def main():
    model_dir = sys.argv[1] if len(sys.argv) > 1 else "/work/smol/smollm2-bf16"
    only = set(sys.argv[2:])
    OUT.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    for sid, scheme, data_type, extra in SCHEMES:
        if only and sid not in only:
            continue
        g = run_one(model_dir, sid, scheme, data_type, dict(extra), tokenizer)
        g["generator"] = {"amd-quark": quark.__version__, "torch": torch.__version__,
                          "transformers": transformers.__version__, "model": os.path.basename(model_dir.rstrip("/"))}
        (OUT / f"{sid}.json").write_text(json.dumps(g, indent=1, sort_keys=True) + "\n")
        print(f"{sid}: {g['tensor_count']} tensors, {g['settings']['quark_seconds']} s", flush=True)


if __name__ == "__main__":
    main()
