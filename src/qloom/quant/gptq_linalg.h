// GPTQ's dense linear algebra with a fixed reduction order (no BLAS, no
// LAPACK): the Hessian's Σ x xᵀ, the Cholesky factorization, the inverse of
// a lower-triangular factor and GPTQ's lazy block update.
//
// The order is part of the contract: every output element is ONE chain of
// fused multiply-adds over k in increasing order, starting from the value
// the reference below starts from (each `*_ref` is that chain written out as
// a plain loop with std::fma). The blocked, threaded, SIMD versions cut the
// work into tiles and threads but never reorder a chain, and an FMA rounds
// once whatever the ISA (AVX2, AVX-512 or std::fma), so their output is
// bitwise equal to the reference for every thread count, ISA cap
// (QLOOM_MAX_ISA) and machine. tests/quant/gptq_linalg_test.cpp checks
// exactly that (random, odd sizes, tiny / huge values, ill-conditioned).
//
// Matrices are row-major; `ld` is the row stride. `pool` may be nullptr
// (single-threaded).
#pragma once

#include <cstdint>

#include "qloom/core/thread_pool.h"

namespace qloom::quant::linalg {

// C[i, j] = fma-chain over r = 0..rows-1 of X[r, i] · X[r, j], starting from
// C[i, j], for j >= i (the upper triangle; the strict lower one is not
// touched). X [rows, n], C [n, n] (ld n).
void syrk_upper_add(const double* X, int64_t rows, int64_t n, double* C, ThreadPool* pool);
void syrk_upper_add_ref(const double* X, int64_t rows, int64_t n, double* C);
// The same chain in float (HessianAccumulator's per-block sums).
void syrk_upper_add(const float* X, int64_t rows, int64_t n, float* C, ThreadPool* pool);
void syrk_upper_add_ref(const float* X, int64_t rows, int64_t n, float* C);

// In place: the lower triangle (with the diagonal) of A [n, n] becomes L with
// A = L Lᵀ (A's values are read from the lower triangle only). For column j:
//   d = A[j,j] - Σ_{k<j} L[j,k]²  (chain: d = fma(-L[j,k], L[j,k], d)),
//   L[j,j] = sqrt(d), L[i,j] = (A[i,j] - Σ_{k<j} L[i,k] L[j,k]) / L[j,j].
// Returns false when a pivot d is not > 0 or not finite (the lower triangle
// is then partly overwritten). The strict upper triangle is never written.
bool cholesky_lower(double* A, int64_t n, ThreadPool* pool);
bool cholesky_lower_ref(double* A, int64_t n);

// In place: the lower triangle of A (an invertible lower-triangular L, finite)
// becomes M = L^-1, and the strict upper triangle is set to 0. For row i:
//   M[i,j] = -(Σ_{k=j}^{i-1} L[i,k] M[k,j]) / L[i,i]  (chain from +0, j < i),
//   M[i,i] = 1 / L[i,i].
void invert_lower(double* A, int64_t n, ThreadPool* pool);
void invert_lower_ref(double* A, int64_t n);

// C[r, c] = fma-chain over k = 0..K-1 of -A[r, k] · B[k, c], starting from
// C[r, c]: C -= A · B for A [m, K] (lda), B [K, n] (ldb), C [m, n] (ldc).
void gemm_sub(int64_t m, int64_t n, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
              int64_t ldc, ThreadPool* pool);
void gemm_sub_ref(int64_t m, int64_t n, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                  float* C, int64_t ldc);

// The kernel set the optimized versions use now ("avx512", "avx2" or
// "scalar": the best QLOOM_MAX_ISA allows); for tests and logs.
const char* kernel_isa();

}  // namespace qloom::quant::linalg
