// One mixed-precision candidate as state.json stores it in
// mix_precision_search.candidate_queue[] / result.all_results[]:
//
//   { "config": {"self_attn": "fp8", "dense_mlp": "int4_wo_128", "kv_cache": "native"},
//     "search_metrics": { "proxy_kld": 0.0123, "proxy_kld_stderr": 0.0004, "proxy_top1": 0.93,
//                         "proxy_ppl_ratio": 1.011, "predicted_kld": 0.011,
//                         "bits_per_weight": 5.1, "bytes_per_token": 123456789,
//                         "modelled_gain": 2.9, "proxy_seconds": 1.7 },
//     "relative_change": 0.011, "rank": 1, "status": "accepted", "real_gate": null }
//
// config: one precision per present partition (canonical partition order),
// then kv_cache; at --granularity layer, optionally "layers": {"layers.3.dense_mlp":
// "fp8", ...} — the units that differ from their partition's precision.
// proxy_* / proxy_seconds / relative_change are null until the proxy scored the
// candidate; real_gate is null until the real accuracy gate ran (the gate
// helper's AccuracyValidation JSON, kept verbatim).
// status: pending | exported | accepted | rejected | skipped.
//
// Errors: from_json throws Error(kInvalidInput) naming the JSON path.
// Pure value types; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/perf/partitions.h"

namespace qloom::perf {

struct CandidateConfig {
  std::vector<std::pair<std::string, std::string>> partitions;  // (partition, precision), canonical order
  std::string kv_cache = "native";
  std::vector<std::pair<std::string, std::string>> layers;  // (unit, precision) overrides, by (layer, partition)

  // The partition's precision; "" when the partition is not in the config.
  std::string precision_of(std::string_view partition) const;
  // The unit's precision: its layer override, else its partition's.
  std::string precision_of(const SearchUnit& unit) const;
  // "self_attn=fp8,dense_mlp=int4_wo_128,kv_cache=native[,layers.3.dense_mlp=fp8...]":
  // a total order key and a stable identity.
  std::string canonical() const;
  bool operator==(const CandidateConfig&) const = default;
};

struct SearchMetrics {
  std::optional<double> proxy_kld, proxy_kld_stderr, proxy_top1, proxy_ppl_ratio;
  double predicted_kld = 0;
  double bits_per_weight = 0;   // stored bits per searched weight element (param-weighted)
  uint64_t bytes_per_token = 0; // modelled bytes moved per decoded token (candidates.h)
  double modelled_gain = 1;     // baseline bytes_per_token / this one
  std::optional<double> proxy_seconds;
  bool operator==(const SearchMetrics&) const = default;
};

inline constexpr const char* kStatusPending = "pending";
inline constexpr const char* kStatusExported = "exported";
inline constexpr const char* kStatusAccepted = "accepted";
inline constexpr const char* kStatusRejected = "rejected";
inline constexpr const char* kStatusSkipped = "skipped";
// kUsage (naming `where`) for anything else.
void check_status(const std::string& status, const std::string& where);

struct CandidateEntry {
  CandidateConfig config;
  SearchMetrics search_metrics;
  std::optional<double> relative_change;  // the proxy's estimate of the gate gap
  int rank = 0;                           // 1-based queue position (1 = fastest)
  std::string status = kStatusPending;
  nlohmann::ordered_json real_gate;       // null until gated
  bool proxied() const { return relative_change.has_value(); }
  bool operator==(const CandidateEntry&) const = default;
};

nlohmann::ordered_json to_json(const CandidateConfig& c);
nlohmann::ordered_json to_json(const SearchMetrics& m);
nlohmann::ordered_json to_json(const CandidateEntry& e);
nlohmann::ordered_json to_json(const std::vector<CandidateEntry>& queue);

CandidateConfig candidate_config_from_json(const nlohmann::json& j, const std::string& where);
SearchMetrics search_metrics_from_json(const nlohmann::json& j, const std::string& where);
CandidateEntry candidate_entry_from_json(const nlohmann::json& j, const std::string& where);
// How many candidates of the queue have been measured (proxied()).
size_t proxied_count(const std::vector<CandidateEntry>& q);

std::vector<CandidateEntry> candidate_queue_from_json(
    const nlohmann::json& j, const std::string& where = "mix_precision_search.candidate_queue");
// The same from an ordered_json document: real_gate keeps its key order, so a
// queue read back and written again is byte-identical.
CandidateEntry candidate_entry_from_json(const nlohmann::ordered_json& j, const std::string& where);
std::vector<CandidateEntry> candidate_queue_from_json(
    const nlohmann::ordered_json& j, const std::string& where = "mix_precision_search.candidate_queue");

}  // namespace qloom::perf
