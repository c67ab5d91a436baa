#include "qloom/perf/candidates.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "qloom/core/error.h"

namespace qloom::perf {
namespace {

constexpr double kOutputBits = 16;  // a linear writes its output in the served dtype

// Precision levels of one layer's partitions (layer -1 at partition granularity).
using LayerLevels = std::map<int, std::map<std::string, const Precision*>>;

LayerLevels layer_precisions(const PartitionPlan& plan, const CandidateConfig& c) {
  LayerLevels out;
  for (const SearchUnit& u : plan.units) out[u.layer][u.partition] = &get_precision(c.precision_of(u), "config");
  return out;
}

std::string where_of(int layer) { return layer < 0 ? std::string() : " in layer " + std::to_string(layer); }

double kv_bytes_per_token(const ModelGeometry& g, const std::string& kv, const BytesModel& m) {
  const double elem = kv == "fp8" ? 1.0 : dtype_bits(g.model_dtype) / 8.0;
  const int64_t ctx = m.isl + m.osl / 2;
  double b = 0;
  for (int64_t l = 0; l < g.num_layers; ++l) {
    const bool sliding = size_t(l) < g.layer_sliding.size() && g.layer_sliding[size_t(l)] && g.sliding_window > 0;
    b += 2.0 * double(g.num_kv_heads * g.head_dim) * double(sliding ? std::min(ctx, g.sliding_window) : ctx) * elem;
  }
  return b;
}

// Gains differing only by a few scale bytes are the same speed: round to 1e-4
// so that such configs tie and their predicted KLD decides.
double round_gain(double g) { return std::round(g * 1e4) / 1e4; }

CandidateEntry make_entry(const PartitionPlan& plan, const SensitivityTable& s, CandidateConfig c, const BytesModel& m,
                          double baseline) {
  CandidateEntry e;
  const BytesEstimate b = estimate_bytes(plan, c, m);
  e.search_metrics.predicted_kld = predicted_kld(plan, s, c);
  e.search_metrics.bits_per_weight = b.bits_per_weight;
  e.search_metrics.bytes_per_token = uint64_t(std::llround(b.bytes_per_token));
  e.search_metrics.modelled_gain = round_gain(baseline / b.bytes_per_token);
  e.config = std::move(c);
  return e;
}

bool fits_all(const PartitionPlan& plan, const SensitivityTable& s, const CandidateConfig& c) {
  for (const SearchUnit& u : plan.units)
    if (!s.fits(u.name, c.precision_of(u))) return false;
  return true;
}

// The next more precise candidate than `p`: the lowest level above it, first
// listed on ties; native when none.
const Precision& next_more_precise(const std::vector<Precision>& candidates, const Precision& p) {
  const Precision* best = nullptr;
  for (const Precision& q : candidates)
    if (q.level > p.level && (!best || q.level < best->level)) best = &q;
  return best ? *best : get_precision(kNative);
}

// The protected layers of one partition at precision `p` (file comment rule).
std::vector<const SearchUnit*> protected_units(const PartitionPlan& plan, const SensitivityTable& s,
                                               const std::string& partition, const std::string& p) {
  std::vector<std::pair<double, const SearchUnit*>> by_kld;
  double total = 0;
  for (const SearchUnit* u : plan.units_of(partition)) {
    const double k = s.kld(u->name, p);
    by_kld.emplace_back(k, u);
    total += k;
  }
  std::stable_sort(by_kld.begin(), by_kld.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  const size_t cap = (by_kld.size() + 3) / 4;
  const double mean = by_kld.empty() ? 0 : total / double(by_kld.size());
  std::vector<const SearchUnit*> out;
  double held = 0;
  for (const auto& [k, u] : by_kld) {
    if (out.size() >= cap || held >= 0.5 * total || k <= mean) break;
    out.push_back(u);
    held += k;
  }
  return out;
}

// Restores the hierarchy of a layer variant in place (see the header).
void repair_layers(const PartitionPlan& plan, const SensitivityTable& s, bool attention_overrides, CandidateConfig& c) {
  std::map<std::string, std::string> over(c.layers.begin(), c.layers.end());
  auto unit_name = [](int layer, const std::string& part) { return "layers." + std::to_string(layer) + "." + part; };
  for (const auto& [layer, parts] : layer_precisions(plan, c)) {
    const auto attn = parts.find("self_attn");
    for (const char* mlp : {"dense_mlp", "routed_moe"}) {
      const auto m = parts.find(mlp);
      if (attn == parts.end() || m == parts.end() || attn->second->level >= m->second->level) continue;
      const std::string attn_unit = unit_name(layer, "self_attn");
      if (attention_overrides && s.fits(attn_unit, m->second->name)) over[attn_unit] = m->second->name;
      else over.erase(unit_name(layer, mlp));
    }
    const auto shared = parts.find("shared_expert"), routed = parts.find("routed_moe");
    if (shared != parts.end() && routed != parts.end() && !shared->second->is_native()) {
      const std::string su = unit_name(layer, "shared_expert");
      if (s.fits(su, routed->second->name)) over[su] = routed->second->name;
    }
  }
  c.layers.clear();
  for (const SearchUnit& u : plan.units) {
    const auto it = over.find(u.name);
    if (it != over.end() && it->second != c.precision_of(u.partition)) c.layers.emplace_back(u.name, it->second);
  }
}

// The protected variant of a partition-level config, or nullopt when it
// would equal the config (or break the hierarchy even after repair).
std::optional<CandidateConfig> layer_variant(const PartitionPlan& plan, const SensitivityTable& s,
                                             const std::vector<Precision>& candidates, const CandidateConfig& base) {
  CandidateConfig v = base;
  // Under an fp8 KV cache Quark's format gives every k/v projection one spec
  // (candidate_export.h): attention keeps one precision for all layers.
  const bool attention_overrides = base.kv_cache != "fp8";
  for (const auto& [partition, pname] : base.partitions) {
    const Precision& p = get_precision(pname);
    if (p.is_native() || (partition == "self_attn" && !attention_overrides)) continue;
    const Precision& q = next_more_precise(candidates, p);
    for (const SearchUnit* u : protected_units(plan, s, partition, pname))
      if (s.fits(u->name, q.name)) v.layers.emplace_back(u->name, q.name);
  }
  if (v.layers.empty()) return std::nullopt;
  repair_layers(plan, s, attention_overrides, v);
  if (v.layers.empty() || !hierarchy_violation(plan, v).empty() || !fits_all(plan, s, v)) return std::nullopt;
  return v;
}

}  // namespace

BytesEstimate estimate_bytes(const PartitionPlan& plan, const CandidateConfig& c, const BytesModel& m) {
  if (m.isl < 0 || m.osl < 0 || m.concurrency < 1)
    throw Error(ErrorKind::kUsage, "", "--isl / --osl / --bench-concurrency",
                "the bytes model needs isl, osl >= 0 and a concurrency >= 1", "");
  const ModelGeometry& g = plan.geometry;
  BytesEstimate b;
  double weight_bits = double(g.fixed_bits_per_token), unit_bits = 0, act_bits = 0;
  for (const SearchUnit& u : plan.units) {
    const Precision& p = get_precision(c.precision_of(u), "config");
    for (const UnitModule& mod : u.modules) {
      unit_bits += double(stored_weight_bits(p, mod.rows, mod.cols, g.model_dtype));
      act_bits += double(mod.cols) * p.activation_bits + double(mod.rows) * kOutputBits;
    }
  }
  for (const NativeLinear& n : plan.native) act_bits += double(n.cols) * 16.0 + double(n.rows) * kOutputBits;
  weight_bits += unit_bits;
  b.weight_bytes = weight_bits / 8.0 / double(m.concurrency);
  b.kv_bytes = kv_bytes_per_token(g, c.kv_cache, m);
  b.activation_bytes = act_bits / 8.0;
  b.bytes_per_token = b.weight_bytes + b.kv_bytes + b.activation_bytes;
  b.bits_per_weight = plan.unit_params() ? unit_bits / double(plan.unit_params()) : 0;
  return b;
}

std::string hierarchy_violation(const PartitionPlan& plan, const CandidateConfig& c) {
  for (const auto& [layer, parts] : layer_precisions(plan, c)) {
    const auto attn = parts.find("self_attn");
    for (const char* mlp : {"dense_mlp", "routed_moe"}) {
      const auto m = parts.find(mlp);
      if (attn != parts.end() && m != parts.end() && attn->second->level < m->second->level)
        return "self_attn (" + attn->second->name + ") is less precise than " + mlp + " (" + m->second->name + ")" +
               where_of(layer);
    }
    const auto shared = parts.find("shared_expert"), routed = parts.find("routed_moe");
    if (shared != parts.end() && !shared->second->is_native() &&
        (routed == parts.end() || routed->second->name != shared->second->name))
      return "shared_expert (" + shared->second->name + ") is neither native nor routed_moe's precision" +
             where_of(layer);
  }
  return {};
}

double predicted_kld(const PartitionPlan& plan, const SensitivityTable& s, const CandidateConfig& c) {
  double k = 0;
  for (const SearchUnit& u : plan.units) k += s.kld(u.name, c.precision_of(u));
  if (c.kv_cache != kNative) k += s.kld(kKvCacheUnit, c.kv_cache);
  return k;
}

void rank_candidates(std::vector<CandidateEntry>& q) {
  std::vector<std::pair<std::string, CandidateEntry>> keyed;
  for (CandidateEntry& e : q) keyed.emplace_back(e.config.canonical(), std::move(e));
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
    const SearchMetrics &x = a.second.search_metrics, &y = b.second.search_metrics;
    if (x.modelled_gain != y.modelled_gain) return x.modelled_gain > y.modelled_gain;
    if (x.predicted_kld != y.predicted_kld) return x.predicted_kld < y.predicted_kld;
    return a.first < b.first;
  });
  q.clear();
  for (auto& [key, e] : keyed) {
    e.rank = int(q.size()) + 1;
    q.push_back(std::move(e));
  }
}

