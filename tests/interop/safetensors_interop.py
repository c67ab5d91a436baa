#!/usr/bin/env python3
"""Cross-check qloom's safetensors reader and writer against the reference
Python `safetensors` package (the Rust implementation HuggingFace ships).

1. Python writes a file with every dtype it supports; qloom reads it back
   (st_tool dump) and must see the same names, dtypes, shapes, bytes, metadata.
2. qloom writes the same tensors (one file, then sharded with an index);
   Python's deserializer must read every shard back identically, and the
   index must map every tensor to the shard that holds it.
3. The bundled demo model, read by both, gives identical tensors.

Exit code 0 = all checks passed, 1 = a mismatch (printed), 77 = the reference
package is not installed (ctest reports the test as skipped).
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

try:
    from safetensors import _safetensors_rust as st
    import safetensors
except ImportError as e:  # pragma: no cover
    print(f"SKIPPED: python safetensors not available ({e}); run scripts/setup")
    sys.exit(77)

# (python-binding dtype name, safetensors header name, bits per element)
DTYPES = [
    ("float64", "F64", 64), ("float32", "F32", 32), ("float16", "F16", 16),
    ("bfloat16", "BF16", 16), ("float8_e4m3fn", "F8_E4M3", 8),
    ("float8_e5m2", "F8_E5M2", 8), ("float8_e8m0fnu", "F8_E8M0", 8),
    ("int8", "I8", 8), ("uint8", "U8", 8), ("int16", "I16", 16), ("uint16", "U16", 16),
    ("int32", "I32", 32), ("uint32", "U32", 32), ("int64", "I64", 64), ("uint64", "U64", 64),
    ("bool", "BOOL", 8),
]
SHAPES = [[3, 5], [7], [], [2, 0, 4], [1, 1, 3]]

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)


def make_tensors(rng):
    tensors = {}
    for i, (pyname, hname, bits) in enumerate(DTYPES):
        for j, shape in enumerate(SHAPES):
            n = 1
            for d in shape:
                n *= d
            nbytes = n * bits // 8
            if hname == "BOOL":
                data = bytes(rng.randrange(2) for _ in range(nbytes))
            else:
                data = bytes(rng.randrange(256) for _ in range(nbytes))
            tensors[f"layer.{i}.{hname.lower()}.t{j}"] = (pyname, hname, shape, data)
    # FP4 packed two per byte: the binding's shape counts bytes (element pairs),
    # the header counts 4-bit elements (last dimension doubled).
    tensors["fp4.packed"] = ("float4_e2m1fn_x2", "F4", [4, 6], bytes(rng.randrange(256) for _ in range(24)))
    return tensors


def run_tool(tool, *args):
    r = subprocess.run([tool, *args], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"st_tool {' '.join(args)} failed ({r.returncode}): {r.stderr}")
        sys.exit(1)
    return r.stdout


def header_shape(pyname, shape):
    if pyname == "float4_e2m1fn_x2":
        return shape[:-1] + [shape[-1] * 2]
    return shape


def python_reads(path):
    with open(path, "rb") as f:
        return {name: t for name, t in st.deserialize(f.read())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--demo-model", required=True)
    args = ap.parse_args()
    rng = random.Random(20261129)
    tensors = make_tensors(rng)
    metadata = {"format": "pt", "producer": "safetensors-python"}

    with tempfile.TemporaryDirectory() as tmp:
        # 1. Python writes, qloom reads.
        py_file = os.path.join(tmp, "python.safetensors")
        raw = {k: {"dtype": p, "shape": s, "data": d} for k, (p, h, s, d) in tensors.items()}
        st.serialize_file(raw, py_file, metadata)
        seen = json.loads(run_tool(args.tool, "dump", py_file))
        check(seen["metadata"] == metadata, f"metadata differs: {seen['metadata']}")
        got = {t["name"]: t for t in seen["tensors"]}
        check(set(got) == set(tensors), "tensor names differ (python -> qloom)")
        for k, (p, h, s, d) in tensors.items():
            t = got.get(k)
            if t is None:
                continue
            check(t["dtype"] == h, f"{k}: dtype {t['dtype']} != {h}")
            check(t["shape"] == header_shape(p, s), f"{k}: shape {t['shape']} != {header_shape(p, s)}")
            check(bytes.fromhex(t["hex"]) == d, f"{k}: bytes differ (python -> qloom)")

        # 2. qloom writes (single file, then sharded), Python reads.
        spec = {"metadata": {"format": "pt", "producer": "qloom"},
                "tensors": [{"name": k, "dtype": h, "shape": header_shape(p, s), "hex": d.hex()}
                            for k, (p, h, s, d) in tensors.items()]}
        for label, shard_bytes in (("single", None), ("sharded", 100)):
            if shard_bytes:
                spec["max_shard_bytes"] = shard_bytes
            spec_path = os.path.join(tmp, f"spec-{label}.json")
            with open(spec_path, "w") as f:
                json.dump(spec, f)
            out = os.path.join(tmp, f"qloom-{label}")
            run_tool(args.tool, "write", out, spec_path)
            files = sorted(os.listdir(out))
            if shard_bytes is None:
                check(files == ["model.safetensors"], f"single: files {files}")
                back = python_reads(os.path.join(out, "model.safetensors"))
                owner = {k: "model.safetensors" for k in back}
            else:
                with open(os.path.join(out, "model.safetensors.index.json")) as f:
                    index = json.load(f)
                shards = [x for x in files if x.endswith(".safetensors")]
                check(len(shards) > 1, f"sharded: only {shards}")
                n = len(shards)
                check(shards == [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)],
                      f"sharded: names {shards}")
                back, owner = {}, {}
                for sh in shards:
                    part = python_reads(os.path.join(out, sh))
                    back.update(part)
                    owner.update({k: sh for k in part})
                check(index["weight_map"] == owner, "index weight_map does not match shard contents")
                total = sum(len(t["data"]) for t in back.values())
                check(index["metadata"]["total_size"] == total,
                      f"index total_size {index['metadata']['total_size']} != {total}")
            check(set(back) == set(tensors), f"{label}: tensor names differ (qloom -> python)")
            for k, (p, h, s, d) in tensors.items():
                t = back.get(k)
                if t is None:
                    continue
                check(t["dtype"] == h, f"{label} {k}: dtype {t['dtype']} != {h}")
                check(list(t["shape"]) == header_shape(p, s), f"{label} {k}: shape {t['shape']}")
                check(bytes(t["data"]) == d, f"{label} {k}: bytes differ (qloom -> python)")
            # The standard high-level reader must accept the file too.
            from safetensors.numpy import load_file  # noqa: F401 (import checks numpy path)
            with safetensors.safe_open(os.path.join(out, owner[next(iter(owner))]), "np") as f:
                check(f.metadata() == spec["metadata"], f"{label}: metadata {f.metadata()}")

        # 3. The demo model as both see it.
        demo = os.path.join(args.demo_model, "model.safetensors")
        py = python_reads(demo)
        ql = {t["name"]: t for t in json.loads(run_tool(args.tool, "dump", demo))["tensors"]}
        check(set(py) == set(ql), "demo model: tensor names differ")
        for k, t in py.items():
            if k in ql:
                check(ql[k]["dtype"] == t["dtype"] and ql[k]["shape"] == list(t["shape"])
                      and bytes.fromhex(ql[k]["hex"]) == bytes(t["data"]), f"demo model: {k} differs")

    if failures:
        print(f"{len(failures)} mismatches:")
        for m in failures[:50]:
            print("  " + m)
        return 1
    print(f"safetensors {safetensors.__version__}: {len(tensors)} tensors x 3 layouts + demo model "
          f"({len(py)} tensors) identical both ways")
    return 0


if __name__ == "__main__":
    sys.exit(main())
