// validate_config (model/config_check.h): the one check of config.json's
// values. Bad values of every class (type, float for an integer, range,
// bounds, relations, RoPE dicts, text_config) are kInvalidInput naming the
// field and the value, for supported and unsupported model_types alike, and
// ModelConfig::parse reports them with the same message; every config.json
// of the test data (every supported architecture, 4.x and 5.x forms, RoPE
// types only RTN handles) passes. JSON itself cannot spell inf (1e400 is a
// parse error); a config built from GGUF metadata can hold one.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <limits>

#include "qloom/model/config_check.h"
#include "qloom/model/model_config.h"
#include "support/expect_error.h"

namespace qloom::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json base_config(const char* model_type = "llama") {
  return json{{"model_type", model_type},   {"vocab_size", 256},        {"hidden_size", 64},
              {"intermediate_size", 128},   {"num_hidden_layers", 2},   {"num_attention_heads", 4},
              {"num_key_value_heads", 2},   {"rope_theta", 10000.0},    {"rms_norm_eps", 1e-5}};
}

struct Case {
  const char* what;
  json patch;           // merged into base_config()
  const char* item;     // the field named
  const char* message;  // part of the message
};

const std::vector<Case>& bad_cases() {
  static const std::vector<Case> t = {
      {"heads 0", {{"num_attention_heads", 0}}, "num_attention_heads", "= 0 must be an integer between 1 and 65536"},
      {"string size", {{"hidden_size", "64"}}, "hidden_size", "= \"64\" must be an integer"},
      {"fractional size", {{"hidden_size", 64.5}}, "hidden_size", "= 64.5 must be an integer, not a float"},
      {"integral float", {{"hidden_size", 64.0}}, "hidden_size", "= 64.0 must be an integer, not a float"},
      {"negative theta", {{"rope_theta", -1}}, "rope_theta", "= -1 must be a finite number > 0"},
      {"infinite theta", {{"rope_theta", std::numeric_limits<double>::infinity()}}, "rope_theta", "must be a finite number > 0"},
      {"zero eps", {{"rms_norm_eps", 0.0}}, "rms_norm_eps", "must be a finite number > 0 and <= 1"},
      {"vocab 0", {{"vocab_size", 0}}, "vocab_size", "= 0 must be an integer between 1 and 16777216"},
      {"vocab 2^24+1", {{"vocab_size", 16777217}}, "vocab_size", "between 1 and 16777216"},
      {"hidden 2^20+64", {{"hidden_size", 1048640}}, "hidden_size", "between 1 and 1048576"},
      {"layers 10^4+1", {{"num_hidden_layers", 10001}}, "num_hidden_layers", "between 1 and 10000"},
      {"layers 2^64-1", {{"num_hidden_layers", 18446744073709551615ULL}}, "num_hidden_layers", "between 1 and 10000"},
      {"negative layers", {{"num_hidden_layers", -3}}, "num_hidden_layers", "between 1 and 10000"},
      {"heads do not divide", {{"num_attention_heads", 3}, {"num_key_value_heads", 1}}, "num_attention_heads",
       "does not divide hidden_size (64)"},
      {"kv do not divide", {{"num_key_value_heads", 3}}, "num_key_value_heads", "must divide num_attention_heads (4)"},
      {"bool as string", {{"tie_word_embeddings", "true"}}, "tie_word_embeddings", "must be true or false"},
      {"model_type number", {{"model_type", 7}}, "model_type", "must be a string"},
      {"rope_scaling list", {{"rope_scaling", json::array({1, 2})}}, "rope_scaling", "must be an object or null"},
      {"rope factor", {{"rope_scaling", {{"rope_type", "linear"}, {"factor", 0}}}}, "rope_scaling.factor",
       "= 0 must be a finite number > 0"},
      {"rope type number", {{"rope_scaling", {{"type", 3}}}}, "rope_scaling.type", "must be a string"},
      {"rope orig positions", {{"rope_parameters", {{"rope_type", "llama3"}, {"original_max_position_embeddings", 0.5}}}},
       "rope_parameters.original_max_position_embeddings", "must be an integer, not a float"},
      {"per-type rope", {{"rope_parameters", {{"full_attention", {{"rope_theta", -5}}}}}},
       "rope_parameters.full_attention.rope_theta", "must be a finite number > 0"},
      {"experts per tok", {{"num_experts", 4}, {"num_experts_per_tok", 8}}, "num_experts_per_tok", "exceeds num_experts"},
      {"text_config", {{"text_config", {{"hidden_size", "big"}}}}, "text_config.hidden_size", "must be an integer"},
  };
  return t;
}

