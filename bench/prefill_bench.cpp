// prefill_bench: end-to-end prefill throughput of engine::Model — one batched
// forward() of `seq` tokens into an empty cache (last_only logits, as a
// generator's prefill does), best of `repeats` runs after one warm-up, in
// tokens/s. Token ids are a fixed pseudo-random sequence over the vocabulary.
//
//   prefill_bench --model DIR [--weights f32|bf16|auto] [--threads 2]
//                 [--seq 512] [--repeats 3] [--label NAME]
//
// Dev machine (Zen 4, 2 threads, quiet moment), tokens/s at seq 512:
//   model                 qloom f32  qloom bf16  llama.cpp F32  llama.cpp BF16
//   stories260K              9076      10472        29533          30835
//   synth llama 768x12        364        360          780           1369
// llama.cpp: commit 0c1e570 (vendored in llama-cpp-python 0.3.36), built with
// -DGGML_NATIVE=ON CPU-only, GGUF from its convert_hf_to_gguf.py --outtype
// f32|bf16, `llama-bench -m X.gguf -p 512 -n 0 -t 2`. Its BF16 path rounds
// activations to bf16 (avx512_bf16 dot products); qloom keeps them fp32.
// qloom's GEMMs run near the 2-core FMA peak (engine_bench); at the time of
// measuring about half the synthetic model's prefill was spent in attention.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "qloom/engine/gemm_dispatch.h"
#include "qloom/engine/model.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: prefill_bench --model DIR [--weights f32|bf16|auto] [--threads N] [--seq N] "
               "[--repeats N] [--label NAME]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_dir, weights = "auto", label;
  unsigned threads = 2;
  int64_t seq = 512;
  int repeats = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    const char* v = argv[++i];
    if (a == "--model") model_dir = v;
    else if (a == "--weights") weights = v;
    else if (a == "--threads") threads = static_cast<unsigned>(std::atoi(v));
    else if (a == "--seq") seq = std::atoll(v);
    else if (a == "--repeats") repeats = std::max(1, std::atoi(v));
    else if (a == "--label") label = v;
    else return usage();
  }
  if (model_dir.empty() || seq <= 0) return usage();
  if (label.empty()) label = model_dir;
  using qloom::engine::LoadOptions;
  LoadOptions opts;
  opts.threads = threads;
  if (weights == "f32") opts.weights = LoadOptions::Weights::kF32;
  else if (weights == "bf16") opts.weights = LoadOptions::Weights::kBF16;
  else if (weights != "auto") return usage();
  try {
    auto model = qloom::engine::Model::load(model_dir, opts);
    const int64_t vocab = model->config().vocab_size;
    std::mt19937 rng(12345);
    std::vector<int32_t> tokens(static_cast<size_t>(seq));
    for (auto& t : tokens) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
    auto cache = model->new_cache(seq);
    std::vector<double> tps;
    for (int r = 0; r <= repeats; ++r) {  // run 0 is the warm-up
      cache->clear();
      const auto t0 = std::chrono::steady_clock::now();
      const std::vector<float> logits = model->forward(tokens, *cache, /*last_only=*/true);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (logits.empty()) throw std::runtime_error("forward returned no logits");
      if (r > 0) tps.push_back(static_cast<double>(seq) / s);
    }
    std::string runs;
    for (double v : tps) {
      char b[32];
      std::snprintf(b, sizeof b, " %.1f", v);
      runs += b;
    }
    const int64_t h = model->config().hidden_size;
    std::printf("prefill_bench: %-22s weights=%-4s threads=%u seq=%lld: %8.1f tokens/s best of %d (runs:%s; "
                "%.1f MB weights; GEMM %s)\n",
                label.c_str(), weights.c_str(), model->pool().size(), static_cast<long long>(seq),
                *std::max_element(tps.begin(), tps.end()), repeats, runs.c_str(),
                static_cast<double>(model->weight_bytes()) / 1e6,
                qloom::engine::gemm_path_name(qloom::engine::gemm_auto_path(
                    seq, h, h, weights == "f32" ? qloom::engine::WeightType::kF32 : qloom::engine::WeightType::kBF16)));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prefill_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