Enumeration enumerate_candidates(const PartitionPlan& plan, const SensitivityTable& s, const EnumerationOptions& o) {
  if (o.precisions.empty() || o.kv.empty())
    throw Error(ErrorKind::kUsage, "", "--layer-precision-candidates", "no candidate precision given", "");
  Enumeration out;
  const size_t k = plan.partitions.size(), n = o.precisions.size();
  double combos = std::pow(double(n), double(k)) * double(o.kv.size());
  if (combos > double(o.max_combinations))
    throw Error(ErrorKind::kUsage, "", "--layer-precision-candidates",
                std::to_string(n) + " precisions over " + std::to_string(k) + " partitions give " +
                    std::to_string(uint64_t(combos)) + " combinations, more than " +
                    std::to_string(o.max_combinations),
                "name fewer layer precisions");
  CandidateConfig baseline_cfg;
  for (const std::string& p : plan.partitions) baseline_cfg.partitions.emplace_back(p, kNative);
  out.baseline_bytes_per_token = estimate_bytes(plan, baseline_cfg, o.bytes).bytes_per_token;
  std::set<std::string> seen;
  std::vector<size_t> digit(k, 0);
  for (bool more = true; more;) {
    CandidateConfig c = baseline_cfg;
    bool quantized = false;
    for (size_t i = 0; i < k; ++i) {
      c.partitions[i].second = o.precisions[digit[i]].name;
      quantized = quantized || !o.precisions[digit[i]].is_native();
    }
    for (const std::string& kv : o.kv) {
      ++out.combinations;
      c.kv_cache = kv;
      if (!quantized) { ++out.dropped_nothing_quantized; continue; }
      if (!hierarchy_violation(plan, c).empty()) { ++out.dropped_hierarchy; continue; }
      if (!fits_all(plan, s, c)) { ++out.dropped_unfit; continue; }
      if (seen.insert(c.canonical()).second)
        out.queue.push_back(make_entry(plan, s, c, o.bytes, out.baseline_bytes_per_token));
      if (plan.granularity != Granularity::kLayer) continue;
      if (auto v = layer_variant(plan, s, o.precisions, c); v && seen.insert(v->canonical()).second) {
        out.queue.push_back(make_entry(plan, s, std::move(*v), o.bytes, out.baseline_bytes_per_token));
        ++out.layer_variants;
      }
    }
    size_t i = k;  // odometer over the partitions' precisions
    while (i > 0 && ++digit[i - 1] == n) digit[--i] = 0;
    more = i > 0;
  }
  if (out.queue.empty())
    throw Error(ErrorKind::kUsage, "", "--layer-precision-candidates",
                "no candidate survives the precision hierarchy and the layout rules (" +
                    std::to_string(out.dropped_hierarchy) + " break the hierarchy, " +
                    std::to_string(out.dropped_unfit) + " do not fit the weights)",
                "add precisions the model's linears can hold (e.g. fp8, int8)");
  rank_candidates(out.queue);
  return out;
}

}  // namespace qloom::perf
