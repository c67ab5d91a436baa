// linear(): dispatch to the fastest measured path (see gemm_dispatch.h).
// Parallelism: every path splits the output columns over `pool` (each
// thread reads its own rows of W once; x is shared and read-only).
//
// Measured on the dev machine (AMD EPYC Zen 4 VM, 2 cores, avx512 +
// avx512_bf16; OpenBLAS 0.3.21 DYNAMIC_ARCH picks its "Cooperlake" AVX-512
// kernels), 2 threads, GFLOP/s = 2·rows·in·out / time, best of 20
// interleaved calls per path in a quiet moment (load < 1; the machine is
// shared, figures taken under load were up to 2x lower and noisier):
//
//   shape (rows, in x out)   weights  avx512-gemv  avx512-gemm  openblas
//   decode 1, 768x768        f32          36           9          35
//                            bf16         44           9          17
//   decode 1, 768x2048       f32          39          11          36
//                            bf16         44          11          26
//   decode 1, 2048x768       f32          36          10          37
//                            bf16         43          10          23
//   4, 768x2048              f32         113          41          48
//                            bf16        118          44          80
//   16, 768x2048             f32         174         107         116
//                            bf16        181         108         101
//   64, 768x2048             f32         196         164         174
//                            bf16        203         168         159
//   128, 768x2048            f32         192         183         189
//                            bf16        205         188         176
//   256, 768x2048            f32         197         187         195
//                            bf16        204         190         185
//   prefill 512, 768x768     f32         202         206         204
//                            bf16        209         208         190
//   prefill 512, 768x2048    f32         194         189         199
//                            bf16        189         184         183
//   prefill 512, 2048x768    f32         160         203         193
//                            bf16        211         204         184
// (~200 GFLOP/s is the 2-core FMA peak. Decode is memory-bound; OpenBLAS BF16
// must widen W to f32 first, so it loses most there.)
//
// Choice (gemm_auto_path): rows < 128 -> own GEMV kernel (decode and small
// batches: no packing, W streamed once per 4 rows); rows >= 128 -> own packed
// GEMM. Above 128 rows all three are within ~5% on these shapes except
// 2048x768 F32, where the GEMV kernel drops; the packed GEMM keeps its cache
// blocking for larger models, where re-streaming W per 4 rows would hit DRAM.
// OpenBLAS is never auto-picked (no faster on any class, slower on BF16 and
// small batches); it stays available as GemmPath::kBlas. Without AVX-512 the
// same split uses the AVX2 kernels (not measured against OpenBLAS's Haswell
// kernels).
#include "qloom/engine/gemm_dispatch.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/engine/gemm_kernels.h"
#include "qloom/engine/native/qlinear.h"

namespace qloom::engine {
namespace {

using detail::GemmKernelSet;

// Work (multiply-adds) below which a call runs on the calling thread only.
constexpr int64_t kMinParallelMacs = int64_t{1} << 16;
// From this many rows on, the packed GEMM; below, the GEMV kernel.
constexpr int64_t kGemmMinRows = 128;

float* scratch(size_t floats) {
  thread_local std::vector<float> buf;
  if (buf.size() < floats + 16) buf.resize(floats + 16);
  auto p = reinterpret_cast<uintptr_t>(buf.data());
  return reinterpret_cast<float*>((p + 63) & ~uintptr_t{63});
}

const void* weight_data(const LinearWeight& w) {
  return w.type == WeightType::kF32 ? static_cast<const void*>(w.f32.data()) : w.bf16.data();
}

float weight_at(const LinearWeight& w, int64_t o, int64_t c) {
  return w.type == WeightType::kF32 ? w.f32[static_cast<size_t>(o * w.in + c)] : w.at(o, c);
}

// The GEMV kernels' canonical order (gemm_kernels.inc, gemv_tile): 16
// partial FMA chains (k = l mod 16, the last chunk zero-padded) and a fixed
// tree.
float gemv_order_dot(const float* xr, const LinearWeight& w, int64_t o) {
  float p[16] = {};
  for (int64_t k0 = 0; k0 < w.in; k0 += 16)
    for (int64_t l = 0; l < 16; ++l) {
      const int64_t k = k0 + l;
      p[l] = k < w.in ? std::fma(xr[k], weight_at(w, o, k), p[l]) : std::fma(0.0f, 0.0f, p[l]);
    }
  float t[8], q[4];
  for (int i = 0; i < 8; ++i) t[i] = p[i] + p[i + 8];
  for (int i = 0; i < 4; ++i) q[i] = t[i] + t[i + 4];
  return (w.bias.empty() ? 0.0f : w.bias[static_cast<size_t>(o)]) + ((q[0] + q[2]) + (q[1] + q[3]));
}

// The packed GEMM kernels' order (gemm_kernels.inc, micro): one FMA chain
// over k starting from the bias.
float gemm_order_dot(const float* xr, const LinearWeight& w, int64_t o) {
  float acc = w.bias.empty() ? 0.0f : w.bias[static_cast<size_t>(o)];
  for (int64_t k = 0; k < w.in; ++k) acc = std::fma(xr[k], weight_at(w, o, k), acc);
  return acc;
}

// Columns [n0, n1) of the contract in exactly the order the SIMD kernels of
// the same row count use (std::fma: one rounding, like theirs), so
// QLOOM_MAX_ISA=scalar, avx2 and avx512 all give the same bits.
void scalar_cols(const float* x, int64_t rows, const LinearWeight& w, int64_t n0, int64_t n1, float* y) {
  const bool gemv = rows < kGemmMinRows;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * w.in;
    for (int64_t o = n0; o < n1; ++o) y[r * w.out + o] = gemv ? gemv_order_dot(xr, w, o) : gemm_order_dot(xr, w, o);
  }
}

const GemmKernelSet* kernels_for(GemmPath path) {
  switch (path) {
    case GemmPath::kAvx2Gemv:
    case GemmPath::kAvx2Gemm: return isa_supported(Isa::kAvx2) ? detail::gemm_kernels_avx2() : nullptr;
    case GemmPath::kAvx512Gemv:
    case GemmPath::kAvx512Gemm:
      return isa_supported(Isa::kAvx512) ? detail::gemm_kernels_avx512() : nullptr;
    default: return nullptr;
  }
}

// Splits [0, n) columns in blocks of `align` over the pool.
template <class F>
void over_columns(ThreadPool& pool, int64_t out, int64_t align, int64_t macs_per_col, F&& body) {
  const int64_t blocks = (out + align - 1) / align;
  const int64_t min_blocks = std::max<int64_t>(1, kMinParallelMacs / std::max<int64_t>(1, macs_per_col * align));
  pool.parallel_for(
      blocks, [&](int64_t b, int64_t e) { body(b * align, std::min(out, e * align)); }, min_blocks);
}

}  // namespace

