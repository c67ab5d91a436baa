#include "qloom/quant/quantize_fast.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <exception>
#include <iterator>
#include <system_error>
#include <thread>

#include "qloom/core/convert.h"
#include "qloom/core/float_codec.h"
#include "qloom/quant/mx_fp6.h"
#include "qloom/quant/quantize_ref.h"

#if defined(__x86_64__)
#include "qloom/core/x86_intrinsics.h"
// No "fma" here on purpose: the reference rounds x * inv before anything else,
// and a contracted multiply-add would round once.
#define QLOOM_QUANT_AVX2 __attribute__((target("avx2,f16c")))
#define QLOOM_QUANT_HAVE_AVX2 1
#endif

namespace qloom::quant {
namespace {

using namespace detail;

// ---- threading -------------------------------------------------------------------

unsigned resolve_threads(unsigned requested, uint64_t rows, uint64_t n) {
  unsigned t = requested ? requested : std::max(1u, std::thread::hardware_concurrency());
  // Below ~64K elements per thread the spawn costs more than it saves.
  const uint64_t by_size = std::max<uint64_t>(1, n / (uint64_t{1} << 16));
  return static_cast<unsigned>(std::min<uint64_t>({t, rows, by_size}));
}

// Runs fn(row_begin, row_end, chunk) on `t` contiguous row chunks, chunk i on
// its own thread (the last on the caller). Exceptions are collected per chunk
// and the lowest chunk's is rethrown, so the error reported is the first in
// row order whatever the scheduling.
template <class F>
void parallel_rows(uint64_t rows, unsigned t, F&& fn) {
  if (t <= 1) {
    fn(uint64_t{0}, rows, 0u);
    return;
  }
  const uint64_t chunk = (rows + t - 1) / t;
  std::vector<std::exception_ptr> errors(t);
  std::vector<std::thread> workers;
  workers.reserve(t);
  auto run = [&](unsigned i) {
    const uint64_t r0 = i * chunk, r1 = std::min(rows, r0 + chunk);
    if (r0 >= r1) return;
    try {
      fn(r0, r1, i);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  for (unsigned i = 0; i + 1 < t; ++i) {
    try {
      workers.emplace_back(run, i);
    } catch (const std::system_error&) {
      run(i);  // no thread to be had: do it here
    }
  }
  run(t - 1);
  for (auto& w : workers) w.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// ---- scalar element loops (the reference's encoders) -----------------------------

struct Span {
  float mn, mx;
  bool bad;  // holds NaN or inf
};

Span stats_scalar(const float* x, uint64_t n) {
  Span s{x[0], x[0], false};
  for (uint64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) s.bad = true;
    s.mn = std::min(s.mn, x[i]);
    s.mx = std::max(s.mx, x[i]);
  }
  return s;
}

void encode_scalar(const Plan& p, const GroupParams& g, const float* x, uint8_t* out, uint64_t n) {
  switch (p.kind) {
    case Kind::kInt:
      for (uint64_t i = 0; i < n; ++i) out[i] = encode_int(p, g, x[i]);
      return;
    case Kind::kFp8:
      for (uint64_t i = 0; i < n; ++i) out[i] = encode_fp8(p, g, x[i]);
      return;
    case Kind::kMx:
      for (uint64_t i = 0; i < n; ++i) out[i] = encode_mx(g, x[i], p.mx_dtype);
      return;
  }
}

// ---- AVX2 element loops ----------------------------------------------------------

#ifdef QLOOM_QUANT_HAVE_AVX2

QLOOM_QUANT_AVX2 Span stats_avx2(const float* x, uint64_t n) {
  uint64_t i = 0;
  Span s{x[0], x[0], false};
  if (n >= 16) {
    __m256 mn0 = _mm256_loadu_ps(x), mx0 = mn0, mn1 = mn0, mx1 = mn0;
    __m256i bad = _mm256_setzero_si256();
    const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
    const __m256i max_finite = _mm256_set1_epi32(0x7F7FFFFF);
    for (; i + 16 <= n; i += 16) {
      const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
      mn0 = _mm256_min_ps(mn0, a);
      mx0 = _mm256_max_ps(mx0, a);
      mn1 = _mm256_min_ps(mn1, b);
      mx1 = _mm256_max_ps(mx1, b);
      const __m256i ab = _mm256_and_si256(_mm256_castps_si256(a), abs_mask);
      const __m256i bb = _mm256_and_si256(_mm256_castps_si256(b), abs_mask);
      bad = _mm256_or_si256(bad, _mm256_or_si256(_mm256_cmpgt_epi32(ab, max_finite),
                                                 _mm256_cmpgt_epi32(bb, max_finite)));
    }
    alignas(32) float lo[8], hi[8];
    _mm256_store_ps(lo, _mm256_min_ps(mn0, mn1));
    _mm256_store_ps(hi, _mm256_max_ps(mx0, mx1));
    for (int k = 0; k < 8; ++k) {
      s.mn = std::min(s.mn, lo[k]);
      s.mx = std::max(s.mx, hi[k]);
    }
    s.bad = !_mm256_testz_si256(bad, bad);
  }
  for (; i < n; ++i) {
    if (!std::isfinite(x[i])) s.bad = true;
    s.mn = std::min(s.mn, x[i]);
    s.mx = std::max(s.mx, x[i]);
  }
  return s;
}

// 32 int32 lanes (four vectors, in order) -> 32 bytes in order.
QLOOM_QUANT_AVX2 inline __m256i pack_bytes(__m256i a, __m256i b, __m256i c, __m256i d, bool is_unsigned) {
  const __m256i ab = _mm256_packs_epi32(a, b);  // 32-bit units: a0-3 b0-3 | a4-7 b4-7 (as i16 pairs)
  const __m256i cd = _mm256_packs_epi32(c, d);
  const __m256i abcd = is_unsigned ? _mm256_packus_epi16(ab, cd) : _mm256_packs_epi16(ab, cd);
  return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

QLOOM_QUANT_AVX2 inline __m256i int_codes8(__m256 x, __m256 inv, __m256 zp, __m256 lo, __m256 hi) {
  const __m256 t = _mm256_mul_ps(x, inv);
  __m256 r = _mm256_add_ps(_mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zp);
  r = _mm256_min_ps(_mm256_max_ps(r, lo), hi);
  return _mm256_cvtps_epi32(r);
}

QLOOM_QUANT_AVX2 void encode_int_avx2(const Plan& p, const GroupParams& g, const float* x, uint8_t* out,
                                      uint64_t n) {
  const __m256 inv = _mm256_set1_ps(g.inv_scale), zp = _mm256_set1_ps(g.zero_point);
  const __m256 lo = _mm256_set1_ps(static_cast<float>(p.qmin)), hi = _mm256_set1_ps(static_cast<float>(p.qmax));
  const bool is_unsigned = !p.is_signed;
  uint64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i a = int_codes8(_mm256_loadu_ps(x + i), inv, zp, lo, hi);
    const __m256i b = int_codes8(_mm256_loadu_ps(x + i + 8), inv, zp, lo, hi);
    const __m256i c = int_codes8(_mm256_loadu_ps(x + i + 16), inv, zp, lo, hi);
    const __m256i d = int_codes8(_mm256_loadu_ps(x + i + 24), inv, zp, lo, hi);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), pack_bytes(a, b, c, d, is_unsigned));
  }
  for (; i < n; ++i) out[i] = encode_int(p, g, x[i]);
}

// rC(x / scale) clamped to +-448 into tmp, then convert.h's bulk e4m3 encoder.
QLOOM_QUANT_AVX2 void encode_fp8_avx2(const Plan& p, const GroupParams& g, const float* x, uint8_t* out,
                                      uint64_t n, float* tmp) {
  const __m256 s = _mm256_set1_ps(g.scale);
  const __m256 lo = _mm256_set1_ps(-448.0f), hi = _mm256_set1_ps(448.0f);
  const DType c = p.model_dtype;
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 q = _mm256_div_ps(_mm256_loadu_ps(x + i), s);
    if (c == DType::kBF16) {
      // Round to nearest even at bit 16 (q is never NaN; overflow gives inf).
      const __m256i b = _mm256_castps_si256(q);
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
      const __m256i r = _mm256_add_epi32(b, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), lsb));
      q = _mm256_castsi256_ps(_mm256_and_si256(r, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
    } else if (c == DType::kF16) {
      q = _mm256_cvtph_ps(_mm256_cvtps_ph(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    q = _mm256_min_ps(_mm256_max_ps(q, lo), hi);
    _mm256_storeu_ps(tmp + i, q);
  }
  for (; i < n; ++i) tmp[i] = std::clamp(round_to(c, x[i] / g.scale), -448.0f, 448.0f);
  f32_to_fp8_e4m3(Isa::kAvx2, tmp, out, n);
}

QLOOM_QUANT_AVX2 inline __m256i mx_codes8(__m256 x, __m256 inv) {
  const __m256 q = _mm256_mul_ps(x, inv);  // == x / 2^e exactly (2^-e is exact)
  const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), q);
  // RNE onto {0, .5, 1, 1.5, 2, 3, 4, 6} with saturation: the code is the
  // number of rounding boundaries below |q|; at a tie the boundary counts
  // only when the upper neighbour has the even code.
  const __m256i m1 = _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(0.25f), _CMP_GT_OQ));
  const __m256i m2 = _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(0.75f), _CMP_GE_OQ));
  const __m256i m3 = _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(1.25f), _CMP_GT_OQ));
  const __m256i m4 = _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(1.75f), _CMP_GE_OQ));
  const __m256i m5 = _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(2.5f), _CMP_GT_OQ));
  const __m256i m6 = _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(3.5f), _CMP_GE_OQ));
  const __m256i m7 = _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(5.0f), _CMP_GT_OQ));
  // Each mask is -1 where true: the code is minus their sum.
  const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(m1, m2), _mm256_add_epi32(m3, m4)),
                                       _mm256_add_epi32(_mm256_add_epi32(m5, m6), m7));
  const __m256i code = _mm256_sub_epi32(_mm256_setzero_si256(), sum);
  // Sign bit 3 for negative non-zero codes (zero magnitude is always +0).
  const __m256i neg = _mm256_srli_epi32(_mm256_castps_si256(q), 31);
  const __m256i nonzero = _mm256_xor_si256(_mm256_cmpeq_epi32(code, _mm256_setzero_si256()), _mm256_set1_epi32(-1));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(neg, nonzero), 3);
  return _mm256_or_si256(code, sign);
}

