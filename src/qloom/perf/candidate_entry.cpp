#include "qloom/perf/candidate_entry.h"

#include <algorithm>

#include "qloom/perf/partitions.h"
#include "qloom/core/error.h"
#include "qloom/perf/search_json.h"

namespace qloom::perf {
namespace {

// Layer overrides sort by (layer, partition order); names are "layers.N.<partition>".
bool unit_less(const std::string& a, const std::string& b) {
  const int la = layer_of(a), lb = layer_of(b);
  if (la != lb) return la < lb;
  const size_t pa = partition_rank(a.substr(a.rfind('.') + 1)), pb = partition_rank(b.substr(b.rfind('.') + 1));
  return pa != pb ? pa < pb : a < b;
}

}  // namespace

std::string CandidateConfig::precision_of(std::string_view partition) const {
  for (const auto& [p, prec] : partitions)
    if (p == partition) return prec;
  return {};
}

std::string CandidateConfig::precision_of(const SearchUnit& unit) const {
  for (const auto& [u, prec] : layers)
    if (u == unit.name) return prec;
  return precision_of(unit.partition);
}

std::string CandidateConfig::canonical() const {
  std::string s;
  for (const auto& [p, prec] : partitions) s += p + "=" + prec + ",";
  s += "kv_cache=" + kv_cache;
  for (const auto& [u, prec] : layers) s += "," + u + "=" + prec;
  return s;
}

void check_status(const std::string& status, const std::string& where) {
  for (const char* s : {kStatusPending, kStatusExported, kStatusAccepted, kStatusRejected, kStatusSkipped})
    if (status == s) return;
  throw Error(ErrorKind::kUsage, "", where, "unknown candidate status '" + status + "'",
              "use pending, exported, accepted, rejected or skipped");
}

nlohmann::ordered_json to_json(const CandidateConfig& c) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [p, prec] : c.partitions) j[p] = prec;
  j["kv_cache"] = c.kv_cache;
  if (!c.layers.empty()) {
    nlohmann::ordered_json l = nlohmann::ordered_json::object();
    for (const auto& [u, prec] : c.layers) l[u] = prec;
    j["layers"] = std::move(l);
  }
  return j;
}

nlohmann::ordered_json to_json(const SearchMetrics& m) {
  using detail::number_or_null;
  nlohmann::ordered_json j;
  j["proxy_kld"] = number_or_null(m.proxy_kld);
  j["proxy_kld_stderr"] = number_or_null(m.proxy_kld_stderr);
  j["proxy_top1"] = number_or_null(m.proxy_top1);
  j["proxy_ppl_ratio"] = number_or_null(m.proxy_ppl_ratio);
  j["predicted_kld"] = m.predicted_kld;
  j["bits_per_weight"] = m.bits_per_weight;
  j["bytes_per_token"] = m.bytes_per_token;
  j["modelled_gain"] = m.modelled_gain;
  j["proxy_seconds"] = number_or_null(m.proxy_seconds);
  return j;
}

nlohmann::ordered_json to_json(const CandidateEntry& e) {
  nlohmann::ordered_json j;
  j["config"] = to_json(e.config);
  j["search_metrics"] = to_json(e.search_metrics);
  j["relative_change"] = detail::number_or_null(e.relative_change);
  j["rank"] = e.rank;
  j["status"] = e.status;
  j["real_gate"] = e.real_gate;
  return j;
}

nlohmann::ordered_json to_json(const std::vector<CandidateEntry>& queue) {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  for (const CandidateEntry& e : queue) j.push_back(to_json(e));
  return j;
}

