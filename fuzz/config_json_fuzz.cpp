// libFuzzer target: arbitrary bytes as config.json through what every command
// runs on it (issue 30 item 7): the strict JSON intake (io/json_read.h), the
// one validation (model/config_check.h), the engine's parse with the
// architecture it resolves (model/model_config.h) and the decoder layout that
// follows it (model/decoder_layout.h).
//
// A qloom::Error is the expected answer to bad input and is swallowed. Any
// other exception, a crash, a sanitizer report, or an accepted config that
// breaks the validation's promises (checked below) is a finding.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "qloom/core/error.h"
#include "qloom/io/json_read.h"
#include "qloom/model/architecture.h"
#include "qloom/model/config_check.h"
#include "qloom/model/decoder_layout.h"
#include "qloom/model/model_config.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// What a config that ModelConfig::parse accepted guarantees.
void check_config(const qloom::model::ModelConfig& c) {
  check(qloom::model::find_architecture(c.model_type) != nullptr);
  check(c.vocab_size >= 1 && c.vocab_size <= (int64_t{1} << 24));
  check(c.hidden_size >= 1 && c.hidden_size <= (int64_t{1} << 20));
  check(c.num_layers >= 1 && c.num_layers <= 10000);
  check(c.num_heads >= 1 && c.num_kv_heads >= 1 && c.num_heads % c.num_kv_heads == 0);
  check(c.head_dim >= 1 && c.head_dim <= (int64_t{1} << 16));
  check(std::isfinite(c.rope.theta) && c.rope.theta > 0 && std::isfinite(c.rope_local.theta) && c.rope_local.theta > 0);
  check(std::isfinite(c.rms_norm_eps) && c.rms_norm_eps > 0);
  check(c.layer_sliding.size() == static_cast<size_t>(c.num_layers));
  check(c.layer_moe.size() == static_cast<size_t>(c.num_layers));
  check(c.num_experts == 0 || c.num_experts_per_tok <= c.num_experts);
}

void check_layout(const qloom::model::DecoderShape& s) {
  check(!qloom::model::decoder_tensors(s).empty());
  for (const auto& t : qloom::model::decoder_tensors(s))
    for (const uint64_t d : t.shape) check(d >= 1 && d <= (uint64_t{1} << 32));  // heads x head_dim at most
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  nlohmann::json config;
  try {
    config = qloom::io::parse_json_text(text, "config.json");
    qloom::model::validate_config(config, "config.json");
  } catch (const qloom::Error&) {
    return 0;  // expected for malformed input
  }
  try {
    check_config(qloom::model::ModelConfig::parse(config, "config.json"));
  } catch (const qloom::Error&) {
  }
  try {
    check_layout(qloom::model::decoder_shape_from_config(config, "config.json"));
  } catch (const qloom::Error&) {
  }
  return 0;
}