QLOOM_QUANT_AVX2 void encode_mx_avx2(const GroupParams& g, const float* x, uint8_t* out, uint64_t n) {
  const __m256 inv = _mm256_set1_ps(g.inv_scale);
  uint64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i a = mx_codes8(_mm256_loadu_ps(x + i), inv);
    const __m256i b = mx_codes8(_mm256_loadu_ps(x + i + 8), inv);
    const __m256i c = mx_codes8(_mm256_loadu_ps(x + i + 16), inv);
    const __m256i d = mx_codes8(_mm256_loadu_ps(x + i + 24), inv);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), pack_bytes(a, b, c, d, true));
  }
  for (; i < n; ++i) out[i] = encode_mx(g, x[i]);
}

#endif  // QLOOM_QUANT_HAVE_AVX2

bool use_avx2() {
#ifdef QLOOM_QUANT_HAVE_AVX2
  return isa_supported(Isa::kAvx2);
#else
  return false;
#endif
}

Span stats(bool avx2, const float* x, uint64_t n) {
#ifdef QLOOM_QUANT_HAVE_AVX2
  if (avx2) return stats_avx2(x, n);
#endif
  (void)avx2;
  return stats_scalar(x, n);
}

void encode(bool avx2, const Plan& p, const GroupParams& g, const float* x, uint8_t* out, uint64_t n, float* tmp) {
#ifdef QLOOM_QUANT_HAVE_AVX2
  if (avx2) {
    switch (p.kind) {
      case Kind::kInt: return encode_int_avx2(p, g, x, out, n);
      case Kind::kFp8: return encode_fp8_avx2(p, g, x, out, n, tmp);
      case Kind::kMx:
        if (p.mx_dtype != QDtype::kFp4)
          return mx_encode_fp6_block(mx_element(p.mx_dtype), x, g.inv_scale, out, n, true);
        return encode_mx_avx2(g, x, out, n);
    }
  }
#endif
  (void)avx2;
  (void)tmp;
  encode_scalar(p, g, x, out, n);
}

