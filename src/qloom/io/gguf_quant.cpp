#include "qloom/io/gguf_quant.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/io/gguf_dequant_blocks.h"

namespace qloom::io {
namespace {

using gguf_detail::f16_bits_to_f32;

void put_f16(uint8_t* p, uint16_t h) {
  p[0] = static_cast<uint8_t>(h & 0xFF);
  p[1] = static_cast<uint8_t>(h >> 8);
}

int round_clamp(float v, int lo, int hi) {
  const float r = std::nearbyint(v);
  if (!(r >= static_cast<float>(lo))) return lo;  // NaN too
  if (r > static_cast<float>(hi)) return hi;
  return static_cast<int>(r);
}

// ---- Q8_0 -------------------------------------------------------------------

void q8_0_block(const float* x, uint8_t* out) {
  float amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const uint16_t dh = f32_to_f16_bits(amax / 127.0f);
  const float d = f16_bits_to_f32(dh);
  put_f16(out, dh);
  for (int i = 0; i < 32; ++i) {
    const int q = d == 0 ? 0 : round_clamp(x[i] / d, -127, 127);
    out[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
  }
}

// ---- Q4_K -------------------------------------------------------------------

struct AsymFit {
  float scale = 0, offset = 0;  // y = scale * q - offset, offset >= 0
};

// Least-squares (s, b) of x ~ s*q + b over n values, b <= 0 enforced; the
// squared error of the result.
float refit_asym(const float* x, const int* q, int n, AsymFit& fit) {
  double sq = 0, sqq = 0, sx = 0, sxq = 0;
  for (int i = 0; i < n; ++i) sq += q[i], sqq += double(q[i]) * q[i], sx += x[i], sxq += double(x[i]) * q[i];
  const double det = n * sqq - sq * sq;
  double s = 0, b = 0;
  if (det > 0) {
    s = (n * sxq - sq * sx) / det;
    b = (sx - s * sq) / n;
  }
  if (b > 0 || s < 0) {  // offset must represent a min <= 0
    b = 0;
    s = sqq > 0 ? std::max(0.0, sxq / sqq) : 0;
  }
  fit.scale = static_cast<float>(s);
  fit.offset = static_cast<float>(-b);
  float err = 0;
  for (int i = 0; i < n; ++i) {
    const float e = fit.scale * static_cast<float>(q[i]) - fit.offset - x[i];
    err += e * e;
  }
  return err;
}

AsymFit fit_sub_block_asym(const float* x, int n, int qmax) {
  float lo = 0, hi = 0;
  for (int i = 0; i < n; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  AsymFit best{0, -lo};
  if (hi <= lo) return best;
  float best_err = INFINITY;
  int q[32];
  for (int t = 0; t <= 20; ++t) {
    const float s0 = (hi - lo) / (static_cast<float>(qmax) + 0.1f * static_cast<float>(t - 10));
    for (int i = 0; i < n; ++i) q[i] = round_clamp((x[i] - lo) / s0, 0, qmax);
    AsymFit f;
    const float err = refit_asym(x, q, n, f);
    if (err < best_err) best_err = err, best = f;
  }
  return best;
}

void pack_k_scales(const int sc[8], const int m[8], uint8_t* s) {
  std::memset(s, 0, 12);
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

void q4_k_block(const float* x, uint8_t* out) {
  AsymFit fits[8];
  float max_s = 0, max_m = 0;
  for (int j = 0; j < 8; ++j) {
    fits[j] = fit_sub_block_asym(x + 32 * j, 32, 15);
    max_s = std::max(max_s, fits[j].scale), max_m = std::max(max_m, fits[j].offset);
  }
  const uint16_t dh = f32_to_f16_bits(max_s / 63.0f), mh = f32_to_f16_bits(max_m / 63.0f);
  const float d = f16_bits_to_f32(dh), dmin = f16_bits_to_f32(mh);
  int sc[8], mq[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = d > 0 ? round_clamp(fits[j].scale / d, 0, 63) : 0;
    mq[j] = dmin > 0 ? round_clamp(fits[j].offset / dmin, 0, 63) : 0;
  }
  put_f16(out, dh);
  put_f16(out + 2, mh);
  pack_k_scales(sc, mq, out + 4);
  uint8_t* qs = out + 16;
  std::memset(qs, 0, 128);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32;
    const float S = d * static_cast<float>(sc[j]), M = dmin * static_cast<float>(mq[j]);
    const int q = S > 0 ? round_clamp((x[e] + M) / S, 0, 15) : 0;
    qs[32 * (e / 64) + e % 32] |= static_cast<uint8_t>(q << (4 * ((e % 64) / 32)));
  }
}

// ---- Q6_K -------------------------------------------------------------------

// Symmetric scale of n values, q in [-32, 31]: the extreme value mapped onto
// a few code levels near either end, each least-squares refined.
float fit_sub_block_sym(const float* x, int n) {
  int imax = 0;
  for (int i = 1; i < n; ++i)
    if (std::fabs(x[i]) > std::fabs(x[imax])) imax = i;
  const float ext = x[imax];
  if (ext == 0) return 0;
  float best = 0, best_err = INFINITY;
  int q[16];
  for (int t = 0; t < 16; ++t) {
    const float level = t < 8 ? -32.0f + 0.5f * static_cast<float>(t) : 31.0f - 0.5f * static_cast<float>(t - 8);
    const float s0 = ext / level;
    double sxq = 0, sqq = 0;
    for (int i = 0; i < n; ++i) {
      q[i] = round_clamp(x[i] / s0, -32, 31);
      sxq += double(x[i]) * q[i], sqq += double(q[i]) * q[i];
    }
    const float s = sqq > 0 ? static_cast<float>(sxq / sqq) : 0;
    float err = 0;
    for (int i = 0; i < n; ++i) {
      const float e = s * static_cast<float>(round_clamp(s != 0 ? x[i] / s : 0, -32, 31)) - x[i];
      err += e * e;
    }
    if (err < best_err) best_err = err, best = s;
  }
  return best;
}

void q6_k_block(const float* x, uint8_t* out) {
  float s[16], amax = 0;
  for (int j = 0; j < 16; ++j) s[j] = fit_sub_block_sym(x + 16 * j, 16), amax = std::max(amax, std::fabs(s[j]));
  const uint16_t dh = f32_to_f16_bits(amax / 127.0f);
  const float d = f16_bits_to_f32(dh);
  std::memset(out, 0, 210);
  for (int j = 0; j < 16; ++j) {
    const int sc = d > 0 ? round_clamp(s[j] / d, -128, 127) : 0;
    out[192 + j] = static_cast<uint8_t>(static_cast<int8_t>(sc));
    const float S = d * static_cast<float>(sc);
    for (int e = 16 * j; e < 16 * j + 16; ++e) {
      const int q = (S != 0 ? round_clamp(x[e] / S, -32, 31) : 0) + 32;
      const int h = e / 128, r = e % 128;
      out[64 * h + r % 64] |= static_cast<uint8_t>((q & 15) << (4 * (r / 64)));
      out[128 + 32 * h + r % 32] |= static_cast<uint8_t>((q >> 4) << (2 * (r / 32)));
    }
  }
  put_f16(out + 208, dh);
}

}  // namespace

uint16_t f32_to_f16_bits(float x) {
  uint16_t h = 0;
  f32_to_f16(&x, &h, 1);
  return h;
}

std::vector<std::byte> gguf_quantize(GgmlType type, std::span<const float> x) {
  const GgmlTypeInfo& t = ggml_type_info(type);
  if (x.size() % t.block_elems != 0)
    throw Error(ErrorKind::kUsage, "", std::string(t.name),
                std::to_string(x.size()) + " values are not whole blocks of " + std::to_string(t.block_elems));
  const size_t nb = x.size() / t.block_elems;
  std::vector<std::byte> out(nb * t.block_bytes);
  auto* o = reinterpret_cast<uint8_t*>(out.data());
  switch (type) {
    case GgmlType::kF32: std::memcpy(o, x.data(), out.size()); break;
    case GgmlType::kF16: from_f32(DType::kF16, x.data(), o, x.size()); break;
    case GgmlType::kBF16: from_f32(DType::kBF16, x.data(), o, x.size()); break;
    case GgmlType::kQ8_0: for (size_t b = 0; b < nb; ++b) q8_0_block(x.data() + 32 * b, o + 34 * b); break;
    case GgmlType::kQ4_K: for (size_t b = 0; b < nb; ++b) q4_k_block(x.data() + 256 * b, o + 144 * b); break;
    case GgmlType::kQ6_K: for (size_t b = 0; b < nb; ++b) q6_k_block(x.data() + 256 * b, o + 210 * b); break;
    default:
      throw Error(ErrorKind::kUnsupported, "", std::string(t.name), "qloom does not quantize to this GGUF type",
                  "choose F32, F16, BF16, Q8_0, Q4_K or Q6_K");
  }
  return out;
}

}  // namespace qloom::io
