// qloom perf — the throughput protocol (issue 13 item 6, the seed's rules),
// without any model: the workload spec, the random prompts, and the
// statistics that turn timed runs into one figure.
//
// Prompts: `count` prompts of `isl` token ids each, drawn from `pool` (the
// allowed ids, ascending; see throughput.h for how a model's pool is built)
// by one std::mt19937_64 seeded with `seed` (the standard fixes its output
// sequence on every platform). Each id is pool[uniform_index(gen, pool.size())]
// where uniform_index draws r = gen() until r < 2^64 - (2^64 mod n) and returns
// r mod n (no modulo bias; std::uniform_int_distribution is not used because
// its algorithm is implementation-defined). Prompt 0's ids come first, then
// prompt 1's, and so on.
//
// Number of prompts: num_prompts_override when > 0, else concurrency x
// factor, factor 10 when isl + osl <= 1024, 5 when <= 4096, 3 when <= 16384,
// else 2.
//
// Statistics over the timed runs' output tokens/s: median (the mean of the
// two middle values for an even count) and relative MAD = median(|x_i -
// median|) / median. After `timed_samples` runs one more is added while the
// relative MAD > extra_run_mad and fewer than max_timed_samples ran; the
// figure is stable when its relative MAD <= stability_relative_mad.
// ABBA: A1 B1 B2 A2, gain = sqrt(B1*B2 / (A1*A2)).
//
// Errors: qloom::Error kUsage naming the flag for a spec or limits outside
// these rules (check_spec, check_limits); kInvalidInput for statistics of no
// values or non-positive / non-finite rates. All functions are pure and
// thread-safe.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qloom::perf {

// The workload of one throughput measurement.
struct ThroughputSpec {
  int64_t isl = 1024;          // prompt tokens per request
  int64_t osl = 1024;          // output tokens per request (EOS ignored)
  int64_t concurrency = 64;    // requests in flight
  uint64_t seed = 1234;        // prompt generator seed
  unsigned threads = 0;        // in-process compute threads, 0 = all cores
  std::string server;          // OpenAI-compatible base URL; empty = in-process engine
  std::string served_model;    // the server's model id; empty = the first it lists
  std::string api_key;         // bearer token for the server (never written to JSON)
  int64_t num_prompts_override = 0;  // > 0: this many prompts instead of concurrency x factor
  // In-process: "native" (quantized kernels, bf16 compute) or "simulate".
  std::string runtime = "native";

  // {isl, osl, concurrency, seed, threads, server (null when empty),
  // served_model (null when empty), api_key: "***" when set else null,
  // num_prompts_override, runtime}. from_json reads the same (api_key stays empty);
  // a missing or mistyped field is Error kInvalidInput naming `where` and it.
  nlohmann::ordered_json to_json() const;
  static ThroughputSpec from_json(const nlohmann::ordered_json& j, const std::string& where);
};

struct ProtocolLimits {
  int timed_samples = 3;
  int max_timed_samples = 4;
  double extra_run_mad = 0.01;
  double stability_relative_mad = 0.015;
  // {timed_samples, max_timed_samples, extra_run_mad, stability_relative_mad}
  nlohmann::ordered_json to_json() const;
};

// Refuses (kUsage, naming --isl / --osl / --bench-concurrency /
// --num-prompts) isl < 1, osl < 1, concurrency < 1, a negative override, and
// isl + osl over `context` when context > 0 (the model's positions).
void check_spec(const ThroughputSpec& spec, int64_t context);
// Refuses timed_samples < 1, max_timed_samples < timed_samples, negative or
// non-finite MAD thresholds.
void check_limits(const ProtocolLimits& limits);

int prompt_factor(int64_t isl, int64_t osl);
int64_t num_prompts(const ThroughputSpec& spec);

// Unbiased index in [0, n) from `gen` (see the file comment); n >= 1.
uint64_t uniform_index(std::mt19937_64& gen, uint64_t n);
// Throws kInvalidInput for an empty pool, kUsage for isl < 1 or count < 0.
std::vector<std::vector<int32_t>> random_prompts(const std::vector<int32_t>& pool, int64_t count, int64_t isl,
                                                 uint64_t seed);
// FNV-1a 64 over every id as 4 little-endian bytes, prompts in order, each
// prompt followed by the 4 bytes of its length; printed as 16 hex digits.
std::string prompts_hash(const std::vector<std::vector<int32_t>>& prompts);

double median(std::vector<double> values);
double relative_mad(const std::vector<double>& values);
// True when another timed run is due (see the file comment).
bool needs_extra_run(const std::vector<double>& rates, const ProtocolLimits& limits);
bool is_stable(double rel_mad, const ProtocolLimits& limits);
double abba_gain(double a1, double b1, double b2, double a2);

// Readers for the from_json functions of the throughput and tuning structs:
// j[key] of the given type, else Error kInvalidInput naming `where` and key.
namespace json_read {
const nlohmann::ordered_json& field(const nlohmann::ordered_json& j, const char* key, const std::string& where);
int64_t integer(const nlohmann::ordered_json& j, const char* key, const std::string& where);
double number(const nlohmann::ordered_json& j, const char* key, const std::string& where);
bool boolean(const nlohmann::ordered_json& j, const char* key, const std::string& where);
// A string, or "" for null.
std::string text(const nlohmann::ordered_json& j, const char* key, const std::string& where);
}  // namespace json_read

}  // namespace qloom::perf
