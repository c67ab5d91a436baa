#!/usr/bin/env python3
"""Cross-check qloom's GGUF reader and dequantizer against the `gguf` package
(gguf-py, the reader/writer llama.cpp and transformers use).

Default (the ctest): gguf's GGUFWriter writes two files — metadata of every
value type (nested arrays included), tensors quantized with
gguf.quants.quantize (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, and
MXFP4, which qloom parses but does not decode) and random K-quant blocks
(Q2_K..Q6_K; gguf cannot quantize those) — one with the default alignment,
one with general.alignment = 64. qloom (gguf_tool dump) must see the same
metadata and tensor infos as GGUFReader and dequantize every tensor bit for
bit as gguf.quants.dequantize does.

--gguf FILE: the same comparison on an existing file (e.g. the SmolLM2 Q4_1
GGUF); prints each tensor type's count, max |qloom - gguf| and bit mismatches.

Exit 0 = all equal, 1 = a mismatch (printed), 77 = gguf not installed.
"""
import argparse
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType as Q, GGUFValueType as V
    from gguf.quants import dequantize, quantize
except ImportError as e:  # pragma: no cover
    print(f"SKIPPED: python gguf not available ({e}); run scripts/setup")
    sys.exit(77)

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)


# key -> (value type, value, array sub type or None), written and expected
KVS = [
    ("t.u8", V.UINT8, 250, None), ("t.i8", V.INT8, -128, None),
    ("t.u16", V.UINT16, 65535, None), ("t.i16", V.INT16, -32768, None),
    ("t.u32", V.UINT32, 4000000000, None), ("t.i32", V.INT32, -2, None),
    ("t.f32", V.FLOAT32, 0.1, None), ("t.u64", V.UINT64, 2**64 - 1, None),
    ("t.i64", V.INT64, -2**63, None), ("t.f64", V.FLOAT64, -1e300, None),
    ("t.bool", V.BOOL, True, None), ("t.string", V.STRING, "caf\u00e9 \"x\"\n", None),
    ("t.strings", V.ARRAY, ["a", "", "\u00fc\u00df"], None),
    ("t.i32s", V.ARRAY, [1, -1, 7], None), ("t.f32s", V.ARRAY, [1.5, -2.0], None),
    ("t.u64s", V.ARRAY, [0, 2**64 - 1], V.UINT64), ("t.bools", V.ARRAY, [True, False], None),
    ("t.nested", V.ARRAY, [[1, 2], [3]], None),
]


def f32_round(x):
    return float(np.float32(x))


def expected_json(vtype, value, sub):
    """What gguf_tool prints for a value written as (vtype, value, sub)."""
    if vtype == V.FLOAT32:
        return f32_round(value)
    if vtype != V.ARRAY:
        return value
    et = sub if sub is not None else V.get_type(value[0])
    items = [expected_json(et, x, None) for x in value]
    return {"elem": et.name.lower(), "items": items}


def random_k_blocks(qtype, n_blocks, rng, fp16_offsets):
    _, nbytes = gguf.GGML_QUANT_SIZES[qtype]
    b = rng.integers(0, 256, size=(n_blocks, nbytes), dtype=np.uint8)
    for off in fp16_offsets:
        h = b[:, off].astype(np.uint16) | (b[:, off + 1].astype(np.uint16) << 8)
        h = np.where(h & 0x7C00 == 0x7C00, h & ~np.uint16(0x4000), h).astype(np.uint16)
        b[:, off] = h & 0xFF
        b[:, off + 1] = h >> 8
    return b


K_FP16 = {Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208]}


