#!/usr/bin/env python3
"""qloom's GGUF export read back by the `gguf` package (gguf-py, what
llama.cpp's tools and transformers read GGUF with).

For int4_wo_32 (Q4_0), uint4_wo_32 (Q4_1) and int8 (Q8_0) on the demo model:
`qloom quantize` writes a Quark checkpoint, gguf_export_tool export turns it
into a .gguf, and gguf_export_tool expected writes qloom's own values of every
tensor (the Quark weights as qloom dequantizes them, in llama.cpp's Q/K row
order, fp16-rounded for F16 tensors). gguf.GGUFReader must read the file
(every tensor with the type and shape the header states) and
gguf.quants.dequantize must equal those values bit for bit, except in the
blocks the export summary counts as inexact (a scale or Q4_1's m = -scale*zp
that fp16 cannot hold: the nearest fp16 is written), whose values stay within
2^-10 of the tensor's range.

Exit 0 = all equal, 1 = a mismatch (printed), 77 = gguf not installed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import gguf
    from gguf.quants import dequantize
except ImportError as e:  # pragma: no cover
    print(f"SKIPPED: python gguf not available ({e}); run scripts/setup")
    sys.exit(77)

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)}: {r.stderr.strip()}")
    return r.stdout


def check_scheme(args, tmp, scheme, want_type):
    quark = os.path.join(tmp, scheme)
    run([args.qloom, "quantize", "--model_dir", args.demo_model, "--output_dir", quark,
         "--quant_scheme", scheme, "--exclude_unsupported"])
    out = os.path.join(tmp, scheme + ".gguf")
    summary = json.loads(run([args.tool, "export", quark, out]))
    exp_dir = os.path.join(tmp, scheme + "-expected")
    run([args.tool, "expected", quark, out, exp_dir])
    with open(os.path.join(exp_dir, "expected.json"), encoding="utf-8") as f:
        expected = json.load(f)
    r = gguf.GGUFReader(out)
    check(r.fields["general.architecture"].contents() == "llama", f"{scheme}: architecture")
    check(len(r.fields["tokenizer.ggml.tokens"].contents()) == 512, f"{scheme}: token count")
    check(len(r.tensors) == len(expected), f"{scheme}: {len(r.tensors)} tensors vs {len(expected)}")
    counts = {}
    inexact = summary["inexact_scale_blocks"] + summary["inexact_min_blocks"]
    for rt, e in zip(r.tensors, expected):
        check(rt.name == e["name"], f"{scheme}: tensor {rt.name} vs {e['name']}")
        check(rt.tensor_type.name == e["type"], f"{rt.name}: type {rt.tensor_type.name} vs {e['type']}")
        got = np.ascontiguousarray(dequantize(rt.data, rt.tensor_type), dtype=np.float32).reshape(-1)
        want = np.fromfile(os.path.join(exp_dir, e["f32"]), dtype="<f4")
        if got.size != want.size:
            failures.append(f"{rt.name}: {got.size} values vs {want.size}")
            continue
        mism = int(np.count_nonzero(got.view(np.uint32) != want.view(np.uint32)))
        counts.setdefault(e["type"], [0, 0])
        counts[e["type"]][0] += 1
        counts[e["type"]][1] += mism
        if e["type"] in ("Q8_0", "Q4_1") and inexact:
            # The counted blocks hold the nearest fp16 d / m: within 2^-10 of the tensor's range.
            bound = float(np.max(np.abs(want))) * 2.0 ** -10
            check(bool((np.abs(got.astype(np.float64) - want) <= bound).all()),
                  f"{rt.name}: {e['type']} beyond fp16 scale rounding")
        else:
            check(mism == 0, f"{rt.name} ({e['type']}): {mism} of {got.size} values differ in bits")
    check(want_type in counts, f"{scheme}: no {want_type} tensor")
    differing = sum(m for _, m in counts.values())
    check(differing <= 32 * inexact, f"{scheme}: {differing} values differ, more than the {inexact} inexact blocks hold")
    line = ", ".join(f"{t} {n} tensors ({m} values differ)" for t, (n, m) in sorted(counts.items()))
    print(f"{scheme}: {line}; inexact fp16 scale/min blocks {inexact} of {summary['carried_blocks']}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--qloom", required=True)
    ap.add_argument("--demo-model", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for scheme, t in (("int4_wo_32", "Q4_0"), ("uint4_wo_32", "Q4_1"), ("int8", "Q8_0")):
            check_scheme(args, tmp, scheme, t)
    if failures:
        for f in failures[:40]:
            print("FAIL:", f)
        print(f"{len(failures)} failures")
        return 1
    print("gguf export interop: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
