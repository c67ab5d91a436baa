// PyRandom: CPython's random.Random, bit-exact for what lm-eval's few-shot
// sampler uses: Random(int seed) (MT19937 init_by_array over the seed's
// 32-bit words), getrandbits(k <= 32), _randbelow (getrandbits rejection) and
// sample(population_size, k) returning the chosen indices (CPython
// Lib/random.py Random.sample: a pool when n <= setsize, else a set of
// selected indices with re-draws).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace qloom::eval {

class PyRandom {
 public:
  explicit PyRandom(uint64_t seed);
  uint32_t genrand_uint32();
  uint32_t getrandbits(int k);  // 1 <= k <= 32
  uint64_t randbelow(uint64_t n);  // n >= 1, n < 2^32
  // Indices of random.sample(range(n), k).
  std::vector<uint64_t> sample(uint64_t n, uint64_t k);

 private:
  std::array<uint32_t, 624> mt_{};
  int mti_ = 625;
};

}  // namespace qloom::eval
