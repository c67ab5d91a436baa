// Step 4 — fuzzy tensor names.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "qloom/io/weight_index.h"
#include "qloom/validate/checks.h"
#include "qloom/validate/name_patterns.h"
#include "qloom/validate/step_util.h"

namespace qloom::validate {

namespace {

using detail::list_items;
using detail::plural;
using oj = nlohmann::ordered_json;

struct PatternStats {
  uint64_t count = 0;
  std::map<std::string, uint64_t> dtypes;
};

using PatternMap = std::map<std::string, PatternStats>;

PatternMap patterns_of(const io::WeightIndex& w) {
  PatternMap m;
  for (const auto& name : w.tensor_names()) {
    auto& p = m[canonicalize_tensor_name(name)];
    ++p.count;
    ++p.dtypes[detail::dtype_label(w.find(name)->dtype)];
  }
  return m;
}

// Most frequent first, then by name (Quark's dtype_counts order).
std::vector<std::pair<std::string, uint64_t>> sorted_dtypes(const PatternStats& p) {
  std::vector<std::pair<std::string, uint64_t>> v(p.dtypes.begin(), p.dtypes.end());
  std::stable_sort(v.begin(), v.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return v;
}

oj dtype_counts_json(const PatternStats& p) {
  oj j = oj::object();
  for (const auto& [d, n] : sorted_dtypes(p)) j[d] = n;
  return j;
}

std::string dtype_counts_text(const PatternStats& p) {
  std::string s;
  for (const auto& [d, n] : sorted_dtypes(p)) {
    if (!s.empty()) s += ", ";
    s += d + ": " + std::to_string(n);
  }
  return s;
}

std::string table_cell(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

// The "<M>.weight" pattern a quantization pattern "<M>.<suffix>" belongs to;
// empty when `pattern` has no quantization suffix.
// An attention module's prob_output_scale belongs to its "<M>.o_proj.weight".
std::string base_weight_of(std::string_view name) {
  const std::string_view suffix = quantization_suffix(name);
  if (suffix.empty()) return {};
  return std::string(module_of(name)) + (suffix == "prob_output_scale" ? ".o_proj.weight" : ".weight");
}

std::string base_weight_pattern(const std::string& pattern) { return base_weight_of(pattern); }

}  // namespace

StepResult check_fuzzy_tensor_names(const CheckpointPair& pair, const ValidateOptions& opts) {
  StepResult r;
  r.number = 4;
  r.title = kFuzzyTitle;

  const io::WeightIndex* qw = pair.quantized_weights();
  if (!qw) {
    r.status = StepResult::kFail;
    r.summary = "the quantized checkpoint has no readable safetensors weights: " +
                pair.quantized_weights_error();
    r.data["error"] = pair.quantized_weights_error();
    return r;
  }
  const io::WeightIndex* sw = pair.source_weights();
  const bool have_source = pair.source() != nullptr;
  const PatternMap q = patterns_of(*qw);
  const PatternMap s = sw ? patterns_of(*sw) : PatternMap{};

  // The union of both sides' patterns, sorted, each with its verdict.
  std::set<std::string> all;
  for (const auto& [p, st] : q) all.insert(p);
  for (const auto& [p, st] : s) all.insert(p);

  std::vector<std::string> missing_patterns, unexpected_patterns, mixed;
  oj count_mismatches = oj::array();
  oj rows = oj::array();
  std::vector<std::string> table;
  table.push_back("| pattern | count | dtypes | source | check |");
  table.push_back("|---|---:|---|---|---|");
  size_t n_source_patterns = 0, n_quant_patterns = 0;

  for (const auto& p : all) {
    const auto qi = q.find(p);
    const auto si = s.find(p);
    const PatternStats* qs = qi == q.end() ? nullptr : &qi->second;
    const PatternStats* ss = si == s.end() ? nullptr : &si->second;
    std::string check = "listed";
    if (sw) {
      if (ss && !qs) {
        check = "missing";
        missing_patterns.push_back(p);
      } else if (ss && qs) {
        ++n_source_patterns;
        if (qs->count == ss->count) {
          check = "ok";
        } else {
          check = "count_mismatch";
          count_mismatches.push_back(
              {{"pattern", p}, {"source_count", ss->count}, {"quantized_count", qs->count}});
        }
      } else {  // only in the quantized checkpoint
        const std::string base = base_weight_pattern(p);
        const auto bi = base.empty() ? s.end() : s.find(base);
        if (bi == s.end()) {
          check = "unexpected";
          unexpected_patterns.push_back(p);
        } else if (qs->count > bi->second.count) {
          check = "count_mismatch";
          count_mismatches.push_back({{"pattern", p},
                                      {"source_count", bi->second.count},
                                      {"quantized_count", qs->count},
                                      {"base_pattern", base}});
        } else {
          check = "quantization";
          ++n_quant_patterns;
        }
      }
    }
    if (qs && qs->dtypes.size() > 1) mixed.push_back(p);

    oj row = oj::object();
    row["pattern"] = p;
    row["count"] = qs ? qs->count : 0;
    row["dtype_counts"] = qs ? dtype_counts_json(*qs) : oj::object();
    if (sw) {
      row["source_count"] = ss ? ss->count : 0;
      row["source_dtype_counts"] = ss ? dtype_counts_json(*ss) : oj::object();
    }
    row["check"] = check;
    rows.push_back(std::move(row));

    std::string check_text = check;
    if (check == "count_mismatch") {
      const auto& m = count_mismatches.back();
      check_text = "count " + std::to_string(m["quantized_count"].get<uint64_t>()) +
                   (m.contains("base_pattern") ? " > " : " ≠ ") +
                   std::to_string(m["source_count"].get<uint64_t>()) + " in the source";
    } else if (check == "quantization") {
      const auto& base = s.at(base_weight_pattern(p));
      check_text = "quantization (" + std::to_string(qs->count) + " of " +
                   std::to_string(base.count) + ")";
    }
    table.push_back("| `" + table_cell(p) + "` | " + std::to_string(qs ? qs->count : 0) +
                    " | " + (qs ? dtype_counts_text(*qs) : std::string("—")) + " | " +
                    (sw ? (ss ? dtype_counts_text(*ss) : std::string("—")) : std::string("—")) +
                    " | " + check_text + " |");
  }

  // Name by name: catches a tensor renamed to another index, which keeps
  // every pattern count intact.
  std::vector<std::string> missing_tensors, unexpected_tensors;
  if (sw) {
    for (const auto& name : sw->tensor_names())
      if (!qw->find(name)) missing_tensors.push_back(name);
    for (const auto& name : qw->tensor_names()) {
      if (sw->find(name)) continue;
      const std::string base = base_weight_of(name);
      const bool quant_extra = !base.empty() && sw->find(base) != nullptr;
      if (!quant_extra) unexpected_tensors.push_back(name);
    }
  }

  const size_t n_patterns = q.size();
  r.details.push_back("patterns: " + std::to_string(n_patterns) +
                      ", mixed-dtype patterns: " + std::to_string(mixed.size()));
  r.data["pattern_count"] = n_patterns;
  r.data["tensor_count"] = qw->num_tensors();
  if (sw) {
    r.data["source_pattern_count"] = s.size();
    r.data["source_tensor_count"] = sw->num_tensors();
    r.details.push_back("source patterns: " + std::to_string(s.size()) +
                        ", quantization patterns added: " + std::to_string(n_quant_patterns));
  }
  list_items(r, "missing patterns", "missing_patterns", missing_patterns, opts.max_listed);
  list_items(r, "unexpected patterns", "unexpected_patterns", unexpected_patterns,
             opts.max_listed);
  {
    std::vector<std::string> lines;
    for (const auto& m : count_mismatches)
      lines.push_back(m["pattern"].get<std::string>() + " (" +
                      std::to_string(m["quantized_count"].get<uint64_t>()) + " vs " +
                      std::to_string(m["source_count"].get<uint64_t>()) + " in the source)");
    list_items(r, "count mismatches", "count_mismatch_patterns", lines, opts.max_listed);
    r.data["count_mismatches"] = count_mismatches;
  }
  list_items(r, "missing tensors", "missing_tensors", missing_tensors, opts.max_listed);
  list_items(r, "unexpected tensors", "unexpected_tensors", unexpected_tensors, opts.max_listed);
  for (const auto& p : mixed)
    r.details.push_back("Notable: " + p + " → " + dtype_counts_text(q.at(p)));
  r.data["mixed_dtype_patterns"] = mixed;
  r.data["patterns"] = std::move(rows);
  for (auto& line : table) r.details.push_back(std::move(line));

  if (!have_source) {
    r.status = StepResult::kOk;
    r.summary = plural(n_patterns, "pattern", "patterns") + " in " +
                plural(qw->num_tensors(), "tensor", "tensors") +
                ", " + std::to_string(mixed.size()) + " mixed-dtype (no source given: listed, not compared)";
    return r;
  }
  if (!sw) {
    return detail::skipped(std::move(r),
                           "the source has no readable safetensors weights to compare with (" +
                               pair.source_weights_error() + "); the quantized patterns are listed below",
                           "source_weights_unreadable");
  }

  const size_t problems = missing_patterns.size() + unexpected_patterns.size() +
                          count_mismatches.size() + missing_tensors.size() +
                          unexpected_tensors.size();
  if (problems == 0) {
    r.status = StepResult::kOk;
    r.summary = "all " + plural(s.size(), "source pattern", "source patterns") +
                " present with their counts, " +
                plural(n_quant_patterns, "quantization pattern", "quantization patterns") +
                " added, " + std::to_string(mixed.size()) + " mixed-dtype";
    return r;
  }
  r.status = StepResult::kFail;
  std::vector<std::string> parts;
  if (!missing_patterns.empty())
    parts.push_back(plural(missing_patterns.size(), "missing pattern", "missing patterns"));
  if (!unexpected_patterns.empty())
    parts.push_back(plural(unexpected_patterns.size(), "unexpected pattern", "unexpected patterns"));
  if (!count_mismatches.empty())
    parts.push_back(plural(count_mismatches.size(), "count mismatch", "count mismatches"));
  if (!missing_tensors.empty())
    parts.push_back(plural(missing_tensors.size(), "missing tensor", "missing tensors"));
  if (!unexpected_tensors.empty())
    parts.push_back(plural(unexpected_tensors.size(), "unexpected tensor", "unexpected tensors"));
  r.summary = detail::join(parts, ", ");
  return r;
}

}  // namespace qloom::validate
