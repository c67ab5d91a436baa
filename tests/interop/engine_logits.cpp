// engine_logits MODEL_DIR ID... : prints the logits qloom's engine computes for
// the token ids (a quantized Quark checkpoint as it would compute: weights
// dequantized, activation / KV quantization simulated) as one JSON array of
// rows. Used by quark_load_check.py to compare against amd-quark + transformers.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "qloom/eval/checkpoint_runtime.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: engine_logits MODEL_DIR ID...\n");
    return 2;
  }
  try {
    std::vector<int32_t> ids;
    for (int i = 2; i < argc; ++i) ids.push_back(static_cast<int32_t>(std::atoi(argv[i])));
    qloom::engine::LoadOptions lo;
    lo.weights = qloom::engine::LoadOptions::Weights::kF32;
    auto m = qloom::eval::load_for_eval(argv[1], lo);
    auto cache = m.model->new_cache(static_cast<int64_t>(ids.size()));
    const auto& hooks = m.runtime.hooks;
    const bool any = static_cast<bool>(hooks.linear_input) || static_cast<bool>(hooks.linear_output);
    const std::vector<float> logits = m.model->forward(ids, *cache, false, any ? &hooks : nullptr);
    const size_t vocab = logits.size() / ids.size();
    std::printf("[");
    for (size_t t = 0; t < ids.size(); ++t) {
      std::printf(t ? ",\n[" : "[");
      for (size_t v = 0; v < vocab; ++v) std::printf(v ? ",%.9g" : "%.9g", logits[t * vocab + v]);
      std::printf("]");
    }
    std::printf("]\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine_logits: %s\n", e.what());
    return 1;
  }
}
