// Helpers for the engine tests: the golden fixtures written by
// scripts/goldens/engine_fixtures.py (tests/data/engine/<arch>/ with
// reference.safetensors) and a comparison of logits against them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "qloom/io/safetensors_reader.h"

namespace qloom::test {

inline std::filesystem::path engine_data_dir() {
  return std::filesystem::path(QLOOM_TEST_DATA_DIR) / "engine";
}

inline std::vector<float> read_f32(const io::SafetensorsFile& f, const char* name) {
  io::TensorView v = f.view(name);
  std::vector<float> out(v.numel());
  std::memcpy(out.data(), v.data.data(), v.nbytes());
  return out;
}

inline std::vector<int32_t> read_i32(const io::SafetensorsFile& f, const char* name) {
  io::TensorView v = f.view(name);
  std::vector<int32_t> out(v.numel());
  std::memcpy(out.data(), v.data.data(), v.nbytes());
  return out;
}

struct Reference {
  std::vector<int32_t> tokens_long, tokens_short;
  std::vector<float> logits_long, logits_short;
};

inline Reference read_reference(const std::filesystem::path& dir) {
  io::SafetensorsFile f = io::SafetensorsFile::open(dir / "reference.safetensors");
  return {read_i32(f, "tokens_long"), read_i32(f, "tokens_short"), read_f32(f, "logits_long"),
          read_f32(f, "logits_short")};
}

// Errors of `got` against `ref` (same length). scale = max |ref|;
// rel = max_abs / max(1, scale), the error relative to the logit scale.
struct LogitDiff {
  double max_abs = 0.0, scale = 0.0;
  double rel() const { return max_abs / std::max(1.0, scale); }
};

inline LogitDiff compare_logits(const float* got, const float* ref, size_t n) {
  LogitDiff d;
  for (size_t i = 0; i < n; ++i) {
    d.max_abs = std::max(d.max_abs, std::fabs(static_cast<double>(got[i]) - ref[i]));
    d.scale = std::max(d.scale, std::fabs(static_cast<double>(ref[i])));
  }
  return d;
}

}  // namespace qloom::test