GroupParams params_from_range(const Plan& p, float mn, float mx, std::string_view tensor_name) {
  switch (p.kind) {
    case Kind::kInt: return int_params(p, mn, mx, tensor_name);
    case Kind::kFp8: return fp8_params(p, std::max(-mn, mx), tensor_name);
    case Kind::kMx: break;
  }
  const MxElement& e = mx_element(p.mx_dtype);
  return mx_params(std::max(-mn, mx), e.mbits, e.emax);
}

// The first non-finite element in row-major order (same error as the reference).
[[noreturn]] void report_nonfinite(const float* w, uint64_t rows, uint64_t cols, std::string_view tensor_name) {
  const uint64_t n = rows * cols;
  for (uint64_t i = 0; i < n; ++i)
    if (!std::isfinite(w[i])) throw_nonfinite(tensor_name, i / cols, i % cols, w[i]);
  throw_nonfinite(tensor_name, 0, 0, w[0]);  // unreachable: a chunk saw one
}

}  // namespace

QuantizedTensor quantize_weight(const float* w, uint64_t rows, uint64_t cols, const QuantSpec& spec,
                                DType scale_dtype, std::string_view tensor_name, DType model_dtype,
                                unsigned threads) {
  FpEnvGuard fpenv;
  const Plan plan = make_plan(rows, cols, spec, scale_dtype, model_dtype, tensor_name);
  const Plan& p = plan;
  const bool avx2 = use_avx2();
  const uint64_t n = rows * cols;
  const uint64_t gpr = p.groups_per_row;
  const unsigned t = resolve_threads(threads, rows, n);
  const bool asym = p.kind == Kind::kInt && !p.symmetric;

  // Phase 1: min / max of every group (per-tensor: of every chunk), and
  // whether any element is NaN or inf.
  const uint64_t nstats = p.per_tensor ? t : rows * gpr;
  std::vector<float> mins(nstats), maxs(nstats);
  std::vector<char> bad(t, 0);
  parallel_rows(rows, t, [&](uint64_t r0, uint64_t r1, unsigned ci) {
    FpEnvGuard env;
    if (p.per_tensor) {
      Span acc = stats(avx2, w + r0 * cols, (r1 - r0) * cols);
      mins[ci] = acc.mn;
      maxs[ci] = acc.mx;
      bad[ci] = acc.bad;
      return;
    }
    bool any_bad = false;
    for (uint64_t r = r0; r < r1; ++r)
      for (uint64_t gi = 0; gi < gpr; ++gi) {
        const Span s = stats(avx2, w + r * cols + gi * p.group, p.group);
        mins[r * gpr + gi] = s.mn;
        maxs[r * gpr + gi] = s.mx;
        any_bad |= s.bad;
      }
    bad[ci] = any_bad;
  });
  if (std::any_of(bad.begin(), bad.end(), [](char b) { return b != 0; }))
    report_nonfinite(w, rows, cols, tensor_name);

  QuantizedTensor out;
  out.spec = spec;
  out.shape = {rows, cols};
  out.codes.resize(n);
  out.scale_dtype = p.kind == Kind::kMx ? DType::kE8M0 : scale_dtype;

  GroupParams tensor_params;
  if (p.per_tensor) {
    float mn = mins[0], mx = maxs[0];
    for (uint64_t i = 0; i < nstats; ++i)
      if (i * ((rows + t - 1) / t) < rows) {  // chunks that ran
        mn = std::min(mn, mins[i]);
        mx = std::max(mx, maxs[i]);
      }
    tensor_params = params_from_range(p, mn, mx, tensor_name);
    out.scales = {tensor_params.scale};
    if (asym) out.zero_points = {tensor_params.zp};
  } else {
    out.scales.resize(rows * gpr);
    if (asym) out.zero_points.resize(rows * gpr);
  }

  // Phase 2: scales, zero points and codes.
  parallel_rows(rows, t, [&](uint64_t r0, uint64_t r1, unsigned) {
    FpEnvGuard env;
    // Private copies of what every element loop reads (see dequantize).
    const Plan p = plan;
    const GroupParams tp = tensor_params;
    std::vector<float> tmp(p.kind == Kind::kFp8 ? p.group : 0);
    if (p.per_tensor) {
      for (uint64_t r = r0; r < r1; ++r)
        encode(avx2, p, tp, w + r * cols, out.codes.data() + r * cols, cols, tmp.data());
      return;
    }
    for (uint64_t r = r0; r < r1; ++r)
      for (uint64_t gi = 0; gi < gpr; ++gi) {
        const uint64_t k = r * gpr + gi, off = r * cols + gi * p.group;
        const GroupParams g = params_from_range(p, mins[k], maxs[k], tensor_name);
        out.scales[k] = g.scale;
        if (asym) out.zero_points[k] = g.zp;
        encode(avx2, p, g, w + off, out.codes.data() + off, p.group, tmp.data());
      }
  });
  return out;
}

