#include "qloom/eval/py_random.h"

#include <cmath>
#include <set>

#include "qloom/core/error.h"

namespace qloom::eval {
namespace {
constexpr int kN = 624, kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfU, kUpper = 0x80000000U, kLower = 0x7fffffffU;
}  // namespace

PyRandom::PyRandom(uint64_t seed) {
  // init_genrand(19650218) then init_by_array(key) (CPython _randommodule.c).
  mt_[0] = 19650218U;
  for (int i = 1; i < kN; ++i)
    mt_[i] = 1812433253U * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + uint32_t(i);
  std::vector<uint32_t> key;
  for (uint64_t s = seed; s != 0; s >>= 32) key.push_back(uint32_t(s & 0xffffffffU));
  if (key.empty()) key.push_back(0);
  const int key_len = int(key.size());
  int i = 1, j = 0;
  for (int k = kN > key_len ? kN : key_len; k; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525U)) + key[size_t(j)] + uint32_t(j);
    ++i;
    ++j;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
    if (j >= key_len) j = 0;
  }
  for (int k = kN - 1; k; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941U)) - uint32_t(i);
    ++i;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000U;
  mti_ = kN;
}

uint32_t PyRandom::genrand_uint32() {
  if (mti_ >= kN) {
    int kk = 0;
    for (; kk < kN - kM; ++kk) {
      const uint32_t y = (mt_[kk] & kUpper) | (mt_[kk + 1] & kLower);
      mt_[kk] = mt_[kk + kM] ^ (y >> 1) ^ ((y & 1U) ? kMatrixA : 0U);
    }
    for (; kk < kN - 1; ++kk) {
      const uint32_t y = (mt_[kk] & kUpper) | (mt_[kk + 1] & kLower);
      mt_[kk] = mt_[kk + (kM - kN)] ^ (y >> 1) ^ ((y & 1U) ? kMatrixA : 0U);
    }
    const uint32_t y = (mt_[kN - 1] & kUpper) | (mt_[0] & kLower);
    mt_[kN - 1] = mt_[kM - 1] ^ (y >> 1) ^ ((y & 1U) ? kMatrixA : 0U);
    mti_ = 0;
  }
  uint32_t y = mt_[size_t(mti_++)];
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680U;
  y ^= (y << 15) & 0xefc60000U;
  y ^= (y >> 18);
  return y;
}

uint32_t PyRandom::getrandbits(int k) { return genrand_uint32() >> (32 - k); }

uint64_t PyRandom::randbelow(uint64_t n) {
  int k = 0;  // n.bit_length()
  for (uint64_t v = n; v; v >>= 1) ++k;
  if (n == 0 || k > 32) throw Error(ErrorKind::kInternal, "", "", "randbelow out of range");
  uint64_t r = getrandbits(k);
  while (r >= n) r = getrandbits(k);
  return r;
}

std::vector<uint64_t> PyRandom::sample(uint64_t n, uint64_t k) {
  if (k > n) throw Error(ErrorKind::kInternal, "", "", "sample larger than population");
  std::vector<uint64_t> result(k);
  uint64_t setsize = 21;
  if (k > 5) setsize += uint64_t(std::pow(4.0, std::ceil(std::log(double(k * 3)) / std::log(4.0))));
  if (n <= setsize) {
    std::vector<uint64_t> pool(n);
    for (uint64_t i = 0; i < n; ++i) pool[i] = i;
    for (uint64_t i = 0; i < k; ++i) {
      const uint64_t j = randbelow(n - i);
      result[i] = pool[j];
      pool[j] = pool[n - i - 1];
    }
  } else {
    std::set<uint64_t> selected;
    for (uint64_t i = 0; i < k; ++i) {
      uint64_t j = randbelow(n);
      while (selected.count(j)) j = randbelow(n);
      selected.insert(j);
      result[i] = j;
    }
  }
  return result;
}

}  // namespace qloom::eval
