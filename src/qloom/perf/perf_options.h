// The `qloom perf` command line as a library object: quark-quant-perf's
// option names (kebab-case as that CLI spells them, snake_case accepted too),
// parsed into a RunSpec (what defines the session's work; stored in
// state.json as run_spec, the first stored one wins on resume) plus the
// per-invocation actions (--retry-accuracy-gate, --recheck-baseline,
// --session-dir).
//
// Values: percentages become ratios ("3%" -> 0.03, "0.03" -> 0.03) and gains
// accept a trailing x ("2x" -> 2.0). Contradictions are kUsage errors naming
// the flags: --target-gain with an explicit --performance-mode off|measure;
// --kv-cache-precision-candidates fp8 without native; an unknown
// performance mode, eval task or granularity.
//
// GPU-only options of quark-quant-perf (--gpu-type, --framework,
// --vllm-extra-arg, ...) are accepted, recorded in run_spec.not_applicable and
// reported as not applicable to qloom's CPU engine, never silently dropped.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace CLI {
class App;
}

namespace qloom::perf {

struct RunSpec {
  std::string model;       // absolute directory (or hub id as given)
  std::string base_model;  // default: model
  std::string quant_strategy;  // "" = mixed-precision search
  double accuracy_gap = 0.02;
  std::string performance_mode = "off";  // off | measure | optimize
  std::optional<double> target_gain;
  std::vector<std::string> layer_precision_candidates;  // empty = the engine's automatic space
  std::vector<std::string> kv_cache_precision_candidates = {"native", "fp8"};
  std::string kv_cache_scheme;  // "" | fp8 (a fixed KV scheme for every candidate)
  std::vector<std::string> exclude_layers;
  int64_t max_search_candidates = 20;  // 0 = all
  double search_timeout = 43200;       // seconds
  double baseline_floor = 0.03;
  std::string eval_task = "gsm8k";
  int64_t gsm8k_num_samples = 1319;
  std::optional<int64_t> search_gsm8k_num_samples;
  std::optional<int64_t> eval_limit;   // ppl / kld windows, multiple-choice documents
  std::string eval_dataset;            // "" = the task's bundled default
  std::string granularity = "partition";  // partition | layer
  int64_t isl = 1024, osl = 1024, bench_concurrency = 64;
  std::string calib_dataset;  // "" = the bundled default
  int64_t num_calib_data = 512, calib_seqlen = 512;
  std::string server;
  unsigned threads = 0;  // 0 = all cores
  // In-process throughput: native (quantized linears on the engine's native
  // kernels, unquantized ones with bf16 compute, as served) or simulate.
  std::string runtime = "native";
  // GPU-only option name -> value(s) as given.
  std::map<std::string, std::string> not_applicable;
};

// The automatic layer-precision space on qloom's engine (used when
// --layer-precision-candidates is not given).
std::vector<std::string> default_layer_precisions();

struct PerfCommand {
  RunSpec spec;
  std::string session_dir;  // "" = ./runs/<YYYYmmdd-HHMMSS>
  bool retry_accuracy_gate = false;
  bool recheck_baseline = false;
  bool json = false;  // print final.json (the default prints it too; kept for symmetry with run)
  // Raw strings of the ratio flags, parsed by finish_perf_command.
  std::string accuracy_gap_text, target_gain_text, baseline_floor_text;
  std::string performance_mode_given;  // "" when --performance-mode was not given
};

// Registers every `qloom perf` flag on `sub`, storing into `cmd` (which must
// outlive the parse).
void add_perf_flags(CLI::App& sub, PerfCommand& cmd);

// Resolves what the flags cannot: ratio texts, implied modes, defaults that
// depend on other flags, contradictions. Throws Error(kUsage).
void finish_perf_command(PerfCommand& cmd);

// "3%" -> 0.03, "0.03" -> 0.03, "2x" -> 2.0 (allow_x), naming `flag` in the
// kUsage error for anything else (empty, trailing garbage, not finite).
double parse_ratio(std::string_view text, std::string_view flag, bool allow_x = false);

nlohmann::ordered_json to_json(const RunSpec& spec);
RunSpec run_spec_from_json(const nlohmann::json& j);  // throws kInvalidInput naming the field

// "key: stored -> given" lines for every run_spec field that differs.
std::vector<std::string> run_spec_differences(const RunSpec& stored, const RunSpec& given);

}  // namespace qloom::perf
