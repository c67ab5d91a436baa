// qloom-synth: writes a HuggingFace model directory with random weights for a
// given config — for benchmarks and memory tests on models larger than the
// bundled one. Deterministic: the same config and seed give identical bytes.
//
//   qloom-synth --output_dir DIR [--overwrite] [--config config.json | --preset NAME]
//               [--num_hidden_layers N] [--hidden_size N] [--intermediate_size N]
//               [--num_attention_heads N] [--num_key_value_heads N] [--vocab_size N]
//               [--seed N] [--max_shard_size BYTES] [--tokenizer_from DIR]
//
// Weights are N(0, initializer_range) in bf16, norms 1.0, biases 0. The
// tokenizer files come from --tokenizer_from (default: the bundled demo model).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "qloom/cli/flags.h"
#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/core/format.h"
#include "qloom/io/atomic_dir.h"
#include "qloom/io/safetensors_writer.h"
#include "qloom/model/decoder_layout.h"

namespace fs = std::filesystem;
using nlohmann::json;
using qloom::cli::flag_names;

namespace {

// Presets: config fields over a llama base. "bench-4gb" is the 32-layer ~4 GB
// model of the GPTQ memory benchmark; "bench-1gb" a quicker one.
json preset(const std::string& name) {
  json base = {{"architectures", {"LlamaForCausalLM"}},
               {"model_type", "llama"},
               {"hidden_act", "silu"},
               {"rms_norm_eps", 1e-5},
               {"rope_theta", 10000.0},
               {"initializer_range", 0.02},
               {"tie_word_embeddings", false},
               {"bos_token_id", 1},
               {"eos_token_id", 2},
               {"torch_dtype", "bfloat16"},
               {"max_position_embeddings", 2048},
               {"vocab_size", 512}};
  if (name == "tiny") {
    base.update({{"hidden_size", 64}, {"intermediate_size", 176}, {"num_hidden_layers", 2},
                 {"num_attention_heads", 4}, {"num_key_value_heads", 2}});
  } else if (name == "bench-1gb") {
    base.update({{"hidden_size", 2048}, {"intermediate_size", 5632}, {"num_hidden_layers", 12},
                 {"num_attention_heads", 16}, {"num_key_value_heads", 4}});
  } else if (name == "bench-4gb") {
    // 2.08 B parameters, 4.2 GB in bf16 (intermediate 8192: the down_proj
    // Hessian alone is 8192^2 x 8 B = 537 MB).
    base.update({{"hidden_size", 2048}, {"intermediate_size", 8192}, {"num_hidden_layers", 32},
                 {"num_attention_heads", 16}, {"num_key_value_heads", 4}, {"vocab_size", 32000}});
  } else {
    throw qloom::Error(qloom::ErrorKind::kUsage, "", "--preset", "unknown preset '" + name + "'",
                       "use tiny, bench-1gb or bench-4gb, or pass --config");
  }
  return base;
}

// splitmix64: small, fast, good enough for synthetic weights.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
};

