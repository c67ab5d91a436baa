// qloom perf — running the throughput protocol (throughput_protocol.h) on a
// model: in-process on qloom's engine, or against an OpenAI-compatible
// server (qloom serve, vLLM, SGLang).
//
// Prompts: the model directory's vocabulary minus its special tokens — ids
// [0, V), V = min(config vocab_size, tokenizer vocab_size), dropping the
// config's bos / eos ids, the tokenizer's bos / eos ids and every id the
// tokenizer drops when decoding with skip_special_tokens (HF's "special"
// added tokens, SentencePiece control tokens) — drawn as
// throughput_protocol.h says. A server run needs the model directory too
// (tokenizer and config), as `qloom eval --server` does.
//
// In-process (spec.server empty): exporter::load_for_eval with spec.runtime:
// "native" (the default) runs a Quark checkpoint's quantized linears on the
// engine's native kernels and unquantized linears with bf16 compute, as a
// server would; "simulate" dequantizes the weights to fp32 and simulates the
// activation / KV quantization (Quark's arithmetic, no low-precision speed).
// One run serves all prompts with `concurrency` sequences active: a freed
// slot takes the next prompt, prefills it in one forward (last row only),
// and every round each active sequence takes its greedy token (EOS ignored)
// and the pending tokens run through Model::forward_batch in passes of at
// most `decode_batch` sequences (one forward each when the runtime's hooks mix
// rows, CheckpointRuntime::rows_independent false), until each prompt has
// OSL output tokens. KV caches are allocated once per workload.
// Server: `concurrency` client threads, one POST /v1/completions per prompt
// {"model", "prompt": [ids], "max_tokens": OSL, "min_tokens": OSL,
// "ignore_eos": true, "temperature": 0, "stream": false}; output tokens are
// usage.completion_tokens. 429 / 5xx / transport failures are retried
// (3 times, backoff 0.5 s, 1 s, 2 s).
//
// Times are wall-clock (steady_clock) around a whole run; tokens_per_s =
// output tokens / seconds, total_tokens_per_s = (prompt + output) / seconds.
// In-process runs also give the median time to first token (from a
// prompt's admission to its first token) and the median time per output
// token after the first; server runs give the median request latency.
//
// Errors (qloom::Error): check_spec's kUsage for a bad spec (isl 0, osl past
// the context, concurrency 0); kNotFound for a server that does not answer;
// kInvalidInput for a server answer without usage, or with fewer completion
// tokens than OSL (a server that stops at EOS: it must honour ignore_eos /
// min_tokens); whatever load_for_eval throws for the model directory.
// Thread-safety: a Workload runs one run at a time; distinct workloads may
// share an EngineCache only from one thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <tuple>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/model/model_config.h"
#include "qloom/text/tokenizer.h"
#include "qloom/export/checkpoint_runtime.h"
#include "qloom/perf/throughput_protocol.h"

namespace qloom::perf {

using ProgressLog = std::function<void(const std::string&)>;

// How the in-process runner lays out work (the tuning knobs, perf_tuning.h).
struct RunnerSettings {
  unsigned threads = 0;      // compute threads; 0 = spec.threads (0 there: all cores)
  int64_t decode_batch = 0;  // sequences per forward_batch pass; 0 = up to 64 (as qloom serve)
  nlohmann::ordered_json to_json() const;  // {threads, decode_batch}
  static RunnerSettings from_json(const nlohmann::ordered_json& j, const std::string& where);
  bool operator==(const RunnerSettings&) const = default;
};

// One run over all prompts.
struct RunSample {
  double tokens_per_s = 0;
  double seconds = 0;
  int64_t output_tokens = 0;
  int64_t prompt_tokens = 0;
  double total_tokens_per_s = 0;
  std::optional<double> ttft_ms_median;     // in-process only
  std::optional<double> tpot_ms_median;     // in-process only (OSL >= 2)
  std::optional<double> latency_ms_median;  // server only
  nlohmann::ordered_json to_json() const;   // the fields above, absent optionals as null
  static RunSample from_json(const nlohmann::ordered_json& j, const std::string& where);
};

struct ThroughputMeasurement {
  std::string label;      // e.g. "baseline", "quantized"
  std::string model_dir;  // absolute
  std::string runtime;    // "simulate" (in-process, or qloom serve) or "server"
  std::string backend;    // "qloom" in-process; the server's owned_by family otherwise
  std::vector<RunSample> runs;
  RunSample warmup;
  double median_tokens_per_s = 0;
  double relative_mad = 0;
  bool stable = false;
  int timed_samples = 0;
  double median_total_tokens_per_s = 0;
  std::optional<double> ttft_ms_median, tpot_ms_median, latency_ms_median;  // medians over runs
  ThroughputSpec spec;
  RunnerSettings settings;  // as run (threads resolved to a count)
  int64_t num_prompts = 0;
  std::string prompts_hash;  // throughput_protocol.h prompts_hash
  std::string note;          // what the runtime is, in words

