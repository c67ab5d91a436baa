#!/usr/bin/env python3
"""Goldens for qloom's compressed-tensors export (tests/export/compressed_tensors_golden_test.cpp).

For each scheme below, on the bundled demo model:
  1. `qloom quantize` writes the Quark checkpoint (the flags are recorded, and
     are the ones the C++ test's quantize_demo uses);
  2. ct_tool convert (exporter::export_compressed_tensors) writes the
     compressed-tensors directory; the sha256 of every file it wrote is
     recorded;
  3. transformers + compressed-tensors load that directory in float32 with
     dequantize (run_compressed=False): compressed-tensors' ModelCompressor
     decompresses every quantized linear; the sha256 of each decompressed
     weight (float32 little-endian bytes, row-major) is recorded.

The C++ test re-exports each scheme, checks the file hashes and checks that
qloom's own dequantization of the Quark checkpoint (CheckpointRuntime)
hashes to the recorded decompressed-tensor hashes: without torch, `make test`
still proves that compressed-tensors decompresses qloom's files to exactly
qloom's weights.

Run with a Python that has compressed-tensors, torch and transformers (e.g.
/tmp/llmc/bin/python), from the repository root:
    python scripts/goldens/compressed_tensors.py --qloom build/qloom --ct-tool build/tests/interop/ct_tool
Writes tests/data/compressed_tensors/golden.json. Deterministic.
"""
import argparse
import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile

# This file's name shadows the compressed_tensors package: drop its folder
# from the import path.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(ROOT, "models", "stories260K-hf-bf16")
OUT = os.path.join(ROOT, "tests", "data", "compressed_tensors", "golden.json")
# What tests/export/compressed_tensors_test_util.h quantize_demo does.
BASE_FLAGS = ["--exclude_layers", "*down_proj", "--exclude_unsupported", "--num_calib_data", "4",
              "--seq_len", "32", "--progress", "off"]
SCHEMES = {
    "int4_wo_32": ("int4_wo_32", []),
    "uint4_wo_32": ("uint4_wo_32", []),
    "int4_wo_per_channel": ("int4_wo_per_channel", []),
    "uint4_wo_per_channel": ("uint4_wo_per_channel", []),
    "ptpc_fp8": ("ptpc_fp8", []),
    "fp8_kv_fp8": ("fp8", ["--kv_cache_dtype", "fp8"]),
    "int8": ("int8", []),
    "int4_wo_32_o_proj_ptpc_fp8": ("int4_wo_32", ["--layer_quant_scheme", "*o_proj", "ptpc_fp8"]),
}


def sha256_file(p):
    with open(p, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qloom", required=True)
    ap.add_argument("--ct-tool", required=True)
    args = ap.parse_args()
    import numpy as np
    import torch
    import compressed_tensors
    from transformers import AutoModelForCausalLM
    from transformers.utils.quantization_config import CompressedTensorsConfig

    golden = {"compressed_tensors_version": importlib.metadata.version("compressed-tensors"), "torch_version": torch.__version__,
              "base_flags": BASE_FLAGS, "schemes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for label, (scheme, extra) in SCHEMES.items():
            quark, ct = os.path.join(tmp, label + "-quark"), os.path.join(tmp, label + "-ct")
            run([args.qloom, "quantize", "--model_dir", DEMO, "--output_dir", quark, "--quant_scheme", scheme]
                + BASE_FLAGS + extra)
            run([args.ct_tool, "convert", quark, ct])
            files = {f: sha256_file(os.path.join(ct, f)) for f in sorted(os.listdir(ct))}
            model = AutoModelForCausalLM.from_pretrained(
                ct, dtype=torch.float32, quantization_config=CompressedTensorsConfig(run_compressed=False))
            qc = json.load(open(os.path.join(ct, "config.json")))["quantization_config"]
            ignore = set(qc["ignore"])
            targets = {t for g in qc["config_groups"].values() for t in g["targets"]}
            decompressed = {}
            for name, mod in model.named_modules():
                if not isinstance(mod, torch.nn.Linear) or name in ignore:
                    continue
                if "Linear" not in targets and name not in targets:
                    continue
                w = mod.weight.detach().to(torch.float32).contiguous().numpy()
                decompressed[name + ".weight"] = hashlib.sha256(w.astype("<f4").tobytes()).hexdigest()
            golden["schemes"][label] = {"quant_scheme": scheme, "extra_flags": extra, "files": files,
                                        "decompressed": dict(sorted(decompressed.items()))}
            print(f"{label}: {len(files)} files, {len(decompressed)} decompressed linears")
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(golden, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
