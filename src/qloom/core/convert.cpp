#include "qloom/core/convert.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>

#include "qloom/core/convert_x86.h"
#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace qloom {

// ---- ISA detection ---------------------------------------------------------------

namespace {

#if defined(__x86_64__)
// Reads CPUID and XCR0 directly (rather than __builtin_cpu_supports, whose
// accepted feature names differ between compilers): an ISA counts only when
// the CPU has the instructions AND the OS saves the register state.
uint64_t read_xcr0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}
#endif

Isa detect_best_isa() {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return Isa::kScalar;
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28), f16c = c & (1u << 29),
             fma = c & (1u << 12);
  if (!(osxsave && avx && f16c && fma)) return Isa::kScalar;
  const uint64_t xcr0 = read_xcr0();
  if ((xcr0 & 0x6) != 0x6) return Isa::kScalar;  // XMM + YMM state
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return Isa::kScalar;
  if (!(b & (1u << 5))) return Isa::kScalar;  // AVX2
  const bool avx512 = (b & (1u << 16)) && (b & (1u << 17)) &&  // F, DQ
                      (b & (1u << 30)) && (b & (1u << 31)) &&  // BW, VL
                      (xcr0 & 0xE0) == 0xE0;                  // opmask + ZMM state
  return avx512 ? Isa::kAvx512 : Isa::kAvx2;
#else
  return Isa::kScalar;
#endif
}

// QLOOM_MAX_ISA=scalar|avx2|avx512 caps the detected ISA (for testing the
// fallbacks on a machine that has everything). Other values are ignored.
Isa capped_best_isa() {
  const Isa detected = detect_best_isa();
  const char* cap = std::getenv("QLOOM_MAX_ISA");
  if (cap == nullptr) return detected;
  const std::string_view c(cap);
  Isa limit = detected;
  if (c == "scalar") limit = Isa::kScalar;
  else if (c == "avx2") limit = Isa::kAvx2;
  else if (c == "avx512") limit = Isa::kAvx512;
  return static_cast<int>(limit) < static_cast<int>(detected) ? limit : detected;
}

}  // namespace

Isa best_isa() {
  static const Isa best = capped_best_isa();
  return best;
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2: return best_isa() == Isa::kAvx2 || best_isa() == Isa::kAvx512;
    case Isa::kAvx512: return best_isa() == Isa::kAvx512;
  }
  return false;
}

namespace {

// CPUID leaf 7: ECX bit 11 = AVX512_VNNI; sub-leaf 1 EAX bit 5 = AVX512_BF16.
bool detect_leaf7(bool bf16) {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!bf16) return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 11));
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
#else
  (void)bf16;
  return false;
#endif
}

}  // namespace

bool cpu_has_avx512_vnni() {
  static const bool has = best_isa() == Isa::kAvx512 && detect_leaf7(false);
  return has;
}

bool cpu_has_avx512_bf16() {
  static const bool has = best_isa() == Isa::kAvx512 && detect_leaf7(true);
  return has;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "unknown";
}

