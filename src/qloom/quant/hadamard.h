// Hadamard rotations as AMD Quark 0.13 builds them (quark/torch/algorithm/
// rotation/hadamard.py, rotation_utils.py get_rotation_matrix): for a size n
// the orthogonal matrix
//
//   R_n = kron(H_K, H_m) / sqrt(n),   n = K * m, m a power of two,
//
// H_m the Sylvester matrix (scipy.linalg.hadamard: H[i][j] =
// (-1)^popcount(i & j)) and H_K one of Quark's known orders, chosen as Quark
// chooses it: n a power of two -> K = 1; else the first K of
// 172, 156, 140, 108, 60, 52, 40, 36, 28, 20, 12 with n % K == 0 and n / K a
// power of two. qloom constructs the H_K Quark uses (they are the classical
// constructions, element for element):
//   12, 20, 60, 108, 140  Paley I for q = K - 1 (prime, q = 3 mod 4):
//                         H = I + S, S[0][j] = -1, S[i][0] = +1 (i, j >= 1),
//                         S[i][j] = chi(i - j) (chi: the quadratic character
//                         mod q, chi(0) = 0)
//   28, 36                Paley II for q = K/2 - 1 (13, 17; q = 1 mod 4):
//                         C = [[0, 1^T], [1, Q]], Q[i][j] = chi(j - i),
//                         H = [[C + I, C - I], [C - I, -C - I]]
//   40                    kron([[1, 1], [1, -1]], H_20)
// The Williamson matrices (52, 156, 172) are not constructed: a size whose
// first match is one of them is refused (kUnsupported).
//
// rotate_rows computes y = x R_n for every row x (Quark's rotate_with_size:
// the last dimension times the rotation), in double: a fast Walsh-Hadamard
// transform on the K sub-rows of length m, then the K x K mix by H_K^T, then
// the scale (x kron(A, B) = vec(A^T X B) with X the row as a K x m matrix).
// rotate_rows_ref is the plain dense product with the same matrix. Both are
// deterministic; they differ by double rounding only (tested).
#pragma once

#include <cstdint>
#include <vector>

namespace qloom::quant {

// The factorization Quark uses for size n; throws Error(kUnsupported) when
// Quark has no (or qloom does not construct Quark's) Hadamard matrix of
// that size, Error(kUsage) for n < 1.
struct HadamardSize {
  int64_t n = 0, k = 1, m = 0;  // n = k * m
};
HadamardSize hadamard_size(int64_t n);

// H_K (k x k, +1 / -1, row-major) for one of the constructed orders k
// (1, 2^p, 12, 20, 28, 36, 40, 60, 108, 140); Error(kUnsupported) otherwise.
std::vector<int8_t> hadamard_k(int64_t k);

// The dense +1 / -1 matrix kron(H_K, H_m) of size n (row-major, n x n).
std::vector<int8_t> hadamard_matrix(int64_t n);

// 1 / sqrt(n) as Quark's float64 code computes it.
double hadamard_scale(int64_t n);

// x: rows x n (row-major), replaced by x R_n row by row. Fast path.
void rotate_rows(double* x, int64_t rows, int64_t n);
// The same with the dense matrix (reference; O(n^2) per row).
void rotate_rows_ref(double* x, int64_t rows, int64_t n);

}  // namespace qloom::quant
