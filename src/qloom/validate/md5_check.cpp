// Step 2 — MD5 of the tensors left unquantized.
#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "qloom/core/format.h"
#include "qloom/io/weight_index.h"
#include "qloom/validate/checks.h"
#include "qloom/validate/md5.h"
#include "qloom/validate/name_patterns.h"
#include "qloom/validate/step_util.h"

namespace qloom::validate {

namespace {

using detail::dtype_label;
using detail::list_items;
using detail::plural;
using detail::shape_label;
using json = nlohmann::json;
using oj = nlohmann::ordered_json;

const json* quantization_config(const CheckpointPair& pair) {
  if (!pair.quantized()) return nullptr;
  const json& cfg = pair.quantized()->config();
  const auto it = cfg.find("quantization_config");
  return it != cfg.end() && it->is_object() ? &*it : nullptr;
}

std::vector<std::string> string_list(const json* obj, const char* key) {
  std::vector<std::string> out;
  if (!obj) return out;
  const auto it = obj->find(key);
  if (it == obj->end()) return out;
  if (it->is_string()) out.push_back(it->get<std::string>());
  if (it->is_array())
    for (const auto& e : *it)
      if (e.is_string()) out.push_back(e.get<std::string>());
  return out;
}

// Modules an algorithm folded scales into ("prev_op" of each scaling layer
// under "model_decoder_layers"), as globs over tensor names.
std::vector<std::string> folded_scale_patterns(const json* qc) {
  std::vector<std::string> out;
  if (!qc) return out;
  const auto algo = qc->find("algo_config");
  if (algo == qc->end()) return out;
  auto visit = [&](const json& a) {
    if (!a.is_object()) return;
    const auto layers = a.find("scaling_layers");
    if (layers == a.end() || !layers->is_array()) return;
    const auto dec = a.find("model_decoder_layers");
    const std::string prefix = dec != a.end() && dec->is_string() && !dec->get<std::string>().empty()
                                   ? dec->get<std::string>() + ".*."
                                   : std::string("*.");
    for (const auto& l : *layers) {
      const auto prev = l.is_object() ? l.find("prev_op") : l.end();
      if (!l.is_object() || prev == l.end() || !prev->is_string()) continue;
      const std::string p = prefix + prev->get<std::string>() + ".*";
      if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    }
  };
  if (algo->is_array()) for (const auto& a : *algo) visit(a);
  else visit(*algo);
  return out;
}

bool matches_any(const std::vector<std::string>& patterns, std::string_view name) {
  const std::string_view module = module_of(name);
  for (const auto& p : patterns)
    if (glob_match(p, name) || (!module.empty() && glob_match(p, module))) return true;
  return false;
}

struct HashJob {
  const io::WeightIndex* weights;
  const std::string* name;
  uint64_t bytes;
  std::string md5;
};

// Hashes every job, largest first, on up to `threads` threads. Results land
// in each job's own slot, so the outcome does not depend on scheduling.
void hash_all(std::vector<HashJob>& jobs, unsigned threads) {
  std::vector<size_t> order(jobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return jobs[a].bytes > jobs[b].bytes; });
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < order.size();) {
      HashJob& job = jobs[order[k]];
      try {
        job.md5 = md5_hex_mapped(job.weights->view(*job.name).data);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
        next.store(order.size());
      }
    }
  };
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<size_t>(threads, jobs.size()));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace

