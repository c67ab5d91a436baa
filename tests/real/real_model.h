// The real-model tier's shared pieces: where the converted SmolLM2-135M lives
// (QLOOM_REAL_MODEL_DIR, set by tests/real/CMakeLists.txt), its goldens
// (tests/data/real, scripts/goldens/real_smollm2.py), and running the CLI with
// a JSON result.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "real/artifact_cache.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace qloom::test {

// The converted model (the real.convert fixture writes it) and the GGUF it
// came from: the build's paths, or the environment variables of the same
// names (to point the tier at another copy).
inline std::filesystem::path real_path(const char* env, const char* built) {
  const char* d = std::getenv(env);
  return d && *d ? d : built;
}
inline std::filesystem::path real_model_dir() { return real_path("QLOOM_REAL_MODEL_DIR", QLOOM_REAL_MODEL_DIR); }
inline std::filesystem::path real_gguf() { return real_path("QLOOM_REAL_GGUF", QLOOM_REAL_GGUF); }

inline std::filesystem::path real_data_dir() {
  return std::filesystem::path(QLOOM_TEST_DATA_DIR) / "real";
}

inline nlohmann::json real_goldens() {
  std::ifstream in(real_data_dir() / "smollm2_goldens.json");
  return nlohmann::json::parse(in);
}

inline nlohmann::json read_json_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  if (!in) return nlohmann::json();
  return nlohmann::json::parse(in, nullptr, false);
}

// Runs qloom with `args` + `--json OUT` and returns the parsed JSON; records a
// failure (with stderr) when the command fails.
inline nlohmann::json run_qloom_json(std::vector<std::string> args, const TempDir& tmp,
                                     const std::string& name) {
  const auto out = tmp / (name + ".json");
  args.push_back("--json");
  args.push_back(out.string());
  CommandResult r = run_qloom(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return read_json_file(out);
}

// The quantize arguments of the real tier (after --model_dir / --output_dir):
// `scheme_args` on `calib` c4 documents of 256 tokens, 2 threads. Every test
// builds them here, in this order, so that equal requests share one cached
// checkpoint (artifact_cache.h).
inline std::vector<std::string> real_quantize_args(const std::vector<std::string>& scheme_args, int calib) {
  std::vector<std::string> q = {"--threads", "2", "--num_calib_data", std::to_string(calib), "--seq_len", "256",
                                "--progress", "off"};
  q.insert(q.end(), scheme_args.begin(), scheme_args.end());
  return q;
}

// KLD of `checkpoint` against the source on wikitext-2, 4 windows of 512
// tokens (shared: computed once per checkpoint and build); null on failure.
inline nlohmann::json shared_kld(const std::filesystem::path& checkpoint) {
  return shared_json({"eval", checkpoint.string(), "--source", real_model_dir().string(), "--task", "kld",
                      "--dataset", "wikitext2", "--seq_len", "512", "--limit", "4", "--threads", "2"});
}

// quantize `scheme` (with `algo` unless empty; `config_json`: its
// --quant_algo_config_file content) on `calib` c4 documents of 256 tokens,
// then KLD mean against the source on wikitext-2, 4 windows of 512 tokens.
// Both are shared artifacts. -1 (with a recorded failure) when a command fails.
inline double quantized_kld(const std::string& scheme, const std::string& algo, int calib,
                            const char* config_json = nullptr) {
  std::vector<std::string> s = {"--quant_scheme", scheme};
  if (!algo.empty()) s.insert(s.end(), {"--quant_algo", algo});
  if (config_json) {
    const std::string last = algo.substr(algo.rfind(',') + 1);  // the configured algorithm
    s.insert(s.end(), {"--quant_algo_config_file", last, shared_file(last + ".json", config_json).string()});
  }
  const std::filesystem::path out = shared_checkpoint(real_quantize_args(s, calib));
  if (out.empty()) return -1;
  const nlohmann::json j = shared_kld(out);
  return j.is_object() ? j["kld_mean"].get<double>() : -1;
}

}  // namespace qloom::test