namespace {

void require_isa(Isa isa, const char* what) {
  if (!isa_supported(isa))
    throw Error(ErrorKind::kUnsupported, "", what,
                std::string("instruction set ") + isa_name(isa) +
                    " is not available on this CPU or build",
                "use best_isa() or Isa::kScalar");
}

// ---- scalar kernels (the packed side may be unaligned) -----------------------------

template <class T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
void store(unsigned char* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

template <float (*Decode)(uint16_t)>
void u16_to_f32_scalar(const void* in, float* out, size_t n) {
  const auto* p = static_cast<const unsigned char*>(in);
  for (size_t i = 0; i < n; ++i) out[i] = Decode(load<uint16_t>(p + 2 * i));
}
template <uint16_t (*Encode)(float)>
void f32_to_u16_scalar(const float* in, void* out, size_t n) {
  auto* q = static_cast<unsigned char*>(out);
  for (size_t i = 0; i < n; ++i) store<uint16_t>(q + 2 * i, Encode(in[i]));
}
template <float (*Decode)(uint8_t)>
void u8_to_f32_scalar(const void* in, float* out, size_t n) {
  const auto* p = static_cast<const unsigned char*>(in);
  for (size_t i = 0; i < n; ++i) out[i] = Decode(p[i]);
}
template <uint8_t (*Encode)(float)>
void f32_to_u8_scalar(const float* in, void* out, size_t n) {
  auto* q = static_cast<unsigned char*>(out);
  for (size_t i = 0; i < n; ++i) q[i] = Encode(in[i]);
}

// Non-constexpr trampolines so the templates above get plain function pointers.
float dec_bf16(uint16_t h) { return bf16_to_float(h); }
float dec_f16(uint16_t h) { return f16_to_float(h); }
float dec_e4m3(uint8_t c) { return fp8_e4m3_to_float(c); }
float dec_e5m2(uint8_t c) { return fp8_e5m2_to_float(c); }
float dec_e8m0(uint8_t c) { return e8m0_to_float(c); }
uint16_t enc_bf16(float x) { return float_to_bf16(x); }
uint16_t enc_f16(float x) { return float_to_f16(x); }
uint8_t enc_e4m3(float x) { return float_to_fp8_e4m3(x); }
uint8_t enc_e5m2(float x) { return float_to_fp8_e5m2(x); }
uint8_t enc_e8m0(float x) { return float_to_e8m0(x); }

using DecodeFn = void (*)(const void*, float*, size_t);
using EncodeFn = void (*)(const float*, void*, size_t);

struct KernelSet {
  DecodeFn scalar, avx2, avx512;
};
struct EncodeKernelSet {
  EncodeFn scalar, avx2, avx512;
};

#if defined(__x86_64__)
#define QLOOM_X86(fn) detail::fn
#else
#define QLOOM_X86(fn) nullptr
#endif

constexpr KernelSet kBf16ToF32{u16_to_f32_scalar<dec_bf16>, QLOOM_X86(bf16_to_f32_avx2),
                               QLOOM_X86(bf16_to_f32_avx512)};
constexpr KernelSet kF16ToF32{u16_to_f32_scalar<dec_f16>, QLOOM_X86(f16_to_f32_avx2),
                              QLOOM_X86(f16_to_f32_avx512)};
constexpr KernelSet kE4M3ToF32{u8_to_f32_scalar<dec_e4m3>, QLOOM_X86(fp8_e4m3_to_f32_avx2),
                               QLOOM_X86(fp8_e4m3_to_f32_avx512)};
constexpr EncodeKernelSet kF32ToBf16{f32_to_u16_scalar<enc_bf16>, QLOOM_X86(f32_to_bf16_avx2),
                                     QLOOM_X86(f32_to_bf16_avx512)};
constexpr EncodeKernelSet kF32ToF16{f32_to_u16_scalar<enc_f16>, QLOOM_X86(f32_to_f16_avx2),
                                    QLOOM_X86(f32_to_f16_avx512)};
constexpr EncodeKernelSet kF32ToE4M3{f32_to_u8_scalar<enc_e4m3>, QLOOM_X86(f32_to_fp8_e4m3_avx2),
                                     QLOOM_X86(f32_to_fp8_e4m3_avx512)};

#undef QLOOM_X86

template <class Set>
auto pick(const Set& s, Isa isa) {
  switch (isa) {
    case Isa::kAvx2: return s.avx2;
    case Isa::kAvx512: return s.avx512;
    case Isa::kScalar: break;
  }
  return s.scalar;
}

void run(const KernelSet& s, Isa isa, const char* what, const void* in, float* out, size_t n) {
  require_isa(isa, what);
  pick(s, isa)(in, out, n);
}
void run(const EncodeKernelSet& s, Isa isa, const char* what, const float* in, void* out,
         size_t n) {
  require_isa(isa, what);
  pick(s, isa)(in, out, n);
}

}  // namespace

// ---- typed entry points --------------------------------------------------------------

void bf16_to_f32(Isa isa, const uint16_t* in, float* out, size_t n) {
  run(kBf16ToF32, isa, "bf16_to_f32", in, out, n);
}
void bf16_to_f32(const uint16_t* in, float* out, size_t n) {
  pick(kBf16ToF32, best_isa())(in, out, n);
}
void f32_to_bf16(Isa isa, const float* in, uint16_t* out, size_t n) {
  run(kF32ToBf16, isa, "f32_to_bf16", in, out, n);
}
void f32_to_bf16(const float* in, uint16_t* out, size_t n) {
  pick(kF32ToBf16, best_isa())(in, out, n);
}
void f16_to_f32(Isa isa, const uint16_t* in, float* out, size_t n) {
  run(kF16ToF32, isa, "f16_to_f32", in, out, n);
}
void f16_to_f32(const uint16_t* in, float* out, size_t n) {
  pick(kF16ToF32, best_isa())(in, out, n);
}
void f32_to_f16(Isa isa, const float* in, uint16_t* out, size_t n) {
  run(kF32ToF16, isa, "f32_to_f16", in, out, n);
}
void f32_to_f16(const float* in, uint16_t* out, size_t n) {
  pick(kF32ToF16, best_isa())(in, out, n);
}
void fp8_e4m3_to_f32(Isa isa, const uint8_t* in, float* out, size_t n) {
  run(kE4M3ToF32, isa, "fp8_e4m3_to_f32", in, out, n);
}
void fp8_e4m3_to_f32(const uint8_t* in, float* out, size_t n) {
  pick(kE4M3ToF32, best_isa())(in, out, n);
}
void f32_to_fp8_e4m3(Isa isa, const float* in, uint8_t* out, size_t n) {
  run(kF32ToE4M3, isa, "f32_to_fp8_e4m3", in, out, n);
}
void f32_to_fp8_e4m3(const float* in, uint8_t* out, size_t n) {
  pick(kF32ToE4M3, best_isa())(in, out, n);
}

// ---- generic conversions ---------------------------------------------------------------

namespace {

template <class T>
void int_to_f32(const void* in, float* out, size_t n) {
  const auto* p = static_cast<const unsigned char*>(in);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(load<T>(p + i * sizeof(T)));
}

// Round half to even without depending on the FPU rounding mode.
float round_half_even(float x) {
  if (!(std::fabs(x) < 0x1p23f)) return x;  // already an integer (or inf)
  const float t = std::trunc(x);
  const float frac = std::fabs(x - t);  // exact
  if (frac > 0.5f || (frac == 0.5f && std::fmod(t, 2.0f) != 0.0f))
    return t + std::copysign(1.0f, x);
  return t;
}

template <class T>
T saturate_round(float x) {
  if (std::isnan(x)) return T{0};
  const double r = round_half_even(x);
  constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());
  // max + 1 is a power of two, exact in double.
  constexpr double hi_excl = static_cast<double>(std::numeric_limits<T>::max()) + 1.0;
  if (r <= lo) return std::numeric_limits<T>::min();
  if (r >= hi_excl) return std::numeric_limits<T>::max();
  return static_cast<T>(r);
}

int saturate_round_range(float x, int lo, int hi) {
  if (std::isnan(x)) return 0;
  const float r = round_half_even(x);
  if (r <= static_cast<float>(lo)) return lo;
  if (r >= static_cast<float>(hi)) return hi;
  return static_cast<int>(r);
}

template <class T>
void f32_to_int(const float* in, void* out, size_t n) {
  auto* q = static_cast<unsigned char*>(out);
  for (size_t i = 0; i < n; ++i) store<T>(q + i * sizeof(T), saturate_round<T>(in[i]));
}

// Nibble streams: element 2k in the low nibble of byte k.
template <class Decode>
void nibbles_to_f32(const void* in, float* out, size_t n, Decode decode) {
  const auto* p = static_cast<const unsigned char*>(in);
  for (size_t i = 0; i < n; ++i) {
    const unsigned nib = (i & 1) ? p[i / 2] >> 4 : p[i / 2] & 0x0Fu;
    out[i] = decode(nib);
  }
}
template <class Encode>
void f32_to_nibbles(const float* in, void* out, size_t n, Encode encode) {
  auto* q = static_cast<unsigned char*>(out);
  for (size_t i = 0; i + 1 < n; i += 2)
    q[i / 2] = static_cast<unsigned char>((encode(in[i]) & 0x0Fu) | ((encode(in[i + 1]) & 0x0Fu) << 4));
  if (n & 1) q[n / 2] = static_cast<unsigned char>(encode(in[n - 1]) & 0x0Fu);
}

// FP6 little-endian bitstream: element i in stream bits [6i, 6i + 6).
void fp6_to_f32(const MinifloatFormat& f, const void* in, float* out, size_t n) {
  const auto* p = static_cast<const unsigned char*>(in);
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const unsigned char* b = p + (i / 4) * 3;
    const uint32_t w = b[0] | (uint32_t{b[1]} << 8) | (uint32_t{b[2]} << 16);
    for (size_t k = 0; k < 4; ++k) out[i + k] = decode_minifloat(f, (w >> (6 * k)) & 0x3Fu);
  }
  for (; i < n; ++i) {  // 1-3 trailing elements, each within at most 2 bytes
    const size_t bit = 6 * i;
    uint32_t w = p[bit / 8];
    if (bit % 8 > 2) w |= uint32_t{p[bit / 8 + 1]} << 8;
    out[i] = decode_minifloat(f, (w >> (bit % 8)) & 0x3Fu);
  }
}
void f32_to_fp6(const MinifloatFormat& f, const float* in, void* out, size_t n) {
  auto* q = static_cast<unsigned char*>(out);
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    uint32_t w = 0;
    for (size_t k = 0; k < 4; ++k)
      w |= (encode_minifloat(f, in[i + k], Overflow::kSaturate) & 0x3Fu) << (6 * k);
    unsigned char* b = q + (i / 4) * 3;
    b[0] = static_cast<unsigned char>(w);
    b[1] = static_cast<unsigned char>(w >> 8);
    b[2] = static_cast<unsigned char>(w >> 16);
  }
  if (i < n) {  // 1-3 trailing elements: ceil(6 * rem / 8) bytes, unused bits zero
    uint32_t w = 0;
    const size_t rem = n - i;
    for (size_t k = 0; k < rem; ++k)
      w |= (encode_minifloat(f, in[i + k], Overflow::kSaturate) & 0x3Fu) << (6 * k);
    unsigned char* b = q + (i / 4) * 3;
    const size_t bytes = (6 * rem + 7) / 8;
    for (size_t k = 0; k < bytes; ++k) b[k] = static_cast<unsigned char>(w >> (8 * k));
  }
}

