#include "qloom/quant/hadamard.h"

#include <cmath>
#include <string>

#include "qloom/core/error.h"

namespace qloom::quant {
namespace {

bool is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// Quark's search order over its known orders (hadamard.py's table order).
constexpr int64_t kQuarkOrders[] = {172, 156, 140, 108, 60, 52, 40, 36, 28, 20, 12};

bool constructed(int64_t k) {
  return k == 12 || k == 20 || k == 28 || k == 36 || k == 40 || k == 60 || k == 108 || k == 140;
}

// The quadratic character mod the prime q.
int chi(int64_t a, int64_t q) {
  a %= q;
  if (a < 0) a += q;
  if (a == 0) return 0;
  int64_t r = 1, b = a, e = (q - 1) / 2;
  while (e > 0) {
    if (e & 1) r = r * b % q;
    b = b * b % q;
    e >>= 1;
  }
  return r == 1 ? 1 : -1;
}

std::vector<int8_t> paley1(int64_t q) {
  const int64_t n = q + 1;
  std::vector<int8_t> h(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int s = 0;
      if (i == 0 && j > 0) s = -1;
      else if (j == 0 && i > 0) s = 1;
      else if (i > 0 && j > 0) s = chi(i - j, q);
      h[static_cast<size_t>(i * n + j)] = static_cast<int8_t>(s + (i == j ? 1 : 0));
    }
  return h;
}

std::vector<int8_t> paley2(int64_t q) {
  const int64_t c = q + 1, n = 2 * c;
  auto conf = [q](int64_t i, int64_t j) -> int {
    if (i == 0 && j == 0) return 0;
    if (i == 0 || j == 0) return 1;
    return chi(j - i, q);
  };
  std::vector<int8_t> h(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < c; ++i)
    for (int64_t j = 0; j < c; ++j) {
      const int cij = conf(i, j), d = i == j ? 1 : 0;
      h[static_cast<size_t>(i * n + j)] = static_cast<int8_t>(cij + d);
      h[static_cast<size_t>(i * n + j + c)] = static_cast<int8_t>(cij - d);
      h[static_cast<size_t>((i + c) * n + j)] = static_cast<int8_t>(cij - d);
      h[static_cast<size_t>((i + c) * n + j + c)] = static_cast<int8_t>(-cij - d);
    }
  return h;
}

std::vector<int8_t> sylvester(int64_t m) {
  std::vector<int8_t> h(static_cast<size_t>(m * m));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < m; ++j)
      h[static_cast<size_t>(i * m + j)] = (__builtin_popcountll(static_cast<uint64_t>(i & j)) & 1) ? -1 : 1;
  return h;
}

// In-place unnormalized Walsh-Hadamard transform of x[0..m) (m a power of
// two, natural order): x <- x H_m.
void fwht(double* x, int64_t m) {
  for (int64_t h = 1; h < m; h *= 2)
    for (int64_t i = 0; i < m; i += 2 * h)
      for (int64_t j = i; j < i + h; ++j) {
        const double a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
}

}  // namespace

HadamardSize hadamard_size(int64_t n) {
  if (n < 1) throw Error(ErrorKind::kUsage, "", "rotation size", "a Hadamard rotation needs a size >= 1", "");
  if (is_pow2(n)) return {n, 1, n};
  for (int64_t k : kQuarkOrders) {
    if (n % k != 0 || !is_pow2(n / k)) continue;
    if (!constructed(k))
      throw Error(ErrorKind::kUnsupported, "", "rotation size " + std::to_string(n),
                  "Quark rotates size " + std::to_string(n) + " with its Williamson Hadamard matrix of order " +
                      std::to_string(k) + ", which qloom does not construct",
                  "use a rotation_size that is a power of two (dividing the hidden size), or omit rotation");
    return {n, k, n / k};
  }
  throw Error(ErrorKind::kUnsupported, "", "rotation size " + std::to_string(n),
              "Quark has no Hadamard matrix of size " + std::to_string(n) +
                  " (it needs a power of two times 12, 20, 28, 36, 40, 52, 60, 108, 140, 156 or 172)",
              "set rotation_size to a power of two dividing the dimension");
}

std::vector<int8_t> hadamard_k(int64_t k) {
  if (is_pow2(k)) return sylvester(k);
  switch (k) {
    case 12: return paley1(11);
    case 20: return paley1(19);
    case 60: return paley1(59);
    case 108: return paley1(107);
    case 140: return paley1(139);
    case 28: return paley2(13);
    case 36: return paley2(17);
    case 40: {
      const std::vector<int8_t> h20 = paley1(19);
      std::vector<int8_t> h(40 * 40);
      for (int64_t i = 0; i < 40; ++i)
        for (int64_t j = 0; j < 40; ++j) {
          const int sign = (i >= 20 && j >= 20) ? -1 : 1;
          h[static_cast<size_t>(i * 40 + j)] = static_cast<int8_t>(sign * h20[static_cast<size_t>((i % 20) * 20 + j % 20)]);
        }
      return h;
    }
    default:
      throw Error(ErrorKind::kUnsupported, "", "Hadamard order " + std::to_string(k),
                  "qloom constructs Hadamard matrices of orders 2^p, 12, 20, 28, 36, 40, 60, 108 and 140 only", "");
  }
}

std::vector<int8_t> hadamard_matrix(int64_t n) {
  const HadamardSize s = hadamard_size(n);
  const std::vector<int8_t> a = hadamard_k(s.k), b = sylvester(s.m);
  std::vector<int8_t> h(static_cast<size_t>(n * n));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < n; ++c)
      h[static_cast<size_t>(r * n + c)] = static_cast<int8_t>(a[static_cast<size_t>((r / s.m) * s.k + c / s.m)] *
                                                             b[static_cast<size_t>((r % s.m) * s.m + c % s.m)]);
  return h;
}