  // {label, model_dir, runtime, backend, runs, warmup, median_tokens_per_s,
  // relative_mad, stable, timed_samples, median_total_tokens_per_s,
  // ttft_ms_median, tpot_ms_median, latency_ms_median, spec, settings,
  // num_prompts, prompts_hash, note}
  nlohmann::ordered_json to_json() const;
  static ThroughputMeasurement from_json(const nlohmann::ordered_json& j, const std::string& where);
};

// The token ids prompts are drawn from (see the file comment), ascending.
std::vector<int32_t> prompt_token_pool(const text::Tokenizer& tok, const model::ModelConfig& cfg);

// Loaded engines keyed by (model directory, threads, runtime), so workloads
// that differ only in batch layout share one copy of the weights. Runtime
// "native": quantized linears on the native kernels, bf16 compute for the
// rest (as served); "simulate": Quark's arithmetic in fp32.
class EngineCache {
 public:
  std::shared_ptr<exporter::LoadedModel> get(const std::filesystem::path& model_dir, unsigned threads,
                                             const std::string& runtime = "native");
  void clear() { models_.clear(); }

 private:
  std::map<std::tuple<std::string, unsigned, std::string>, std::shared_ptr<exporter::LoadedModel>> models_;
};

// A model + spec + settings ready to run (prompts generated, model loaded or
// server probed).
class Workload {
 public:
  virtual ~Workload() = default;
  virtual RunSample run() = 0;
  virtual bool in_process() const = 0;
  // False when sequences must decode one at a time (in-process only).
  virtual bool rows_independent() const = 0;
  virtual std::string runtime() const = 0;
  virtual std::string backend() const = 0;
  virtual std::string note() const = 0;
  const std::string& model_dir() const { return model_dir_; }
  const ThroughputSpec& spec() const { return spec_; }
  const RunnerSettings& settings() const { return settings_; }
  const std::vector<std::vector<int32_t>>& prompts() const { return prompts_; }

 protected:
  std::string model_dir_;
  ThroughputSpec spec_;
  RunnerSettings settings_;
  std::vector<std::vector<int32_t>> prompts_;
};

// `cache` (may be null) lends the engine for in-process workloads.
std::unique_ptr<Workload> open_workload(const std::filesystem::path& model_dir, const ThroughputSpec& spec,
                                        const RunnerSettings& settings = {}, EngineCache* cache = nullptr);

// One warm-up run, then the timed runs of the protocol.
ThroughputMeasurement measure_workload(Workload& w, const std::string& label, const ProtocolLimits& limits,
                                       const ProgressLog& log = {});
ThroughputMeasurement measure_throughput(const std::filesystem::path& model_dir, const std::string& label,
                                         const ThroughputSpec& spec, const ProtocolLimits& limits = {},
                                         const ProgressLog& log = {});

struct AbbaResult {
  std::string a_label, b_label;
  double a1 = 0, b1 = 0, b2 = 0, a2 = 0;  // median output tokens/s of each leg
  double gain = 0;                        // sqrt(b1*b2 / (a1*a2))
  double max_relative_mad = 0;            // over the four legs
  bool stable = false;                    // every leg stable
  std::vector<ThroughputMeasurement> legs;  // A1 B1 B2 A2 (empty for scripted results)

  // {a_label, b_label, a1, b1, b2, a2, gain, max_relative_mad, stable, legs}
  nlohmann::ordered_json to_json() const;
  static AbbaResult from_json(const nlohmann::ordered_json& j, const std::string& where);
};

// From four figures (legs left empty).
AbbaResult abba_of(double a1, double b1, double b2, double a2, double max_relative_mad, bool stable);

// Measures A, B, B, A (each a full measurement, warm-up included). Throws
// kInvalidInput when the two workloads' prompts differ (prompts_hash): the
// models' vocabularies differ and the comparison would mean nothing.
AbbaResult abba(Workload& a, const std::string& a_label, Workload& b, const std::string& b_label,
                const ProtocolLimits& limits = {}, const ProgressLog& log = {});
// Convenience: baseline (A) vs quantized (B), both in-process with `spec`.
// A spec with a server is refused (kUsage, --server): one server serves one
// model, so open a workload per server and use the overload above.
AbbaResult abba(const std::filesystem::path& baseline_dir, const std::filesystem::path& quantized_dir,
                const ThroughputSpec& spec, const ProtocolLimits& limits = {}, const ProgressLog& log = {});

}  // namespace qloom::perf