void dequantize(const QuantizedTensor& t, float* out, unsigned threads) {
  const QuantSpec& spec = t.spec;
  const uint64_t n = t.codes.size();
  if (n == 0) return;
  const uint64_t cols = t.shape.size() == 2 ? t.shape[1] : n;
  const uint64_t rows = n / cols;
  uint64_t group = cols;
  if (spec.qscheme == QScheme::kPerGroup) group = static_cast<uint64_t>(spec.group_size);
  const uint64_t gpr = cols / group;
  const bool per_tensor = spec.qscheme == QScheme::kPerTensor;

  // Code -> value (before scaling), exactly as dequantize_ref reads it.
  float shared_lut[256];
  const bool is_signed_int = spec.dtype == QDtype::kInt8 || spec.dtype == QDtype::kInt4;
  for (int c = 0; c < 256; ++c) {
    const uint8_t b = static_cast<uint8_t>(c);
    switch (spec.dtype) {
      case QDtype::kFp8E4M3: shared_lut[c] = fp8_e4m3_to_float(b); break;
      case QDtype::kFp4:
      case QDtype::kFp6E2M3:
      case QDtype::kFp6E3M2: shared_lut[c] = mx_decode(mx_element(spec.dtype), b); break;
      default: shared_lut[c] = static_cast<float>(is_signed_int ? static_cast<int>(static_cast<int8_t>(b)) : c); break;
    }
  }
  const bool is_int = spec.dtype != QDtype::kFp8E4M3 && !is_mx_element(spec.dtype);
  parallel_rows(rows, resolve_threads(threads, rows, n), [&](uint64_t r0, uint64_t r1, unsigned) {
    FpEnvGuard env;
    // A private copy: reading the caller's table from another thread, next to
    // the caller's busy stack, costs twice the single-threaded time.
    float lut[256];
    std::copy(std::begin(shared_lut), std::end(shared_lut), lut);
    for (uint64_t r = r0; r < r1; ++r)
      for (uint64_t gi = 0; gi < gpr; ++gi) {
        const uint64_t si = per_tensor ? 0 : r * gpr + gi;
        const float s = group_scale(t, si);
        const uint64_t off = r * cols + gi * group;
        const uint8_t* c = t.codes.data() + off;
        float* o = out + off;
        if (is_int) {
          // dequantize_ref computes float(v - zp) * s; v and zp are small
          // integers, so float(v) - float(zp) is that same float exactly.
          const float zp = t.zero_points.empty() ? 0.0f : static_cast<float>(t.zero_points[si]);
          for (uint64_t i = 0; i < group; ++i) o[i] = (lut[c[i]] - zp) * s;
        } else {
          for (uint64_t i = 0; i < group; ++i) o[i] = lut[c[i]] * s;
        }
      }
  });
}

std::vector<float> dequantize(const QuantizedTensor& t, unsigned threads) {
  std::vector<float> out(t.codes.size());
  dequantize(t, out.data(), threads);
  return out;
}

}  // namespace qloom::quant