double hadamard_scale(int64_t n) { return 1.0 / std::sqrt(static_cast<double>(n)); }

void rotate_rows(double* x, int64_t rows, int64_t n) {
  const HadamardSize s = hadamard_size(n);
  const double scale = hadamard_scale(n);
  const std::vector<int8_t> a = s.k > 1 ? hadamard_k(s.k) : std::vector<int8_t>{};
  std::vector<double> mixed(s.k > 1 ? static_cast<size_t>(n) : 0);
  for (int64_t r = 0; r < rows; ++r) {
    double* row = x + r * n;
    for (int64_t b = 0; b < s.k; ++b) fwht(row + b * s.m, s.m);
    if (s.k > 1) {
      // y[k, :] = sum_i A[i][k] * X[i, :]
      for (int64_t k = 0; k < s.k; ++k) {
        double* out = mixed.data() + k * s.m;
        for (int64_t j = 0; j < s.m; ++j) out[j] = 0.0;
        for (int64_t i = 0; i < s.k; ++i) {
          const double* in = row + i * s.m;
          if (a[static_cast<size_t>(i * s.k + k)] > 0)
            for (int64_t j = 0; j < s.m; ++j) out[j] += in[j];
          else
            for (int64_t j = 0; j < s.m; ++j) out[j] -= in[j];
        }
      }
      for (int64_t j = 0; j < n; ++j) row[j] = mixed[static_cast<size_t>(j)] * scale;
    } else {
      for (int64_t j = 0; j < n; ++j) row[j] *= scale;
    }
  }
}

void rotate_rows_ref(double* x, int64_t rows, int64_t n) {
  const std::vector<int8_t> h = hadamard_matrix(n);
  const double scale = hadamard_scale(n);
  std::vector<double> y(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    double* row = x + r * n;
    for (int64_t c = 0; c < n; ++c) {
      double acc = 0.0;
      for (int64_t i = 0; i < n; ++i) acc += row[i] * (h[static_cast<size_t>(i * n + c)] * scale);
      y[static_cast<size_t>(c)] = acc;
    }
    for (int64_t c = 0; c < n; ++c) row[c] = y[static_cast<size_t>(c)];
  }
}

}  // namespace qloom::quant
