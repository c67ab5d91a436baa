#include "qloom/perf/throughput_protocol.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "qloom/core/error.h"

namespace qloom::perf {
namespace {

using Json = nlohmann::ordered_json;

[[noreturn]] void protocol_usage(const std::string& flag, const std::string& message, const std::string& remedy) {
  throw Error(ErrorKind::kUsage, "", flag, message, remedy);
}

// Every rate must be a positive finite number; `what` names it in the error.
void check_rate(double v, const std::string& what) {
  if (!std::isfinite(v) || v <= 0)
    throw_invalid("", what, "a throughput figure must be positive and finite, got " + std::to_string(v),
                  "re-run the measurement; a zero rate means no tokens were produced");
}

}  // namespace

// ---- spec ----

Json ThroughputSpec::to_json() const {
  Json j;
  j["isl"] = isl;
  j["osl"] = osl;
  j["concurrency"] = concurrency;
  j["seed"] = seed;
  j["threads"] = threads;
  j["server"] = server.empty() ? Json() : Json(server);
  j["served_model"] = served_model.empty() ? Json() : Json(served_model);
  j["api_key"] = api_key.empty() ? Json() : Json("***");
  j["num_prompts_override"] = num_prompts_override;
  j["runtime"] = runtime;
  return j;
}

ThroughputSpec ThroughputSpec::from_json(const Json& j, const std::string& where) {
  ThroughputSpec s;
  s.isl = json_read::integer(j, "isl", where);
  s.osl = json_read::integer(j, "osl", where);
  s.concurrency = json_read::integer(j, "concurrency", where);
  const int64_t seed = json_read::integer(j, "seed", where);
  if (seed < 0) throw_invalid(where, "seed", "the seed must not be negative");
  s.seed = uint64_t(seed);
  const int64_t threads = json_read::integer(j, "threads", where);
  if (threads < 0 || threads > 65536) throw_invalid(where, "threads", "threads must be in [0, 65536]");
  s.threads = unsigned(threads);
  s.server = json_read::text(j, "server", where);
  s.served_model = json_read::text(j, "served_model", where);
  s.num_prompts_override = json_read::integer(j, "num_prompts_override", where);
  s.runtime = j.contains("runtime") ? json_read::text(j, "runtime", where) : "simulate";  // before issue 14
  if (s.runtime != "native" && s.runtime != "simulate") throw_invalid(where, "runtime", "runtime must be native or simulate");
  return s;
}

Json ProtocolLimits::to_json() const {
  return {{"timed_samples", timed_samples},
          {"max_timed_samples", max_timed_samples},
          {"extra_run_mad", extra_run_mad},
          {"stability_relative_mad", stability_relative_mad}};
}

void check_spec(const ThroughputSpec& spec, int64_t context) {
  if (spec.isl < 1)
    protocol_usage("--isl", "the input length must be at least 1 token (got " + std::to_string(spec.isl) + ")",
          "pass --isl 1024 or another positive length");
  if (spec.osl < 1)
    protocol_usage("--osl", "the output length must be at least 1 token (got " + std::to_string(spec.osl) + ")",
          "pass --osl 1024 or another positive length");
  if (spec.concurrency < 1)
    protocol_usage("--bench-concurrency",
          "the benchmark concurrency must be at least 1 (got " + std::to_string(spec.concurrency) + ")",
          "pass --bench-concurrency 64 or another positive count");
  if (spec.num_prompts_override < 0)
    protocol_usage("--num-prompts", "the prompt count override must not be negative", "pass 0 for concurrency x factor");
  if (context > 0 && spec.isl > context - spec.osl)
    protocol_usage("--isl,--osl",
          "isl + osl = " + std::to_string(spec.isl + spec.osl) + " tokens is over the model's context of " +
              std::to_string(context) + " positions",
          "lower --isl or --osl so that their sum is at most " + std::to_string(context));
}

void check_limits(const ProtocolLimits& l) {
  if (l.timed_samples < 1) protocol_usage("timed_samples", "at least one timed run is needed", "use 3 (the protocol's)");
  if (l.max_timed_samples < l.timed_samples)
    protocol_usage("max_timed_samples", "max_timed_samples is below timed_samples", "use 4 (the protocol's)");
  for (double v : {l.extra_run_mad, l.stability_relative_mad})
    if (!std::isfinite(v) || v < 0)
      protocol_usage("stability_relative_mad", "MAD thresholds must be finite and >= 0", "use 0.01 and 0.015");
}

int prompt_factor(int64_t isl, int64_t osl) {
  const int64_t n = isl + osl;
  if (n <= 1024) return 10;
  if (n <= 4096) return 5;
  if (n <= 16384) return 3;
  return 2;
}

int64_t num_prompts(const ThroughputSpec& spec) {
  if (spec.num_prompts_override > 0) return spec.num_prompts_override;
  return spec.concurrency * prompt_factor(spec.isl, spec.osl);
}

// ---- prompts ----

uint64_t uniform_index(std::mt19937_64& gen, uint64_t n) {
  if (n == 0) throw Error(ErrorKind::kInternal, "", "n", "uniform_index over an empty range");
  // 2^64 mod n, computed in 64-bit arithmetic: (2^64 - n) mod n.
  const uint64_t rest = (uint64_t(0) - n) % n;
  const uint64_t limit = uint64_t(0) - rest;  // 2^64 - rest; 0 stands for 2^64 (rest == 0)
  for (;;) {
    const uint64_t r = gen();
    if (rest == 0 || r < limit) return r % n;
  }
}

std::vector<std::vector<int32_t>> random_prompts(const std::vector<int32_t>& pool, int64_t count, int64_t isl,
                                                 uint64_t seed) {
  if (pool.empty())
    throw_invalid("", "vocabulary", "no token id is left to draw prompts from",
                  "the model's vocabulary holds only special tokens; use another model");
  if (isl < 1) protocol_usage("--isl", "the input length must be at least 1 token", "pass a positive --isl");
  if (count < 0) protocol_usage("--num-prompts", "the prompt count must not be negative", "");
  std::mt19937_64 gen(seed);
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(count), std::vector<int32_t>(static_cast<size_t>(isl)));
  for (auto& p : prompts)
    for (int32_t& id : p) id = pool[size_t(uniform_index(gen, pool.size()))];
  return prompts;
}

