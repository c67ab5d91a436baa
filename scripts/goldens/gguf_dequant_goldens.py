#!/usr/bin/env python3
"""Dequantization goldens for qloom's GGUF reader (tests/io/gguf_dequant_test.cpp).

For every type qloom decodes (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) this writes, with the `gguf` package:

  tests/data/gguf/dequant_inputs.gguf   one tensor per type (named after it):
      random blocks (fp16 scale fields forced finite) followed by adversarial
      blocks: zero scales, all-0xFF / all-0x00 / all-0x80 codes, subnormal,
      +-inf and NaN (quiet and signaling) fp16 scales. F32/F16/BF16 hold
      random codes plus every special value class. The metadata key
      golden.type_sizes lists gguf's GGML_QUANT_SIZES as (type, block
      elements, block bytes) triples.
  tests/data/gguf/dequant_outputs.gguf  the same names as F32 tensors:
      gguf.quants.dequantize of each input, bit for bit.

NaNs: where a block makes an fp16 scale NaN, the block's other fp16 field is
finite or the same NaN, so no float operation ever sees two NaNs with
different payloads (which one survives is not defined by IEEE 754 and numpy
itself differs between its SIMD and scalar loops).

Run with a Python that has gguf and numpy (e.g. /tmp/heavy/bin/python):
    python scripts/goldens/gguf_dequant_goldens.py
Deterministic: reruns write identical files.
"""
import importlib.metadata
import os
import sys

import numpy as np

import gguf
from gguf import GGMLQuantizationType as Q
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "data", "gguf")

# Byte offsets of the fp16 fields in each block.
FP16_FIELDS = {
    Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q8_0: [0],
    Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208],
}
RANDOM_BLOCKS = 4

F16_SPECIALS = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0x7BFF, 0xFBFF,
                0x7C00, 0xFC00, 0x7C01, 0x7D55, 0x7DFF, 0x7E00, 0x7E01, 0x7FFF, 0xFC01,
                0xFE00, 0xFFFF]
BF16_SPECIALS = [0x0000, 0x8000, 0x0001, 0x807F, 0x0080, 0x3F80, 0x7F7F, 0xFF7F, 0x7F80,
                 0xFF80, 0x7F81, 0x7FA5, 0x7FC0, 0x7FC1, 0xFFC0, 0xFFFF]
F32_SPECIALS = [0x00000000, 0x80000000, 0x00000001, 0x007FFFFF, 0x00800000, 0x3F800000,
                0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7F800001, 0x7FA00000, 0x7FC00000,
                0x7FC00001, 0xFFC00000, 0xFFFFFFFF]


def set_f16(block, off, bits):
    block[off] = bits & 0xFF
    block[off + 1] = bits >> 8


def finite_f16(block, off):
    bits = int(block[off]) | (int(block[off + 1]) << 8)
    if bits & 0x7C00 == 0x7C00:
        bits &= ~0x4000  # clear the top exponent bit: finite
    set_f16(block, off, bits)


def quant_blocks(qtype, rng):
    """Random blocks plus the adversarial ones, as a (n, block_bytes) uint8 array."""
    _, nbytes = GGML_QUANT_SIZES[qtype]
    fields = FP16_FIELDS[qtype]
    blocks = []

    def random_block():
        b = rng.integers(0, 256, size=nbytes, dtype=np.uint8)
        for off in fields:
            finite_f16(b, off)
        return b

    for _ in range(RANDOM_BLOCKS):
        blocks.append(random_block())

    def with_codes(fill, scales=None):
        b = np.full(nbytes, fill, dtype=np.uint8)
        src = random_block()
        for i, off in enumerate(fields):
            bits = scales[i] if scales else int(src[off]) | (int(src[off + 1]) << 8)
            set_f16(b, off, bits)
        return b

    def with_scales(*bits):
        b = random_block()
        for off, v in zip(fields, bits):
            set_f16(b, off, v)
        return b

    one = [0x3C00] * len(fields)
    blocks.append(with_scales(*([0x0000] * len(fields))))   # zero scales
    blocks.append(with_codes(0xFF, one))                     # max codes
    blocks.append(with_codes(0x00, one))                     # min codes
    blocks.append(with_codes(0x80))                          # int8 -128 (Q8_0, Q6_K scales)
    blocks.append(with_codes(0x7F))                          # int8 127
    blocks.append(with_scales(0x0001, 0x83FF))               # subnormal scales
    blocks.append(with_scales(0x03FF, 0x0001))
    blocks.append(with_scales(0x7C00, 0x3C00))               # +inf scale (inf * 0 = NaN)
    blocks.append(with_scales(0xFC00, 0xBC00))               # -inf
    blocks.append(with_scales(0x7E01, 0x3800))               # quiet NaN with payload
    blocks.append(with_scales(0xFC01, 0x3800))               # signaling NaN, negative
    if len(fields) == 2:
        blocks.append(with_scales(0x3800, 0x7C00))           # inf min / dmin
        blocks.append(with_scales(0x3800, 0xFD55))           # signaling NaN min / dmin
        blocks.append(with_scales(0x7C00, 0xFC00))           # both infinite
        blocks.append(with_scales(0x7E00, 0x7E00))           # the same NaN in both
    return np.stack(blocks)


def plain_codes(qtype, rng):
    """F32 / F16 / BF16: specials plus random codes, as raw little-endian bytes."""
    if qtype == Q.F32:
        codes = np.concatenate([np.array(F32_SPECIALS, dtype=np.uint32),
                                rng.integers(0, 2**32, size=49, dtype=np.uint32)])
    else:
        specials = F16_SPECIALS if qtype == Q.F16 else BF16_SPECIALS
        codes = np.concatenate([np.array(specials, dtype=np.uint16),
                                rng.integers(0, 2**16, size=64 - len(specials), dtype=np.uint16)])
    return codes.astype(codes.dtype.newbyteorder("<")).view(np.uint8).reshape(4, -1)


TYPES = [Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1,
         Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K]


def main():
    if sys.byteorder != "little":
        sys.exit("run on a little-endian machine")
    rng = np.random.default_rng(20240612)
    os.makedirs(OUT, exist_ok=True)
    inputs = gguf.GGUFWriter(os.path.join(OUT, "dequant_inputs.gguf"), "qloom-golden")
    outputs = gguf.GGUFWriter(os.path.join(OUT, "dequant_outputs.gguf"), "qloom-golden")
    sizes = []
    for t, (be, bb) in sorted(GGML_QUANT_SIZES.items()):
        sizes += [int(t), be, bb]
    inputs.add_array("golden.type_sizes", sizes)
    inputs.add_string("golden.gguf_version", importlib.metadata.version("gguf"))
    for qtype in TYPES:
        raw = plain_codes(qtype, rng) if qtype in (Q.F32, Q.F16, Q.BF16) else quant_blocks(qtype, rng)
        with np.errstate(invalid="ignore"):  # inf * 0 and NaN scales are intended
            out = np.ascontiguousarray(dequantize(raw, qtype), dtype=np.float32)
        inputs.add_tensor(qtype.name, raw, raw_dtype=qtype)
        outputs.add_tensor(qtype.name, out.reshape(out.shape[0], -1))
        print(f"{qtype.name:5s} input {raw.shape} -> output {out.shape}")
    for w in (inputs, outputs):
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()


if __name__ == "__main__":
    main()