CandidateConfig candidate_config_from_json(const nlohmann::json& j, const std::string& where) {
  using namespace detail;
  require_object(j, where);
  CandidateConfig c;
  c.kv_cache = get_string(j, where, "kv_cache");
  for (const std::string& p : partition_names())
    if (j.contains(p)) c.partitions.emplace_back(p, get_string(j, where, p.c_str()));
  for (const auto& [key, value] : j.items()) {
    if (key == "kv_cache" || key == "layers" || partition_rank(key) < partition_names().size()) continue;
    bad_field(where + "." + key, "not a partition (self_attn, dense_mlp, routed_moe, shared_expert), kv_cache or layers");
  }
  if (c.partitions.empty()) bad_field(where, "no partition precision");
  if (const auto it = j.find("layers"); it != j.end()) {
    require_object(*it, where + ".layers");
    for (const auto& [unit, prec] : it->items()) {
      if (!prec.is_string() || layer_of(unit) < 0)
        bad_field(where + ".layers." + unit, "expected \"layers.N.<partition>\": \"<precision>\"");
      c.layers.emplace_back(unit, prec.get<std::string>());
    }
    std::sort(c.layers.begin(), c.layers.end(), [](const auto& a, const auto& b) { return unit_less(a.first, b.first); });
  }
  return c;
}

SearchMetrics search_metrics_from_json(const nlohmann::json& j, const std::string& where) {
  using namespace detail;
  SearchMetrics m;
  m.proxy_kld = get_optional_number(j, where, "proxy_kld");
  m.proxy_kld_stderr = get_optional_number(j, where, "proxy_kld_stderr");
  m.proxy_top1 = get_optional_number(j, where, "proxy_top1");
  m.proxy_ppl_ratio = get_optional_number(j, where, "proxy_ppl_ratio");
  m.predicted_kld = get_number(j, where, "predicted_kld");
  m.bits_per_weight = get_number(j, where, "bits_per_weight");
  const int64_t bytes = get_int(j, where, "bytes_per_token");
  if (bytes < 0) bad_field(where + ".bytes_per_token", "must not be negative");
  m.bytes_per_token = uint64_t(bytes);
  m.modelled_gain = get_number(j, where, "modelled_gain");
  m.proxy_seconds = get_optional_number(j, where, "proxy_seconds");
  return m;
}

CandidateEntry candidate_entry_from_json(const nlohmann::json& j, const std::string& where) {
  using namespace detail;
  CandidateEntry e;
  e.config = candidate_config_from_json(field(j, where, "config"), where + ".config");
  e.search_metrics = search_metrics_from_json(field(j, where, "search_metrics"), where + ".search_metrics");
  e.relative_change = get_optional_number(j, where, "relative_change");
  e.rank = int(get_int(j, where, "rank"));
  e.status = get_string(j, where, "status");
  try {
    check_status(e.status, where + ".status");
  } catch (const Error& err) {
    bad_field(where + ".status", err.message());
  }
  e.real_gate = nlohmann::ordered_json::parse(field(j, where, "real_gate").dump());
  return e;
}

std::vector<CandidateEntry> candidate_queue_from_json(const nlohmann::json& j, const std::string& where) {
  detail::require_array(j, where);
  std::vector<CandidateEntry> q;
  for (size_t i = 0; i < j.size(); ++i) q.push_back(candidate_entry_from_json(j[i], where + "[" + std::to_string(i) + "]"));
  return q;
}

CandidateEntry candidate_entry_from_json(const nlohmann::ordered_json& j, const std::string& where) {
  CandidateEntry e = candidate_entry_from_json(nlohmann::json::parse(j.dump()), where);
  e.real_gate = j.at("real_gate");  // present: checked above
  return e;
}

std::vector<CandidateEntry> candidate_queue_from_json(const nlohmann::ordered_json& j, const std::string& where) {
  if (!j.is_array()) detail::bad_field(where, "expected a JSON array");
  std::vector<CandidateEntry> q;
  for (size_t i = 0; i < j.size(); ++i) q.push_back(candidate_entry_from_json(j[i], where + "[" + std::to_string(i) + "]"));
  return q;
}

size_t proxied_count(const std::vector<CandidateEntry>& q) {
  return size_t(std::count_if(q.begin(), q.end(), [](const CandidateEntry& e) { return e.proxied(); }));
}

}  // namespace qloom::perf
