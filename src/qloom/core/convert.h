// Bulk element conversions to and from f32, with runtime ISA dispatch.
//
// Every function here produces exactly the bits the scalar reference in
// float_codec.h produces, for every input (NaN payloads, inf, -0, subnormals,
// rounding midpoints). The SIMD paths are an optimisation only; tests compare
// them bit-for-bit with the scalar path.
//
// Buffers: `in` and `out` must not overlap. The typed entry points take typed
// pointers; the generic to_f32 / from_f32 accept any byte alignment for the
// packed side (`in` / `out` as void*), the float side must be float-aligned.
//
// Storage of sub-byte formats in to_f32 / from_f32 (bytes = ceil(bits*n/8)):
//   fp4_e2m1, i4, u4   two elements per byte, element 2k in the low nibble
//                      (bits 0-3), element 2k+1 in the high nibble. With odd
//                      n, from_f32 sets the unused high nibble of the last
//                      byte to 0 and to_f32 ignores it. (Quark's int32 packing
//                      of int4/uint4 weights is separate: see int4_pack.h.)
//   fp6_e2m3, fp6_e3m2 a little-endian bitstream: element i occupies stream
//                      bits [6i, 6i+6) (its least significant bit first) and
//                      stream bit j is bit (j % 8) of byte j / 8. So 4
//                      elements take 3 bytes: v0 | v1 << 6 | v2 << 12 |
//                      v3 << 18, stored low byte first (the layout of Quark's
//                      fp6 pack). from_f32 zeroes the unused bits of a partial
//                      last byte.
//   bool               one byte per element; to_f32 maps any non-zero byte to
//                      1.0. from_f32 writes 1 for every x != 0 (NaN included).
#pragma once

#include <cstddef>
#include <cstdint>

#include "qloom/core/dtype.h"

namespace qloom {

enum class Isa : uint8_t {
  kScalar,  // portable C++, always available
  kAvx2,    // x86-64 AVX2 + F16C
  kAvx512,  // x86-64 AVX-512 F + BW + VL (+ the AVX2 set)
};

// The fastest ISA this CPU (and OS) supports; computed once. The environment
// variable QLOOM_MAX_ISA=scalar|avx2|avx512 lowers it (never raises it), to
// exercise the fallback paths; other values are ignored.
Isa best_isa();
// True when `isa` is at or below best_isa() (always for kScalar).
bool isa_supported(Isa isa);
const char* isa_name(Isa isa);  // "scalar", "avx2", "avx512"

// Dot-product extensions of AVX-512 the native quantized kernels use
// (engine/native/): true only when best_isa() is kAvx512 (so QLOOM_MAX_ISA
// caps them too) and the CPU has the instructions.
bool cpu_has_avx512_vnni();  // vpdpbusd / vpdpwssd (AVX512_VNNI)
bool cpu_has_avx512_bf16();  // vdpbf16ps / vcvtne2ps2bf16 (AVX512_BF16)

// ---- typed bulk conversions --------------------------------------------------
// The overloads without an Isa use best_isa(). The explicit-Isa overloads
// exist for tests and benchmarks; they throw Error(kUnsupported) when the CPU
// lacks that ISA (or the build is not x86-64).

void bf16_to_f32(const uint16_t* in, float* out, size_t n);
void bf16_to_f32(Isa isa, const uint16_t* in, float* out, size_t n);
void f32_to_bf16(const float* in, uint16_t* out, size_t n);
void f32_to_bf16(Isa isa, const float* in, uint16_t* out, size_t n);

void f16_to_f32(const uint16_t* in, float* out, size_t n);
void f16_to_f32(Isa isa, const uint16_t* in, float* out, size_t n);
void f32_to_f16(const float* in, uint16_t* out, size_t n);
void f32_to_f16(Isa isa, const float* in, uint16_t* out, size_t n);

// fp8 e4m3fn; f32 -> fp8 saturates (see float_codec.h).
void fp8_e4m3_to_f32(const uint8_t* in, float* out, size_t n);
void fp8_e4m3_to_f32(Isa isa, const uint8_t* in, float* out, size_t n);
void f32_to_fp8_e4m3(const float* in, uint8_t* out, size_t n);
void f32_to_fp8_e4m3(Isa isa, const float* in, uint8_t* out, size_t n);

// ---- generic conversions -------------------------------------------------------

// Decodes n elements of `src` (packed as described above) to f32.
//   float formats: exactly as float_codec.h; f64 -> f32 is a C++ cast
//     (nearest, ties to even; overflow to inf).
//   e8m0: 2^(code-127), 0xFF -> NaN.
//   integers (i8..u64, i4, u4): by value, rounded to the nearest float (ties
//     to even) for 32- and 64-bit values beyond 2^24.
//   bool: 0 -> 0.0, anything else -> 1.0.
void to_f32(DType src, const void* in, float* out, size_t n);

// Encodes n floats as `dst` (packed as described above).
//   float formats: exactly as float_codec.h (fp8_e5m2 uses the IEEE, non-
//     saturating variant; fp8_e4m3, fp6 and fp4 saturate); f64: exact widening.
//   e8m0: float_to_e8m0.
//   integers (i8..u64, i4 [-8,7], u4 [0,15]): round half to even, then
//     saturate to the type's range; NaN -> 0.
//   bool: x != 0 -> 1 (NaN -> 1), else 0.
void from_f32(DType dst, const float* in, void* out, size_t n);

}  // namespace qloom
