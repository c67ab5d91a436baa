// serve::Sampler — picks the next token from a logits row.
//   temperature 0: greedy, the first maximum (as eval::generate_greedy).
//   temperature > 0: softmax(logits / temperature) in double, cut to the
//   smallest set of most likely tokens whose probability reaches top_p (ties
//   by lower id first; at least one token), renormalised, drawn with a
//   per-request xoshiro256** generator seeded from `seed` through splitmix64.
// The same seed, prompt and parameters give the same tokens on every run and
// platform (no std:: distributions). A request without "seed" gets one from
// std::random_device (request.h), echoed in its response.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace qloom::serve {

struct SamplingParams {
  double temperature = 1.0;
  double top_p = 1.0;
  uint64_t seed = 0;
};

// xoshiro256** (Blackman & Vigna), state from splitmix64(seed).
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  double uniform();  // [0, 1), 53 random bits

 private:
  std::array<uint64_t, 4> s_{};
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p) : params_(p), rng_(p.seed) {}
  int32_t sample(std::span<const float> logits);

 private:
  SamplingParams params_;
  Rng rng_;
};

// The first index of the maximum.
int32_t argmax(std::span<const float> logits);

// The k most likely ids, most likely first (ties: lower id first).
std::vector<int32_t> top_k_ids(std::span<const float> logits, int k);

}  // namespace qloom::serve
