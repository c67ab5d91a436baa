// native_bench: llama-bench's pp / tg figures for qloom — a model directory
// (plain HF safetensors, or a Quark checkpoint made by `qloom quantize`)
// loaded through exporter::load_for_eval with a chosen runtime (native
// quantized kernels or simulate), compute (fp32 / bf16) and thread count:
//   pp<N>: one batched forward() of N tokens into an empty cache, last_only
//          logits (a generator's prefill);
//   tg<N>: N single-token forward() calls, the first into an empty cache
//          (after --tg_prompt untimed tokens, default 0), as llama-bench's tg
//          decodes N tokens one by one from position 0.
// Each test: one warm-up run, then --repeats timed runs; mean, stddev, best
// tokens/s (llama-bench reports the mean of its runs' tokens/s, avg_ts).
// Also the KV cache's bytes per token: the heap growth of new_cache() between
// two capacities (mallinfo2: whatever the cache class allocates, fp32 or
// fp8), next to the formula layers·2·kv_heads·head_dim·bytes (4 bytes for an
// fp32 cache, 1 for an fp8 one).
//
//   native_bench --model DIR [--runtime native|simulate] [--compute f32|bf16]
//                [--weights auto|f32|bf16] [--threads N] [--pp 512] [--tg 128]
//                [--tg_prompt 0] [--repeats 3] [--label NAME] [--format NAME]
//                [--allow_fallback 0|1]
//
// --runtime native on a Quark checkpoint of which no linear landed on a
// native kernel (the runtime fell back to simulate for every one) is an
// error unless --allow_fallback 1: its figures would be simulate's under the
// name native. The "load" line says how many linears run natively.
//
// Output: one JSON object per line on stdout (machine-readable; see
// emit()): a "load" line, then one line per test; on a load or run error a
// line with "error" and exit status 3 (bench/native_vs_llamacpp.sh prints
// such rows as "native runtime not available: <error>").
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/export/checkpoint_runtime.h"

namespace {

using qloom::engine::LoadOptions;
using qloom::exporter::Runtime;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string model, label, format, runtime = "native", compute = "f32", weights = "auto";
  unsigned threads = 2;
  int64_t pp = 512, tg = 128, tg_prompt = 0;
  int repeats = 3;
  bool allow_fallback = false;
};

int usage() {
  std::fprintf(stderr,
               "usage: native_bench --model DIR [--runtime native|simulate] [--compute f32|bf16] "
               "[--weights auto|f32|bf16] [--threads N] [--pp N] [--tg N] [--tg_prompt N] [--repeats N] "
               "[--label NAME] [--format NAME] [--allow_fallback 0|1]\n");
  return 2;
}

bool parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (k == "--model") a.model = v;
    else if (k == "--runtime") a.runtime = v;
    else if (k == "--compute") a.compute = v;
    else if (k == "--weights") a.weights = v;
    else if (k == "--threads") a.threads = static_cast<unsigned>(std::atoi(v));
    else if (k == "--pp") a.pp = std::atoll(v);
    else if (k == "--tg") a.tg = std::atoll(v);
    else if (k == "--tg_prompt") a.tg_prompt = std::atoll(v);
    else if (k == "--repeats") a.repeats = std::max(1, std::atoi(v));
    else if (k == "--label") a.label = v;
    else if (k == "--format") a.format = v;
    else if (k == "--allow_fallback") a.allow_fallback = std::atoi(v) != 0;
    else return false;
  }
  if (a.label.empty()) a.label = a.model;
  return !a.model.empty() && a.pp >= 0 && a.tg >= 0 && a.tg_prompt >= 0 &&
         (a.compute == "f32" || a.compute == "bf16") &&
         (a.weights == "auto" || a.weights == "f32" || a.weights == "bf16");
}

LoadOptions load_options(const Args& a) {
  LoadOptions o;
  o.threads = a.threads;
  o.compute = a.compute == "bf16" ? LoadOptions::Compute::kBF16 : LoadOptions::Compute::kF32;
  if (a.weights == "f32") o.weights = LoadOptions::Weights::kF32;
  else if (a.weights == "bf16") o.weights = LoadOptions::Weights::kBF16;
  return o;
}

// The fields every output line carries.
json base_line(const Args& a) {
  return {{"tool", "qloom"},     {"model", a.label},     {"format", a.format.empty() ? a.model : a.format},
          {"runtime", a.runtime}, {"compute", a.compute}, {"weights", a.weights},
          {"threads", a.threads}};
}

