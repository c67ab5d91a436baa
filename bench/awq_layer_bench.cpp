// awq_layer_bench: the layer-by-layer calibration pipeline with one
// algorithm stage (awq by default) on the first --layers decoder layers of a
// model, every decoder linear quantized with --scheme. Prints, per layer,
// its wall and process CPU seconds and a digest (FNV-1a 64) of everything the layer hands to
// the exporter (codes, scales, zero points, changed float tensors), then the
// stage's phase timers (PipelineSummary::phase_seconds) summed over the
// layers. Two builds (or thread counts) that print the same digests produced
// byte-identical layers. Not a test; not run by ctest.
//
//   awq_layer_bench --model DIR [--layers 2] [--threads 1] [--algo awq]
//                   [--config JSON] [--scheme int4_wo_64] [--dataset FILE]
//                   [--num_calib_data 64] [--seq_len 256]
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/engine/layer_runner.h"
#include "qloom/quant/algorithm_registry.h"
#include "qloom/quant/calib_data.h"
#include "qloom/quant/pipeline.h"
#include "qloom/quant/scheme_registry.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: awq_layer_bench --model DIR [--layers N] [--threads N] [--algo awq] [--config JSON] "
               "[--scheme int4_wo_64] [--dataset FILE] [--num_calib_data N] [--seq_len N]\n");
  return 2;
}

struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void add(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  template <class T>
  void add_vec(const std::vector<T>& v) {
    add(v.data(), v.size() * sizeof(T));
  }
  void add_str(const std::string& s) { add(s.data(), s.size()); }
};

uint64_t digest(const qloom::quant::LayerResult& r) {
  Fnv f;
  for (const auto& [name, q] : r.weights) {
    f.add_str(name);
    f.add_vec(q.codes);
    f.add_vec(q.scales);
    f.add_vec(q.zero_points);
  }
  for (const auto& [name, t] : r.float_tensors) {
    f.add_str(name);
    f.add_vec(t.values);
  }
  return f.h;
}

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_dir, algo = "awq", config = "null", scheme = "int4_wo_64", dataset;
  int64_t layers = 2;
  unsigned threads = 1;
  uint64_t num_samples = 64, seq_len = 256;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    const char* v = argv[++i];
    if (a == "--model") model_dir = v;
    else if (a == "--layers") layers = std::atoll(v);
    else if (a == "--threads") threads = static_cast<unsigned>(std::atoi(v));
    else if (a == "--algo") algo = v;
    else if (a == "--config") config = v;
    else if (a == "--scheme") scheme = v;
    else if (a == "--dataset") dataset = v;
    else if (a == "--num_calib_data") num_samples = std::strtoull(v, nullptr, 10);
    else if (a == "--seq_len") seq_len = std::strtoull(v, nullptr, 10);
    else return usage();
  }
  if (model_dir.empty()) return usage();
  try {
    using namespace qloom;
    const quant::QuantSpec spec = *quant::get_scheme(scheme).linear.weight;
    quant::PipelineRequest req;
    req.model_dir = model_dir;
    req.threads = threads;
    std::string model_type;
    {
      engine::LoadOptions lo;
      lo.threads = 1;
      auto r = engine::LayerRunner::open(model_dir, lo);
      layers = std::min<int64_t>(layers, r->config().num_layers);
      model_type = r->config().model_type;
      for (int64_t i = 0; i < layers; ++i) {
        r->load_layer(i);
        for (const engine::LayerLinear& l : r->linears()) req.weight_specs[l.name] = spec;
      }
    }
    const quant::CalibrationData data = quant::load_calibration_data(model_dir, {dataset, num_samples, seq_len});
    std::vector<std::unique_ptr<quant::AlgorithmStage>> stages;
    stages.push_back(quant::make_algorithm_stage(algo, nlohmann::json::parse(config), model_type));
    quant::CalibrationPipeline pipe(std::move(req), data, std::move(stages));
    std::printf("awq_layer_bench: %s, %s %s, %zu samples / %llu tokens, %u thread(s)\n", model_dir.c_str(),
                algo.c_str(), scheme.c_str(), data.samples.size(), static_cast<unsigned long long>(data.tokens),
                threads);
    for (int64_t i = 0; i < layers; ++i) {
      const double cpu0 = cpu_seconds();
      const quant::LayerResult r = pipe.run_layer(i);
      std::printf("  layer %lld  wall %8.2f s  cpu %8.2f s  digest %016llx\n", static_cast<long long>(i),
                  pipe.summary().layer_seconds.back(), cpu_seconds() - cpu0, static_cast<unsigned long long>(digest(r)));
      std::fflush(stdout);
    }
    const quant::PipelineSummary& sum = pipe.summary();
    for (const auto& [name, sec] : sum.phase_seconds) {
      const double cpu = sum.phase_cpu_seconds.count(name) ? sum.phase_cpu_seconds.at(name) : 0.0;
      std::printf("  phase %-28s wall %7.2f s, cpu %7.2f s (per layer: wall %6.2f s, cpu %6.2f s)\n", name.c_str(),
                  sec, cpu, sec / static_cast<double>(layers), cpu / static_cast<double>(layers));
    }
  } catch (const qloom::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