uint64_t hash_name(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

void fill_normal(std::vector<float>& v, double stddev, uint64_t seed) {
  Rng rng{seed};
  for (size_t i = 0; i < v.size(); i += 2) {
    const double r = std::sqrt(-2.0 * std::log(rng.uniform())) * stddev;
    const double t = 6.283185307179586 * rng.uniform();
    v[i] = static_cast<float>(r * std::cos(t));
    if (i + 1 < v.size()) v[i + 1] = static_cast<float>(r * std::sin(t));
  }
}

int run(int argc, char** argv) {
  CLI::App app{"qloom-synth: random-weight HuggingFace model for benchmarks", "qloom-synth"};
  std::string out, config_path, preset_name, tokenizer_from = QLOOM_DEMO_MODEL_DIR;
  uint64_t seed = 0, max_shard = 5'000'000'000ULL;
  std::map<std::string, int64_t> overrides;
  bool overwrite = false;
  app.add_option(flag_names("output_dir"), out, "output model directory")->required();
  app.add_flag(flag_names("overwrite"), overwrite, "replace an existing output directory");
  app.add_option(flag_names("config"), config_path, "HF config.json to instantiate");
  app.add_option(flag_names("preset"), preset_name, "tiny | bench-1gb | bench-4gb");
  app.add_option(flag_names("seed"), seed, "random seed");
  app.add_option(flag_names("max_shard_size"), max_shard, "max bytes per shard");
  app.add_option(flag_names("tokenizer_from"), tokenizer_from, "copy tokenizer files from here");
  for (const char* key : {"num_hidden_layers", "hidden_size", "intermediate_size",
                          "num_attention_heads", "num_key_value_heads", "vocab_size"}) {
    app.add_option_function<int64_t>(flag_names(key), [&overrides, key](int64_t v) { overrides[key] = v; },
                                     std::string("override config ") + key);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (config_path.empty() == preset_name.empty())
    throw qloom::Error(qloom::ErrorKind::kUsage, "", "--config/--preset", "give exactly one of them");

  json cfg;
  if (!config_path.empty()) {
    std::ifstream f(config_path);
    if (!f) qloom::throw_not_found(config_path, "", "cannot open config", "check the path");
    cfg = json::parse(f, nullptr, false);
    if (cfg.is_discarded() || !cfg.is_object())
      qloom::throw_invalid(config_path, "", "not a JSON object", "pass a HuggingFace config.json");
  } else {
    cfg = preset(preset_name);
  }
  for (const auto& [k, v] : overrides) cfg[k] = v;
  cfg["torch_dtype"] = "bfloat16";
  const auto shape = qloom::model::decoder_shape_from_config(cfg, config_path.empty() ? "preset " + preset_name : config_path);
  const auto tensors = qloom::model::decoder_tensors(shape);
  const double stddev = cfg.value("initializer_range", 0.02);

  std::vector<qloom::io::TensorSpec> specs;
  for (const auto& t : tensors) specs.push_back({t.name, qloom::DType::kBF16, t.shape});

  qloom::io::AtomicDir dir(out, overwrite);
  {
    std::ofstream(dir.staging() / "config.json") << cfg.dump(2) << "\n";
    json gen = {{"_from_model_config", true}, {"bos_token_id", cfg.value("bos_token_id", 1)},
                {"eos_token_id", cfg.value("eos_token_id", 2)}};
    std::ofstream(dir.staging() / "generation_config.json") << gen.dump(2) << "\n";
  }
  for (const char* name : {"tokenizer.json", "tokenizer.model", "tokenizer_config.json",
                           "special_tokens_map.json"}) {
    const fs::path src = fs::path(tokenizer_from) / name;
    if (fs::exists(src)) fs::copy_file(src, dir.staging() / name);
  }

  qloom::io::WriterOptions wopts;
  wopts.max_shard_bytes = max_shard;
  qloom::io::SafetensorsWriter writer(dir.staging(), specs, wopts);
  std::vector<float> f32;
  std::vector<uint16_t> b16;
  uint64_t total = 0;
  for (const auto& t : tensors) {
    uint64_t n = 1;
    for (uint64_t d : t.shape) n *= d;
    f32.assign(n, 0.0f);
    if (t.role == qloom::model::TensorRole::kNorm) std::fill(f32.begin(), f32.end(), 1.0f);
    else if (t.role != qloom::model::TensorRole::kBias) fill_normal(f32, stddev, seed ^ hash_name(t.name));
    b16.resize(n);
    qloom::f32_to_bf16(f32.data(), b16.data(), n);
    writer.write(t.name, std::as_bytes(std::span(b16)));
    total += n;
  }
  writer.finish();
  dir.commit();
  std::cerr << "qloom-synth: wrote " << out << ": " << shape.model_type << ", "
            << shape.num_layers << " layers, " << qloom::format_count(total) << " parameters, "
            << writer.shard_files().size() << " shard(s)\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const qloom::Error& e) {
    std::cerr << "qloom-synth: error: " << e.what() << "\n";
    return e.exit_code();
  }
}