void emit(const json& j) {
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

size_t heap_bytes() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

// Heap bytes per cached position: growth of new_cache(2c) over new_cache(c),
// so the fixed part of a cache object cancels. 0 when the cache allocates
// lazily (nothing to measure at creation).
double kv_bytes_measured(const qloom::engine::Model& m) {
  constexpr int64_t c = 1024;
  const double h0 = static_cast<double>(heap_bytes());
  auto small = m.new_cache(c);
  const double h1 = static_cast<double>(heap_bytes());
  auto large = m.new_cache(2 * c);
  const double h2 = static_cast<double>(heap_bytes());
  return std::max(0.0, ((h2 - h1) - (h1 - h0)) / static_cast<double>(c));
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

// Seconds of one prefill of `tokens` into an emptied cache.
double run_pp(qloom::engine::Model& m, qloom::engine::KvCache& cache, const std::vector<int32_t>& tokens) {
  cache.clear();
  const auto t0 = Clock::now();
  const std::vector<float> logits = m.forward(tokens, cache, /*last_only=*/true);
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (logits.empty()) throw std::runtime_error("forward returned no logits");
  return s;
}

// Seconds of gen.size() single-token forwards after an untimed prompt.
double run_tg(qloom::engine::Model& m, qloom::engine::KvCache& cache, const std::vector<int32_t>& prompt,
              const std::vector<int32_t>& gen) {
  cache.clear();
  if (!prompt.empty()) m.forward(prompt, cache, true);
  const auto t0 = Clock::now();
  for (const int32_t t : gen) {
    const std::vector<float> logits = m.forward(std::span<const int32_t>(&t, 1), cache, true);
    if (logits.empty()) throw std::runtime_error("forward returned no logits");
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// One test line: n tokens per run, `seconds` of the timed runs.
json test_line(const Args& a, const std::string& test, int64_t n, const std::vector<double>& seconds) {
  std::vector<double> tps;
  for (double s : seconds) tps.push_back(static_cast<double>(n) / s);
  double mean = 0, var = 0;
  for (double v : tps) mean += v / static_cast<double>(tps.size());
  for (double v : tps) var += (v - mean) * (v - mean);
  const double sd = tps.size() > 1 ? std::sqrt(var / static_cast<double>(tps.size() - 1)) : 0.0;
  json j = base_line(a);
  j.update({{"test", test}, {"n", n}, {"tps_mean", mean}, {"tps_std", sd},
            {"tps_best", *std::max_element(tps.begin(), tps.end())}, {"tps_runs", tps}});
  return j;
}

// Runs `once` warm-up + repeats times, returning the timed runs' seconds.
template <class F>
std::vector<double> timed(int repeats, F once) {
  std::vector<double> s;
  for (int r = 0; r <= repeats; ++r) {
    const double t = once();
    if (r > 0) s.push_back(t);
  }
  return s;
}

// Throws when the native runtime ran none of a Quark checkpoint's linears.
void check_native(const Args& a, const qloom::exporter::LoadedModel& lm) {
  const bool quark = lm.dir->config().contains("quantization_config") &&
                     !lm.dir->config()["quantization_config"].is_null();
  if (a.allow_fallback || lm.runtime.runtime != Runtime::kNative || !quark || lm.runtime.native_linears > 0) return;
  throw std::runtime_error("no linear runs on a native kernel, all fell back to simulate (" +
                           lm.runtime.description + "); --allow_fallback 1 measures it anyway");
}

int run(const Args& a) {
  const Runtime rt = qloom::exporter::parse_runtime(a.runtime);
  const auto t0 = Clock::now();
  qloom::exporter::LoadedModel lm = qloom::exporter::load_for_eval(a.model, load_options(a), rt);
  const double load_s = std::chrono::duration<double>(Clock::now() - t0).count();
  check_native(a, lm);
  qloom::engine::Model& m = *lm.model;
  const auto& c = m.config();
  const bool fp8_kv = !lm.runtime.kv_cache_fp8_scales.empty();
  json load = base_line(a);
  load.update({{"test", "load"}, {"load_s", load_s}, {"description", lm.runtime.description},
               {"native_linears", lm.runtime.native_linears}, {"weight_bytes", m.weight_bytes()},
               {"pool_threads", m.pool().size()}, {"kv_cache", fp8_kv ? "fp8" : "fp32"},
               {"kv_bytes_per_token", kv_bytes_measured(m)},
               {"kv_bytes_per_token_formula", c.num_layers * 2 * c.num_kv_heads * c.head_dim * (fp8_kv ? 1 : 4)}});
  emit(load);
  const std::vector<int32_t> pp_tokens = random_tokens(a.pp, c.vocab_size, 12345);
  const std::vector<int32_t> prompt = random_tokens(a.tg_prompt, c.vocab_size, 777);
  const std::vector<int32_t> gen = random_tokens(a.tg, c.vocab_size, 4242);
  auto cache = m.new_cache(std::max<int64_t>({a.pp, a.tg_prompt + a.tg, 1}));
  if (a.pp > 0)
    emit(test_line(a, "pp" + std::to_string(a.pp), a.pp,
                   timed(a.repeats, [&] { return run_pp(m, *cache, pp_tokens); })));
  if (a.tg > 0)
    emit(test_line(a, "tg" + std::to_string(a.tg), a.tg,
                   timed(a.repeats, [&] { return run_tg(m, *cache, prompt, gen); })));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse(argc, argv, a)) return usage();
  try {
    return run(a);
  } catch (const std::exception& e) {
    json j = base_line(a);
    j.update({{"test", "error"}, {"error", e.what()}});
    emit(j);
    std::fprintf(stderr, "native_bench: %s\n", e.what());
    return 3;
  }
}