const char* gemm_path_name(GemmPath path) {
  switch (path) {
    case GemmPath::kAuto: return "auto";
    case GemmPath::kScalar: return "scalar";
    case GemmPath::kAvx2Gemv: return "avx2-gemv";
    case GemmPath::kAvx2Gemm: return "avx2-gemm";
    case GemmPath::kAvx512Gemv: return "avx512-gemv";
    case GemmPath::kAvx512Gemm: return "avx512-gemm";
    case GemmPath::kBlas: return "openblas";
  }
  return "?";
}

bool gemm_path_available(GemmPath path) {
  switch (path) {
    case GemmPath::kAuto:
    case GemmPath::kScalar:
    case GemmPath::kBlas: return true;
    default: return kernels_for(path) != nullptr;
  }
}

GemmPath gemm_auto_path(int64_t rows, int64_t in, int64_t out, WeightType type) {
  (void)in, (void)out, (void)type;  // the measured split depends on rows only
  const bool avx512 = isa_supported(Isa::kAvx512), avx2 = isa_supported(Isa::kAvx2);
  if (!avx2) return GemmPath::kScalar;
  if (rows < kGemmMinRows) return avx512 ? GemmPath::kAvx512Gemv : GemmPath::kAvx2Gemv;
  return avx512 ? GemmPath::kAvx512Gemm : GemmPath::kAvx2Gemm;
}

void linear_path(GemmPath path, const float* x, int64_t rows, const LinearWeight& w, float* y,
                 ThreadPool& pool) {
  if (path == GemmPath::kAuto) path = gemm_auto_path(rows, w.in, w.out, w.type);
  if (!gemm_path_available(path))
    throw Error(ErrorKind::kUnsupported, "", "", std::string("GEMM path ") + gemm_path_name(path) +
                " is not available on this CPU (or QLOOM_MAX_ISA caps it)", "use GemmPath::kAuto");
  if (rows <= 0 || w.out <= 0) return;
  const int64_t macs_per_col = rows * std::max<int64_t>(1, w.in);
  switch (path) {
    case GemmPath::kScalar:
      over_columns(pool, w.out, 1, macs_per_col,
                   [&](int64_t n0, int64_t n1) { scalar_cols(x, rows, w, n0, n1, y); });
      return;
    case GemmPath::kBlas:
      over_columns(pool, w.out, 16, macs_per_col, [&](int64_t n0, int64_t n1) {
        float* buf = w.type == WeightType::kBF16 ? scratch(detail::blas_pack_floats(w.in)) : nullptr;
        detail::gemm_blas(x, rows, w, n0, n1, y, buf);
      });
      return;
    default: break;
  }
  const GemmKernelSet* k = kernels_for(path);
  if (path == GemmPath::kAvx2Gemv || path == GemmPath::kAvx512Gemv) {
    over_columns(pool, w.out, 4, macs_per_col,
                 [&](int64_t n0, int64_t n1) { k->gemv(x, rows, w, n0, n1, y); });
  } else {
    const PackedPanels* pk = w.packed.get();
    const bool use = pk && pk->set == k && pk->out == w.out && pk->in == w.in && pk->type == w.type &&
                     pk->source == weight_data(w);
    over_columns(pool, w.out, k->nr, macs_per_col, [&](int64_t n0, int64_t n1) {
      k->gemm(x, rows, w, n0, n1, y, scratch(k->pack_floats(n1 - n0)), use ? pk->data.data() : nullptr);
    });
  }
}

void linear(const float* x, int64_t rows, const LinearWeight& w, float* y, ThreadPool& pool) {
  if (w.native) return w.native->run(x, rows, w.bias.empty() ? nullptr : w.bias.data(), y, pool);
  linear_path(GemmPath::kAuto, x, rows, w, y, pool);
}

void prepack(LinearWeight& w) {
  w.packed.reset();
  if (w.native) return;  // native kernels lay W out when built
  const GemmPath path = gemm_auto_path(kGemmMinRows, w.in, w.out, w.type);
  const GemmKernelSet* k = kernels_for(path);
  if (k == nullptr || w.in <= 0 || w.out <= 0) return;
  auto p = std::make_shared<PackedPanels>();
  p->set = k;
  p->out = w.out;
  p->in = w.in;
  p->type = w.type;
  p->source = weight_data(w);
  p->data.resize(k->packed_floats(w));
  k->pack(w, p->data.data());
  w.packed = std::move(p);
}

}  // namespace qloom::engine