[[noreturn]] void unsupported_dtype(const char* fn, DType t) {
  throw Error(ErrorKind::kUnsupported, "", std::string(dtype_name(t)),
              std::string(fn) + ": no conversion for dtype " + std::string(dtype_name(t)));
}

}  // namespace

void to_f32(DType src, const void* in, float* out, size_t n) {
  const auto* p = static_cast<const unsigned char*>(in);
  switch (src) {
    case DType::kF64:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(load<double>(p + 8 * i));
      return;
    case DType::kF32:
      if (n != 0) std::memcpy(out, in, n * sizeof(float));
      return;
    case DType::kF16: pick(kF16ToF32, best_isa())(in, out, n); return;
    case DType::kBF16: pick(kBf16ToF32, best_isa())(in, out, n); return;
    case DType::kF8_E4M3: pick(kE4M3ToF32, best_isa())(in, out, n); return;
    case DType::kF8_E5M2: u8_to_f32_scalar<dec_e5m2>(in, out, n); return;
    case DType::kF6_E2M3: fp6_to_f32(kFp6E2M3Format, in, out, n); return;
    case DType::kF6_E3M2: fp6_to_f32(kFp6E3M2Format, in, out, n); return;
    case DType::kF4_E2M1:
      nibbles_to_f32(in, out, n, [](unsigned c) { return fp4_e2m1_to_float(static_cast<uint8_t>(c)); });
      return;
    case DType::kE8M0: u8_to_f32_scalar<dec_e8m0>(in, out, n); return;
    case DType::kI8: int_to_f32<int8_t>(in, out, n); return;
    case DType::kU8: int_to_f32<uint8_t>(in, out, n); return;
    case DType::kI16: int_to_f32<int16_t>(in, out, n); return;
    case DType::kU16: int_to_f32<uint16_t>(in, out, n); return;
    case DType::kI32: int_to_f32<int32_t>(in, out, n); return;
    case DType::kU32: int_to_f32<uint32_t>(in, out, n); return;
    case DType::kI64: int_to_f32<int64_t>(in, out, n); return;
    case DType::kU64: int_to_f32<uint64_t>(in, out, n); return;
    case DType::kBool:
      for (size_t i = 0; i < n; ++i) out[i] = p[i] != 0 ? 1.0f : 0.0f;
      return;
    case DType::kI4:
      nibbles_to_f32(in, out, n, [](unsigned c) {
        return static_cast<float>(static_cast<int>(c) - ((c & 8u) ? 16 : 0));
      });
      return;
    case DType::kU4:
      nibbles_to_f32(in, out, n, [](unsigned c) { return static_cast<float>(c); });
      return;
  }
  unsupported_dtype("to_f32", src);
}

