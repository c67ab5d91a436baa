// Shared pieces of the agent tests: the environment JSON (collected once per
// test binary) and the intent context the demo-model prompts resolve in.
#pragma once

#include <nlohmann/json.hpp>

#include "qloom/agent/environment.h"
#include "qloom/agent/intent.h"

namespace qloom::test {

inline const nlohmann::ordered_json& env() {
  static const nlohmann::ordered_json e = agent::collect_environment_json();
  return e;
}

inline agent::IntentContext demo_context() {
  agent::IntentContext c;
  c.demo_model_dir = QLOOM_DEMO_MODEL_DIR;
  c.output_root = "/ws";
  return c;
}

}  // namespace qloom::test