StepResult check_excluded_tensors_md5(const CheckpointPair& pair, const ValidateOptions& opts) {
  StepResult r;
  r.number = 2;
  r.title = kMd5Title;
  r.status = StepResult::kSkipped;
  if (!pair.source()) return detail::skipped(std::move(r), "no source model given", "no_source");
  const io::WeightIndex* sw = pair.source_weights();
  const io::WeightIndex* qw = pair.quantized_weights();
  if (!sw)
    return detail::skipped(std::move(r), "the source has no readable safetensors weights: " + pair.source_weights_error(),
                           "source_weights_unreadable");
  if (!qw)
    return detail::skipped(std::move(r), "the quantized weights are unreadable, nothing to compare (step 4 reports why)",
                           "quantized_weights_unreadable");

  const json* qc = quantization_config(pair);
  std::vector<std::string> exclude = string_list(qc, "exclude");
  for (const auto& e : string_list(qc, "exclude_layers_name"))
    if (std::find(exclude.begin(), exclude.end(), e) == exclude.end()) exclude.push_back(e);
  std::vector<std::string> exempt = opts.md5_exempt;
  const std::vector<std::string> folded =
      opts.exempt_folded_scales ? folded_scale_patterns(qc) : std::vector<std::string>{};
  for (const auto& f : folded)
    if (std::find(exempt.begin(), exempt.end(), f) == exempt.end()) exempt.push_back(f);

  // Sort the source tensors into quantized weights and candidates.
  const std::vector<std::string> names = sw->tensor_names();
  std::vector<const std::string*> candidates;
  size_t n_quantized = 0;
  std::vector<std::string> excluded_but_quantized;
  for (const auto& name : names) {
    const std::string_view module = module_of(name);
    const bool is_weight = name.size() > 7 && name.ends_with(".weight");
    const bool has_scale =
        is_weight && qw->find(std::string(module) + ".weight_scale") != nullptr;
    if (has_scale && !matches_any(exclude, name)) {
      ++n_quantized;
      continue;
    }
    if (has_scale) excluded_but_quantized.push_back(name);
    else candidates.push_back(&name);
  }

  std::vector<std::string> missing, mismatch_lines, exempt_changed;
  oj mismatches = oj::array();
  for (const auto& name : excluded_but_quantized) {
    mismatch_lines.push_back(name + ": listed in quantization_config.exclude but quantized");
    mismatches.push_back({{"name", name}, {"reason", "excluded_but_quantized"}});
  }
  std::vector<HashJob> jobs;  // pairs: source, quantized
  for (const std::string* name : candidates) {
    const io::TensorInfo* s = sw->find(*name);
    const io::TensorInfo* q = qw->find(*name);
    if (!q) {
      missing.push_back(*name);
      continue;
    }
    if (s->dtype != q->dtype || s->shape != q->shape) {
      std::string line = *name + ":";
      if (s->dtype != q->dtype) line += " dtype " + dtype_label(s->dtype) + " / " + dtype_label(q->dtype);
      if (s->shape != q->shape)
        line += std::string(s->dtype != q->dtype ? "," : "") + " shape " + shape_label(s->shape) +
                " / " + shape_label(q->shape);
      mismatch_lines.push_back(line);
      mismatches.push_back({{"name", *name},
                            {"reason", "header_mismatch"},
                            {"source_dtype", dtype_label(s->dtype)},
                            {"quantized_dtype", dtype_label(q->dtype)},
                            {"source_shape", s->shape},
                            {"quantized_shape", q->shape}});
      continue;
    }
    jobs.push_back({sw, name, s->nbytes(), {}});
    jobs.push_back({qw, name, q->nbytes(), {}});
  }
  hash_all(jobs, opts.threads);

  uint64_t bytes = 0;
  size_t identical = 0;
  oj exempt_changed_data = oj::array();
  for (size_t i = 0; i < jobs.size(); i += 2) {
    const std::string& name = *jobs[i].name;
    bytes += jobs[i].bytes;
    if (jobs[i].md5 == jobs[i + 1].md5) {
      ++identical;
      continue;
    }
    if (matches_any(exempt, name)) {
      exempt_changed.push_back(name);
      continue;
    }
    mismatch_lines.push_back(name + ": MD5 " + jobs[i].md5 + " / " + jobs[i + 1].md5);
    mismatches.push_back({{"name", name},
                          {"reason", "md5_mismatch"},
                          {"source_md5", jobs[i].md5},
                          {"quantized_md5", jobs[i + 1].md5}});
  }
  const size_t checked = jobs.size() / 2;

  r.details.push_back("candidates: " + std::to_string(candidates.size() + excluded_but_quantized.size()) +
                      ", checked: " + std::to_string(checked) + ", sampled: false");
  r.details.push_back("mismatches: " + std::to_string(mismatches.size()));
  r.details.push_back("hashed: " + plural(checked, "tensor", "tensors") + ", " +
                      format_bytes(bytes) + " (" + format_count(bytes) +
                      " bytes) in each checkpoint; quantized weights skipped: " +
                      std::to_string(n_quantized));
  r.data["candidate_count"] = candidates.size() + excluded_but_quantized.size();
  r.data["checked_count"] = checked;
  r.data["sampled"] = false;
  r.data["identical_count"] = identical;
  r.data["bytes_hashed_per_checkpoint"] = bytes;
  r.data["quantized_weight_count"] = n_quantized;
  r.data["exclude_patterns"] = exclude;
  r.data["exempt_patterns"] = exempt;
  if (!folded.empty())
    r.details.push_back("exempt from byte identity (scales folded in by the algorithm): " +
                        detail::join(folded, ", "));
  const size_t shown = std::min(mismatch_lines.size(), opts.max_listed);
  for (size_t i = 0; i < shown; ++i) r.details.push_back(mismatch_lines[i]);
  if (shown < mismatch_lines.size())
    r.details.push_back("… and " + std::to_string(mismatch_lines.size() - shown) + " more");
  if (mismatches.size() > 10 * opts.max_listed) {
    oj capped = oj::array();
    for (size_t i = 0; i < 10 * opts.max_listed; ++i) capped.push_back(mismatches[i]);
    mismatches = std::move(capped);
  }
  r.data["mismatches"] = std::move(mismatches);
  list_items(r, "missing from the quantized checkpoint, not compared (step 4 reports them)",
             "missing", missing, opts.max_listed);
  list_items(r, "exempt and changed (expected)", "exempt_changed", exempt_changed,
             opts.max_listed);

  if (mismatch_lines.empty()) {
    r.status = StepResult::kOk;
    r.summary = plural(checked, "unquantized tensor", "unquantized tensors") +
                " identical in dtype, shape and MD5 (" + format_bytes(bytes) +
                " hashed per checkpoint)";
    if (!exempt_changed.empty())
      r.summary += "; " + std::to_string(exempt_changed.size()) + " exempt tensors changed as expected";
    if (!missing.empty())
      r.summary += "; " + std::to_string(missing.size()) + " missing, left to step 4";
    return r;
  }
  r.status = StepResult::kFail;
  r.summary = std::to_string(mismatch_lines.size()) + " of " +
              plural(candidates.size() + excluded_but_quantized.size(), "unquantized tensor",
                     "unquantized tensors") +
              " differ from the source";
  return r;
}

}  // namespace qloom::validate
