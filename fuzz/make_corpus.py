#!/usr/bin/env python3
"""Writes the seed corpus for the safetensors header fuzzer into fuzz/corpus/.

Each seed is a whole small safetensors file (8-byte length, header, data):
valid files covering every dtype family and layout, and invalid ones hitting
each validation rule, so the fuzzer starts next to every branch. Deterministic:
rerunning rewrites identical files.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")


def st(header, data_len=None, length=None, data=None, pad=True):
    """A safetensors file from a header (dict, str, or raw bytes)."""
    if isinstance(header, bytes):
        raw = header
    elif isinstance(header, str):
        raw = header.encode("utf-8")
    else:
        raw = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if pad:
        raw += b" " * (-len(raw) % 8)
    if data is None:
        data = bytes((i * 7 + 1) & 0xFF for i in range(data_len or 0))
    n = len(raw) if length is None else length
    return struct.pack("<Q", n) + raw + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


SEEDS = {
    # --- valid ---
    "valid_one_f32": st({"w": entry("F32", [2, 2], 0, 16)}, 16),
    "valid_metadata_bf16": st({"__metadata__": {"format": "pt"},
                               "a": entry("BF16", [4], 0, 8),
                               "b": entry("F16", [2, 1], 8, 12)}, 12),
    "valid_subbyte_fp8": st({"f4": entry("F4", [3, 2], 0, 3),
                             "f6": entry("F6_E2M3", [4], 3, 6),
                             "e8": entry("F8_E8M0", [2], 6, 8),
                             "q": entry("F8_E4M3", [2], 8, 10),
                             "r": entry("F8_E5M2", [2], 10, 12)}, 12),
    "valid_ints_bool": st({"i": entry("I64", [1], 0, 8), "u": entry("U32", [1], 8, 12),
                           "s": entry("I16", [1], 12, 14), "b": entry("BOOL", [2], 14, 16),
                           "d": entry("F64", [], 16, 24)}, 24),
    "valid_empty_tensors": st({"z": entry("I32", [0, 4], 0, 0), "y": entry("U8", [1], 0, 1)}, 1),
    "valid_no_tensors": st({}, 0),
    "valid_unicode_name": st({"caf\u00e9.weight": entry("U8", [1], 0, 1)}, 1),
    "valid_zero_dim_huge": st({"z": entry("U8", [4294967296, 4294967296, 0], 0, 0)}, 0),
    # --- invalid ---
    "bad_too_short": b"\x08\x00\x00",
    "bad_len_beyond_file": st({"w": entry("U8", [1], 0, 1)}, 1, length=4096),
    "bad_len_over_limit": struct.pack("<Q", 100_000_001) + b"{}      ",
    "bad_not_object": st("[1,2,3]", 0),
    "bad_json": st('{"w":{"dtype":"F32",', 0),
    "bad_utf8": st(b'{"w\xff":1}', 0),
    "bad_unknown_dtype": st({"w": entry("Q7", [1], 0, 1)}, 1),
    "bad_overlap": st({"a": entry("U8", [8], 0, 8), "b": entry("U8", [8], 4, 12)}, 12),
    "bad_gap": st({"a": entry("U8", [8], 0, 8), "b": entry("U8", [8], 12, 20)}, 20),
    "bad_truncated": st({"w": entry("F32", [2, 2], 0, 16)}, 10),
    "bad_trailing": st({"w": entry("U8", [2], 0, 2)}, 6),
    "bad_duplicate": st('{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                        '"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', 2),
    "bad_shape_overflow": st({"w": entry("U8", [4294967296, 4294967296, 2], 0, 1)}, 1),
    "bad_metadata_value": st({"__metadata__": {"format": 1}}, 0),
    "bad_metadata_not_object": st({"__metadata__": ["format", "pt"]}, 0),
    "bad_shape_object": st({"w": {"dtype": "U8", "shape": {"0": 1}, "data_offsets": [0, 1]}}, 1),
    "bad_extra_field": st('{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":0}}', 1),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in sorted(SEEDS.items()):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(SEEDS)} seeds to {OUT}")


if __name__ == "__main__":
    main()