TEST(ConfigCheck, EachBadClassIsNamedWithItsValue) {
  for (const char* type : {"llama", "some_future_arch"}) {
    for (const Case& c : bad_cases()) {
      SCOPED_TRACE(std::string(type) + ": " + c.what);
      json cfg = base_config(type);
      cfg.merge_patch(c.patch);
      const Error e = catch_error([&] { model::validate_config(cfg, "m/config.json"); });
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      EXPECT_EQ(e.file(), "m/config.json");
      EXPECT_EQ(e.item(), c.item);
      EXPECT_NE(e.message().find(std::string("config field \"") + c.item + "\""), std::string::npos) << e.message();
      EXPECT_NE(e.message().find(c.message), std::string::npos) << e.message();
      if (std::string(type) != "llama") continue;
      // The engine's parse reports the same error (it runs the check first).
      const Error p = catch_error([&] { (void)model::ModelConfig::parse(cfg, "m/config.json"); });
      EXPECT_EQ(p.message(), e.message());
    }
  }
}

TEST(ConfigCheck, NotAnObject) {
  const Error e = catch_error([] { model::validate_config(json::array(), "c.json"); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(e.message().find("must hold a JSON object"), std::string::npos);
}

TEST(ConfigCheck, ArchitectureDefaultHeadDimNeedsNoDivisibility) {
  json cfg = base_config("gemma");
  cfg["num_attention_heads"] = 3;
  cfg["num_key_value_heads"] = 1;
  EXPECT_NO_THROW(model::validate_config(cfg, "c.json"));  // gemma: head_dim 256 by default
  cfg["head_dim"] = nullptr;  // explicit null: hidden / heads, as transformers derives it
  EXPECT_THROW(model::validate_config(cfg, "c.json"), Error);
}

TEST(ConfigCheck, LimitsAtTheirBoundsPass) {
  for (const model::IntLimit& l : model::config_int_limits()) {
    SCOPED_TRACE(l.key);
    for (const int64_t v : {l.min, l.max}) {
      json cfg = json::object();
      cfg[l.key] = v;
      EXPECT_NO_THROW(model::validate_config(cfg, "c.json"));
    }
    json cfg = json::object();
    cfg[l.key] = l.max + 1;
    EXPECT_THROW(model::validate_config(cfg, "c.json"), Error);
  }
}

TEST(ConfigCheck, EveryTestDataConfigPasses) {
  const fs::path engine = fs::path(QLOOM_TEST_DATA_DIR) / "engine";
  size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(engine)) {
    if (e.path().extension() != ".json" || e.path().filename().string().find("token") != std::string::npos) continue;
    const json cfg = json::parse(std::ifstream(e.path()));
    if (!cfg.is_object() || !cfg.contains("model_type")) continue;
    SCOPED_TRACE(e.path().string());
    EXPECT_NO_THROW(model::validate_config(cfg, e.path().string()));
    // The engine's parse may find a feature it does not implement (yarn RoPE ...), never a bad value.
    try {
      (void)model::ModelConfig::parse(cfg, e.path().string());
    } catch (const Error& err) {
      EXPECT_EQ(err.kind(), ErrorKind::kUnsupported) << err.what();
    }
    ++n;
  }
  EXPECT_GE(n, 40u);  // 12 architectures' model configs and their 4.x / 5.x forms
}

}  // namespace
}  // namespace qloom::test