std::string prompts_hash(const std::vector<std::vector<int32_t>>& prompts) {
  uint64_t h = 1469598103934665603ull;
  auto feed = [&h](uint32_t v) {
    for (int b = 0; b < 4; ++b) {
      h ^= (v >> (8 * b)) & 0xffu;
      h *= 1099511628211ull;
    }
  };
  for (const auto& p : prompts) {
    for (int32_t id : p) feed(uint32_t(id));
    feed(uint32_t(p.size()));
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// ---- statistics ----

double median(std::vector<double> v) {
  if (v.empty()) throw_invalid("", "runs", "the median of no values is undefined", "run at least one timed run");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double relative_mad(const std::vector<double>& values) {
  for (double v : values) check_rate(v, "runs[].tokens_per_s");
  const double m = median(values);
  std::vector<double> dev;
  dev.reserve(values.size());
  for (double v : values) dev.push_back(std::fabs(v - m));
  return median(std::move(dev)) / m;
}

bool needs_extra_run(const std::vector<double>& rates, const ProtocolLimits& limits) {
  const auto n = int(rates.size());
  if (n < limits.timed_samples) return true;
  if (n >= limits.max_timed_samples) return false;
  return relative_mad(rates) > limits.extra_run_mad;
}

bool is_stable(double rel_mad, const ProtocolLimits& limits) { return rel_mad <= limits.stability_relative_mad; }

double abba_gain(double a1, double b1, double b2, double a2) {
  check_rate(a1, "abba.a1");
  check_rate(b1, "abba.b1");
  check_rate(b2, "abba.b2");
  check_rate(a2, "abba.a2");
  return std::sqrt((b1 / a1) * (b2 / a2));
}

// ---- JSON readers ----

namespace json_read {

const Json& field(const Json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key))
    throw_invalid(where, key, std::string("the field '") + key + "' is missing",
                  "the file was not written by this qloom version; re-run the measurement");
  return j[key];
}

int64_t integer(const Json& j, const char* key, const std::string& where) {
  const Json& v = field(j, key, where);
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())))
    throw_invalid(where, key, std::string("'") + key + "' must be an integer, got " + v.dump());
  return v.get<int64_t>();
}

double number(const Json& j, const char* key, const std::string& where) {
  const Json& v = field(j, key, where);
  if (!v.is_number()) throw_invalid(where, key, std::string("'") + key + "' must be a number, got " + v.dump());
  return v.get<double>();
}

bool boolean(const Json& j, const char* key, const std::string& where) {
  const Json& v = field(j, key, where);
  if (!v.is_boolean()) throw_invalid(where, key, std::string("'") + key + "' must be true or false, got " + v.dump());
  return v.get<bool>();
}

std::string text(const Json& j, const char* key, const std::string& where) {
  const Json& v = field(j, key, where);
  if (v.is_null()) return {};
  if (!v.is_string()) throw_invalid(where, key, std::string("'") + key + "' must be a string, got " + v.dump());
  return v.get<std::string>();
}

}  // namespace json_read
}  // namespace qloom::perf
