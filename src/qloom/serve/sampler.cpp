#include "qloom/serve/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace qloom::serve {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// Probabilities of softmax(logits / t), indices sorted by descending
// probability (stable: lower id first on ties).
std::vector<std::pair<int32_t, double>> sorted_probs(std::span<const float> logits, double t) {
  double mx = -INFINITY;
  for (float v : logits) mx = std::max(mx, double(v));
  std::vector<std::pair<int32_t, double>> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double e = std::exp((double(logits[i]) - mx) / t);
    p[i] = {int32_t(i), e};
    sum += e;
  }
  for (auto& [id, v] : p) v /= sum;
  std::stable_sort(p.begin(), p.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return p;
}

}  // namespace

Rng::Rng(uint64_t seed) {
  for (uint64_t& w : s_) w = splitmix64(seed);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

int32_t argmax(std::span<const float> logits) {
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;
  return int32_t(best);
}

std::vector<int32_t> top_k_ids(std::span<const float> logits, int k) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  const auto n = std::min<size_t>(size_t(std::max(k, 0)), ids.size());
  std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(n), ids.end(), [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
  });
  ids.resize(n);
  return ids;
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (params_.temperature <= 0) return argmax(logits);
  std::vector<std::pair<int32_t, double>> p = sorted_probs(logits, params_.temperature);
  size_t keep = 0;
  double mass = 0;
  while (keep < p.size() && (keep == 0 || mass < params_.top_p)) mass += p[keep++].second;
  const double u = rng_.uniform() * mass;
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += p[i].second;
    if (u < acc) return p[i].first;
  }
  return p[keep - 1].first;
}

}  // namespace qloom::serve