def write_file(path, alignment, rng):
    w = gguf.GGUFWriter(path, "llama")
    if alignment:
        w.add_custom_alignment(alignment)
    for key, vt, val, sub in KVS:
        w.add_key_value(key, val, vt, sub_type=sub)
    x = rng.standard_normal((3, 64)).astype(np.float32) * 3
    w.add_tensor("f32", x)
    w.add_tensor("f16", x.astype(np.float16))
    for qt in (Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.MXFP4):
        w.add_tensor(qt.name.lower(), quantize(x, qt), raw_dtype=qt)
    for qt, offs in K_FP16.items():
        w.add_tensor(qt.name.lower(), random_k_blocks(qt, 3, rng, offs), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def dump(tool, path, out):
    r = subprocess.run([tool, "dump", path, out], capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f"gguf_tool dump {path} failed: {r.stderr.strip()}")
        return None
    with open(os.path.join(out, "header.json"), encoding="utf-8") as f:
        return json.load(f)


def compare_header(path, h):
    r = gguf.GGUFReader(path)
    check(h["alignment"] == r.alignment, f"{path}: alignment {h['alignment']} vs {r.alignment}")
    check(h["data_offset"] == r.data_offset, f"{path}: data_offset {h['data_offset']} vs {r.data_offset}")
    fields = [(k, f) for k, f in r.fields.items() if not k.startswith("GGUF.")]
    check(len(fields) == len(h["kv"]), f"{path}: {len(h['kv'])} KVs vs {len(fields)}")
    for (key, field), kv in zip(fields, h["kv"]):
        check(kv["key"] == key, f"{path}: key {kv['key']!r} vs {key!r}")
        check(kv["type"] == field.types[0].name.lower(), f"{key}: type {kv['type']} vs {field.types[0].name}")
        if field.types[0] == V.ARRAY and field.types[-1] != V.ARRAY and len(field.types) == 2:
            mine = [x for x in kv["value"]["items"]]
            check(mine == list(field.contents()), f"{key}: array values differ")
        elif field.types[0] != V.ARRAY:
            check(kv["value"] == field.contents(), f"{key}: {kv['value']!r} vs {field.contents()!r}")
    check(len(h["tensors"]) == len(r.tensors), f"{path}: tensor count")
    return r


def compare_tensors(path, h, r, out, stats):
    for t, rt in zip(h["tensors"], r.tensors):
        name = rt.name
        check(t["name"] == name, f"{path}: tensor {t['name']} vs {name}")
        check(t["type"] == rt.tensor_type.name, f"{name}: type {t['type']} vs {rt.tensor_type.name}")
        check(t["ne"] == [int(d) for d in rt.shape], f"{name}: ne {t['ne']} vs {list(rt.shape)}")
        check(h["data_offset"] + t["offset"] == rt.data_offset, f"{name}: offset")
        check(t["nbytes"] == rt.n_bytes, f"{name}: nbytes {t['nbytes']} vs {rt.n_bytes}")
        s = stats.setdefault(rt.tensor_type.name, {"tensors": 0, "elements": 0, "max_abs_diff": 0.0,
                                                   "bit_mismatches": 0, "decoded": 0})
        s["tensors"] += 1
        s["elements"] += int(rt.n_elements)
        try:
            with np.errstate(invalid="ignore", over="ignore"):
                want = np.ascontiguousarray(dequantize(rt.data, rt.tensor_type), dtype=np.float32).reshape(-1)
        except NotImplementedError:
            check("f32" not in t, f"{name}: qloom decodes {t['type']}, gguf does not")
            continue
        if "f32" not in t:
            check(rt.tensor_type in (Q.MXFP4,), f"{name}: qloom does not decode {t['type']}")
            continue
        fp = os.path.join(out, t["f32"])
        got = np.fromfile(fp, dtype="<f4")
        os.remove(fp)
        if got.size != want.size:
            failures.append(f"{name}: {got.size} values vs {want.size}")
            continue
        s["decoded"] += 1
        mism = int(np.count_nonzero(got.view(np.uint32) != want.view(np.uint32)))
        s["bit_mismatches"] += mism
        fin = np.isfinite(got) & np.isfinite(want)
        if fin.any():
            s["max_abs_diff"] = max(s["max_abs_diff"], float(np.max(np.abs(got[fin].astype(np.float64) - want[fin]))))
        check(mism == 0, f"{name} ({t['type']}): {mism} of {got.size} values differ in bits")


def check_file(tool, path, tmp, stats):
    out = tempfile.mkdtemp(dir=tmp)
    h = dump(tool, path, out)
    if h is None:
        return None
    r = compare_header(path, h)
    compare_tensors(path, h, r, out, stats)
    return h


def written_files(tool, tmp):
    rng = np.random.default_rng(7)
    stats = {}
    for alignment in (None, 64):
        path = os.path.join(tmp, f"w{alignment}.gguf")
        write_file(path, alignment, rng)
        h = check_file(tool, path, tmp, stats)
        if h is None:
            continue
        kv = {k["key"]: k for k in h["kv"]}
        for key, vt, val, sub in KVS:  # every value as written, nested arrays included
            check(key in kv, f"{key} missing")
            if key in kv:
                check(kv[key]["type"] == vt.name.lower(), f"{key}: type {kv[key]['type']}")
                check(kv[key]["value"] == expected_json(vt, val, sub),
                      f"{key}: {kv[key]['value']!r} vs {expected_json(vt, val, sub)!r}")
        check(h["alignment"] == (alignment or 32), f"alignment {h['alignment']}")
    return stats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--gguf", help="compare this existing file instead of written ones")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.gguf:
            stats = {}
            check_file(args.tool, args.gguf, tmp, stats)
        else:
            stats = written_files(args.tool, tmp)
    for name, s in sorted(stats.items()):
        print(f"{name:6s} tensors {s['tensors']:4d} decoded {s['decoded']:4d} elements {s['elements']:10d} "
              f"max|diff| {s['max_abs_diff']:.3g} bit mismatches {s['bit_mismatches']}")
    if failures:
        for f in failures[:40]:
            print("FAIL:", f)
        print(f"{len(failures)} failures")
        return 1
    print(f"gguf interop: OK (gguf {importlib.metadata.version('gguf')} vs qloom gguf_tool)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