void from_f32(DType dst, const float* in, void* out, size_t n) {
  auto* q = static_cast<unsigned char*>(out);
  switch (dst) {
    case DType::kF64:
      for (size_t i = 0; i < n; ++i) store<double>(q + 8 * i, static_cast<double>(in[i]));
      return;
    case DType::kF32:
      if (n != 0) std::memcpy(out, in, n * sizeof(float));
      return;
    case DType::kF16: pick(kF32ToF16, best_isa())(in, out, n); return;
    case DType::kBF16: pick(kF32ToBf16, best_isa())(in, out, n); return;
    case DType::kF8_E4M3: pick(kF32ToE4M3, best_isa())(in, out, n); return;
    case DType::kF8_E5M2: f32_to_u8_scalar<enc_e5m2>(in, out, n); return;
    case DType::kF6_E2M3: f32_to_fp6(kFp6E2M3Format, in, out, n); return;
    case DType::kF6_E3M2: f32_to_fp6(kFp6E3M2Format, in, out, n); return;
    case DType::kF4_E2M1:
      f32_to_nibbles(in, out, n, [](float x) { return unsigned{float_to_fp4_e2m1(x)}; });
      return;
    case DType::kE8M0: f32_to_u8_scalar<enc_e8m0>(in, out, n); return;
    case DType::kI8: f32_to_int<int8_t>(in, out, n); return;
    case DType::kU8: f32_to_int<uint8_t>(in, out, n); return;
    case DType::kI16: f32_to_int<int16_t>(in, out, n); return;
    case DType::kU16: f32_to_int<uint16_t>(in, out, n); return;
    case DType::kI32: f32_to_int<int32_t>(in, out, n); return;
    case DType::kU32: f32_to_int<uint32_t>(in, out, n); return;
    case DType::kI64: f32_to_int<int64_t>(in, out, n); return;
    case DType::kU64: f32_to_int<uint64_t>(in, out, n); return;
    case DType::kBool:
      for (size_t i = 0; i < n; ++i) q[i] = in[i] != 0.0f ? 1 : 0;  // NaN != 0
      return;
    case DType::kI4:
      f32_to_nibbles(in, out, n, [](float x) {
        return static_cast<unsigned>(saturate_round_range(x, -8, 7)) & 0x0Fu;
      });
      return;
    case DType::kU4:
      f32_to_nibbles(in, out, n,
                     [](float x) { return static_cast<unsigned>(saturate_round_range(x, 0, 15)); });
      return;
  }
  unsupported_dtype("from_f32", dst);
}

}  // namespace qloom
