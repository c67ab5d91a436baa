#!/usr/bin/env python3
"""Opt-in heavy cross-check (make interop): checkpoints written by `qloom quantize`
loaded by AMD Quark itself.

For each scheme, qloom quantizes the demo model; then, with amd-quark + torch +
transformers from the given Python environment:
  1. quark's QConfig.from_dict parses the exported quantization_config;
  2. quark.torch.import_model_from_safetensors loads the weights into the bf16
     model (Quark's own unpacking of qloom's packed tensors);
  3. its logits on a fixed prompt agree with the bf16 source (cosine >= 0.99);
  4. with --engine-logits: Quark's model in float32 and qloom's engine on the
     same checkpoint (dequantized weights, simulated activation / KV
     quantization) give the same logits (max |diff| <= 2e-3 * max |logit|,
     same top-1 everywhere).

Prints one RESULT line per scheme and a closing "N passed, N failed" line.
Exit 0 when all pass; 1 on a failure; when amd-quark / torch / transformers are
not importable it prints SKIPPED (never PASSED) and exits 0.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# (scheme, extra qloom quantize flags)
SCHEMES = [("int4_wo_32", []), ("uint4_wo_per_channel", []), ("ptpc_fp8", []), ("mxfp4", []),
           ("fp8", ["--kv_cache_dtype", "fp8", "--num_calib_data", "16"]), ("int8", ["--num_calib_data", "16"])]
PROMPT_IDS = [1, 15, 100, 200, 300, 42, 7, 99]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qloom", required=True)
    ap.add_argument("--demo-model", required=True)
    ap.add_argument("--engine-logits", help="path of qloom's engine_logits tool (tests/interop)")
    args = ap.parse_args()
    try:
        import torch
        import transformers  # noqa: F401
        from transformers import AutoModelForCausalLM
        from quark.torch import import_model_from_safetensors
        from quark.torch.quantization.config.config import QConfig
        import quark
    except Exception as e:  # ImportError, or a broken install
        print(f"SKIPPED: heavy references not importable here ({type(e).__name__}: {e}); "
              "set QLOOM_HEAVY_PYTHON to a Python with amd-quark, torch and transformers")
        return 0

    version = getattr(quark, "__version__", "?")
    ids = torch.tensor([PROMPT_IDS])
    ref = AutoModelForCausalLM.from_pretrained(args.demo_model, torch_dtype=torch.bfloat16).eval()
    with torch.no_grad():
        ref_logits = ref(ids).logits.float()
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for scheme, extra in SCHEMES:
            out = os.path.join(tmp, scheme)
            r = subprocess.run([args.qloom, "quantize", "--model_dir", args.demo_model, "--output_dir", out,
                                "--quant_scheme", scheme, "--exclude_unsupported", "--progress", "off"] + extra,
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"RESULT {scheme} FAILED: qloom quantize exited {r.returncode}: {r.stderr.strip()}")
                failed += 1
                continue
            try:
                with open(os.path.join(out, "config.json")) as f:
                    QConfig.from_dict(json.load(f)["quantization_config"])
                base = AutoModelForCausalLM.from_pretrained(args.demo_model, torch_dtype=torch.bfloat16).eval()
                model = import_model_from_safetensors(base, out)
                with torch.no_grad():
                    logits = model(ids).logits.float()
                cos = torch.nn.functional.cosine_similarity(logits.flatten(), ref_logits.flatten(), dim=0).item()
                top1 = (logits.argmax(-1) == ref_logits.argmax(-1)).float().mean().item()
                ok = cos >= 0.99
                engine_note = ""
                if args.engine_logits:
                    base32 = AutoModelForCausalLM.from_pretrained(args.demo_model, torch_dtype=torch.float32).eval()
                    # import_model_from_safetensors casts the model to the
                    # checkpoint's dtype (bf16); back to f32 so both sides
                    # compute in f32 (the int32 / fp8 codes are not floats
                    # and stay as they are; bf16 scales widen exactly).
                    model32 = import_model_from_safetensors(base32, out).float()
                    with torch.no_grad():
                        quark32 = model32(ids).logits.float()[0]
                    e = subprocess.run([args.engine_logits, out] + [str(i) for i in PROMPT_IDS],
                                       capture_output=True, text=True)
                    if e.returncode != 0:
                        raise RuntimeError(f"engine_logits exited {e.returncode}: {e.stderr.strip()}")
                    ours = torch.tensor(json.loads(e.stdout))
                    diff = (ours - quark32).abs().max().item()
                    scale = quark32.abs().max().item()
                    same_top1 = bool((ours.argmax(-1) == quark32.argmax(-1)).all())
                    engine_ok = diff <= 2e-3 * scale and same_top1
                    ok = ok and engine_ok
                    engine_note = (f"; qloom engine vs amd-quark fp32: max |diff| {diff:.2e} "
                                   f"(max |logit| {scale:.2f}), same top-1 {same_top1}")
                print(f"RESULT {scheme} {'ok' if ok else 'FAILED'}: amd-quark {version} loaded it as "
                      f"{type(model.model.layers[0].self_attn.k_proj).__name__}; logits cosine {cos:.4f} "
                      f"vs bf16, top-1 agreement {top1:.3f}{engine_note}")
                passed += ok
                failed += not ok
            except Exception as e:
                print(f"RESULT {scheme} FAILED: {type(e).__name__}: {e}")
                failed += 1
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
