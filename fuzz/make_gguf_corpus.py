#!/usr/bin/env python3
"""Writes the seed corpus for the GGUF header fuzzer into fuzz/corpus_gguf/.

Each seed is a whole small GGUF file (header, metadata, tensor infos, data):
valid files covering every metadata type, nested arrays, alignment, versions 2
and 3 and every dequantizable tensor type, and invalid ones hitting each
validation rule, so the fuzzer starts next to every branch. Written with its
own little byte builder (no gguf package needed). Deterministic: rerunning
rewrites identical files.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus_gguf")

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
# ggml type -> (block elements, block bytes) for the types seeds use
TYPES = {0: (1, 4), 1: (1, 2), 30: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
         8: (32, 34), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176),
         14: (256, 210), 9: (32, 40), 39: (32, 17)}


def gstr(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def scalar(t, v):
    fmt = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
           BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}[t]
    return struct.pack(fmt, v)


def value(t, v):
    if t == STR:
        return gstr(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(value(et, x) for x in items)
    return scalar(t, v)


def kv(key, t, v):
    return gstr(key) + struct.pack("<I", t) + value(t, v)


def gguf(kvs=(), tensors=(), version=3, align=32, magic=b"GGUF", counts=None, data=None):
    """tensors: (name, ne, type[, offset]); data bytes are a pattern unless given."""
    infos, blobs, off = b"", [], 0
    for t in tensors:
        name, ne, ty = t[:3]
        be, bb = TYPES.get(ty, (1, 1))
        n = 1
        for d in ne:
            n *= d
        nbytes = n // be * bb
        o = t[3] if len(t) > 3 else off
        infos += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        infos += struct.pack("<IQ", ty, o)
        if data is None and o + nbytes <= 1 << 16:  # bad-offset seeds place no data
            blobs.append((o, bytes((i * 29 + 7) & 0xFF for i in range(nbytes))))
        off = (o + nbytes + align - 1) // align * align if nbytes < 1 << 16 else off
    nt, nk = counts if counts else (len(tensors), len(kvs))
    head = magic + struct.pack("<IQQ", version, nt, nk) + b"".join(kvs) + infos
    head += b"\0" * (-len(head) % align)
    if data is None:
        size = max([o + len(b) for o, b in blobs] + [0])
        body = bytearray(size + (-size % align))
        for o, b in blobs:
            if o + len(b) <= len(body):
                body[o:o + len(b)] = b
        data = bytes(body)
    return head + data


EVERY_KV = [
    kv("general.architecture", STR, "llama"), kv("a.u8", U8, 7), kv("a.i8", I8, -7),
    kv("a.u16", U16, 700), kv("a.i16", I16, -700), kv("a.u32", U32, 70000),
    kv("a.i32", I32, -70000), kv("a.f32", F32, 0.5), kv("a.bool", BOOL, 1),
    kv("a.u64", U64, 1 << 40), kv("a.i64", I64, -(1 << 40)), kv("a.f64", F64, 1e-300),
    kv("tokenizer.ggml.tokens", ARR, (STR, ["<s>", "a", "\u00e9"])),
    kv("tokenizer.ggml.scores", ARR, (F32, [0.0, -1.5, 2.0])),
    kv("a.nested", ARR, (ARR, [(U8, [1, 2]), (STR, ["x"])])),
    kv("a.empty", ARR, (I64, [])),
]

SEEDS = {
    # --- valid ---
    "valid_every_kv": gguf(EVERY_KV, [("w", [4, 2], 0)]),
    "valid_v2_align64": gguf([kv("general.alignment", U32, 64)],
                             [("a", [8], 1), ("b", [32], 2)], version=2, align=64),
    "valid_no_tensors": gguf([kv("general.name", STR, "x")]),
    "valid_bare_header": b"GGUF" + struct.pack("<IQQ", 3, 0, 0),
    "valid_zero_size": gguf([], [("z", [0, 4], 2), ("s", [], 0)]),
    "valid_bf16_f16": gguf([], [("h", [4], 1), ("b", [4], 30)]),
    "valid_q_32": gguf([], [("q40", [32], 2), ("q41", [32], 3), ("q50", [32], 6),
                            ("q51", [32], 7), ("q80", [32], 8)]),
    "valid_k": gguf([], [("q2", [256], 10), ("q3", [256], 11), ("q4", [256], 12),
                         ("q5", [256], 13), ("q6", [256], 14)]),
    "valid_4d": gguf([], [("t", [32, 1, 2, 1], 8)]),
    "valid_undecodable": gguf([], [("q81", [32], 9), ("mx", [32], 39)]),
    # header-valid, refused later by the metadata checks (model/gguf_counts.h, get_string)
    "valid_absurd_block_count": gguf([kv("general.architecture", STR, "llama"),
                                      kv("llama.block_count", U32, (1 << 31) - 1)],
                                     [("blk.0.attn_norm.weight", [4], 0)]),
    "valid_non_utf8_architecture": gguf([kv("general.architecture", STR, b"lla\xffma")]),
    # --- invalid ---
    "bad_magic": gguf(magic=b"GGML"),
    "bad_version1": gguf(version=1),
    "bad_version_big_endian": gguf(version=0x03000000),
    "bad_tensor_count": gguf(counts=(1 << 40, 0)),
    "bad_kv_count": gguf(counts=(0, 1 << 40)),
    "bad_kv_count_short": gguf([kv("a", U8, 1)], counts=(0, 2)),
    "bad_value_type": gguf([gstr("k") + struct.pack("<I", 13) + b"\0" * 8]),
    "bad_array_type": gguf([gstr("k") + struct.pack("<IIQ", ARR, 77, 0)]),
    "bad_array_count": gguf([gstr("k") + struct.pack("<IIQ", ARR, U32, 1 << 30)]),
    "bad_array_deep": gguf([gstr("k") + struct.pack("<I", ARR) + struct.pack("<IQ", ARR, 1) * 9
                            + struct.pack("<IQ", U8, 0)]),
    "bad_string_len": gguf([gstr("k") + struct.pack("<IQ", STR, 1 << 62)]),
    "bad_bool": gguf([kv("k", BOOL, 2)]),
    "bad_dup_key": gguf([kv("k", U8, 1), kv("k", U8, 2)]),
    "bad_empty_key": gguf([kv("", U8, 1)]),
    "bad_utf8_key": gguf([gstr(b"k\xff") + struct.pack("<I", U8) + b"\1"]),
    "bad_align_zero": gguf([kv("general.alignment", U32, 0)]),
    "bad_align_odd": gguf([kv("general.alignment", U32, 48)]),
    "bad_align_type": gguf([kv("general.alignment", U64, 32)]),
    "bad_dims": gguf([], [("w", [1, 1, 1, 1, 1], 0)]),
    "bad_type": gguf([], [("w", [32], 4)]),
    "bad_type_huge": gguf([], [("w", [32], 0xFFFFFFFF)]),
    "bad_block": gguf([], [("w", [48], 2)]),
    "bad_numel": gguf([], [("w", [1 << 32, 1 << 32], 0)], data=b""),
    "bad_ne_sign": gguf([], [("w", [1 << 63], 0)], data=b""),
    "bad_unaligned": gguf([], [("w", [8], 0, 4)]),
    "bad_past_end": gguf([], [("w", [8], 0, 1 << 40)], data=b""),
    "bad_overlap": gguf([], [("a", [64], 0, 0), ("b", [8], 0, 32)]),
    "bad_dup_tensor": gguf([], [("w", [8], 0), ("w", [8], 0)]),
    "bad_truncated": gguf(EVERY_KV, [("w", [64], 0)])[:-100],
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in sorted(SEEDS.items()):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(SEEDS)} seeds to {OUT}")


if __name__ == "__main__":
    main()
