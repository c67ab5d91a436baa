#include "qloom/validate/numeric_check.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/text/tokenizer.h"
#include "qloom/export/checkpoint_runtime.h"
#include "qloom/export/quark_config.h"
#include "qloom/export/quark_exporter.h"
#include "qloom/export/quark_progressive.h"
#include "qloom/export/quark_tensors.h"
#include "qloom/quant/distortion.h"
#include "qloom/quant/fp4_block.h"
#include "qloom/quant/quantize_fast.h"
#include "qloom/quant/quantize_ref.h"
#include "qloom/validate/checkpoint_pair.h"
#include "qloom/validate/folded_scales.h"

namespace qloom::validate {
namespace {

constexpr std::string_view kScaleSuffix = ".weight_scale";

std::string fmt_db(double db) {
  if (std::isinf(db)) return db > 0 ? "exact" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f dB", db);
  return buf;
}

// The fixed text the engine check scores (tokenized with the source's
// tokenizer; token ids derived from positions when it has none).
constexpr const char* kWindowText =
    "Once upon a time, in a small village by the sea, there lived a girl who loved to read. "
    "Every morning she walked to the library, counted the boats in the harbour (there were 12), "
    "and wrote down what she saw: \"The sky is grey; the water is calm.\" Her brother said, "
    "\"You'll never finish all those books!\" She smiled and kept reading.";

struct WindowResult {
  size_t tokens = 0;
  double kld_mean = 0, top1 = 0;
  bool finite = true;
};

// Loads both checkpoints in the engine (the quantized one as it computes:
// dequantized weights, simulated activation / KV quantization) and scores
// one window: KL(source || quantized) per position and top-1 agreement.
WindowResult engine_window(const io::ModelDir& source, const io::ModelDir& quantized, exporter::Runtime runtime) {
  auto src = exporter::load_for_eval(source.path());
  auto q = exporter::load_for_eval(quantized.path(), {}, runtime);
  const int64_t vocab = src.model->config().vocab_size;
  std::vector<int32_t> ids;
  try {
    ids = text::Tokenizer::load(source.path()).encode(kWindowText, true);
  } catch (const Error&) {
    for (int64_t i = 0; i < 64; ++i) ids.push_back(static_cast<int32_t>((1 + i * 7919) % vocab));
  }
  const int64_t max_pos = src.model->config().max_position_embeddings;
  if (max_pos > 0 && static_cast<int64_t>(ids.size()) > max_pos) ids.resize(static_cast<size_t>(max_pos));
  auto run = [&](exporter::LoadedModel& m) {
    auto cache = m.model->new_cache(static_cast<int64_t>(ids.size()));
    const auto& h = m.runtime.hooks;
    const bool hooked = static_cast<bool>(h.linear_input) || static_cast<bool>(h.linear_output);
    return m.model->forward(ids, *cache, false, hooked ? &h : nullptr);
  };
  const std::vector<float> a = run(src), b = run(q);
  WindowResult r;
  r.tokens = ids.size();
  if (b.size() != a.size()) throw Error(ErrorKind::kInvalidInput, quantized.path().string(), "vocab_size",
                                        "the quantized model's logits have another shape than the source's");
  size_t agree = 0;
  for (size_t t = 0; t < ids.size(); ++t) {
    const float* pa = a.data() + t * static_cast<size_t>(vocab);
    const float* pb = b.data() + t * static_cast<size_t>(vocab);
    for (int64_t v = 0; v < vocab; ++v)
      if (!std::isfinite(pb[v])) r.finite = false;
    agree += quant::argmax(pa, vocab) == quant::argmax(pb, vocab);
    r.kld_mean += quant::kl_divergence(pa, pb, vocab);
  }
  r.kld_mean /= static_cast<double>(ids.size());
  r.top1 = static_cast<double>(agree) / static_cast<double>(ids.size());
  return r;
}

// The round-to-nearest reference of a source weight under `ws`. Two-stage
// fp4 block weights (nvfp4, amdfp4_global*) are re-quantized with the
// checkpoint's own global scale, which may come from a shared-scale group
// (q/k/v, gate/up) and so from other tensors; it must at least cover this
// weight's own max |w| (else `problem` says so).
quant::QuantizedTensor rtn_reference(const std::vector<float>& src, const std::vector<uint64_t>& shape,
                                     const quant::QuantSpec& ws, const quant::QuantizedTensor& stored,
                                     const std::string& module, DType model_dtype, std::string& problem) {
  if (!quant::is_fp4_block_spec(ws)) {
    const DType scale_dtype = quant::quark_scale_dtype(ws, model_dtype);
    return quant::quantize_weight(src.data(), shape[0], shape[1], ws, scale_dtype, module + ".weight", model_dtype);
  }
  if (stored.scale_spec) {
    const float own = quant::fp4_global_scale(quant::abs_max(src.data(), src.size()), *stored.scale_spec);
    if (!(stored.global_scale >= own))
      problem = "weight_scale_2 " + std::to_string(stored.global_scale) + " is below this weight's own global scale " +
                std::to_string(own);
  }
  return quant::quantize_fp4_block(src.data(), shape[0], shape[1], ws, stored.scale_spec, stored.global_scale,
                                   module + ".weight", model_dtype);
}

}  // namespace

double sqnr_floor_db(const quant::QuantSpec& w) {
  switch (quant::quant_dtype_bits(w.dtype)) {
    case 8: return 20.0;
    case 6: return 12.0;
    default: return 6.0;
  }
}

double module_sqnr_floor_db(const quant::QuantSpec& w, std::optional<double> rtn_sqnr_db, bool rtn_export) {
  const double fixed = sqnr_floor_db(w);
  if (!rtn_sqnr_db || !std::isfinite(*rtn_sqnr_db)) return fixed;
  if (rtn_export) return std::min(fixed, *rtn_sqnr_db - kRtnSqnrAllowanceDb);
  return std::min(fixed, *rtn_sqnr_db) - kAlgoSqnrAllowanceDb;
}

StepResult check_dequantized_weights_on(const io::ModelDir& source, const io::ModelDir& quantized,
                                        exporter::Runtime runtime) {
  StepResult r;
  r.number = 5;
  r.title = "numeric checks";
  const auto& cfg = quantized.config();
  const auto qc_it = cfg.find("quantization_config");
  if (qc_it == cfg.end() || !qc_it->is_object()) {
    r.status = StepResult::kSkipped;
    r.summary = "no quantization_config to read the specs from";
    return r;
  }
  const nlohmann::json& qc = *qc_it;
  const bool rtn = !qc.contains("algo_config") || qc["algo_config"].is_null();
  const PackOrder order = exporter::pack_order_of(qc);

  const io::WeightIndex& sw = source.weights();
  const io::WeightIndex& qw = quantized.weights();
  const exporter::TensorLookup lookup = exporter::index_lookup(qw);
  const std::optional<DType> model_dtype = exporter::config_model_dtype(source.config());

  // AWQ / SmoothQuant: the per-channel scales folded into the quantized
  // linears (folded_scales.h), taken out before comparing with the source.
  auto dequantized_of = [&](const std::string& module) -> std::optional<std::vector<float>> {
    if (qw.find(module + std::string(kScaleSuffix)) == nullptr) return std::nullopt;
    const auto spec = exporter::resolve_layer_quant_spec(qc, module, quantized.path().string());
    if (!spec || !spec->weight) return std::nullopt;
    return quant::dequantize(exporter::unpack_quantized_weight(module, *spec->weight, lookup, order, spec->weight_stage2));
  };
  FoldPlan folds;
  std::string fold_error;
  if (!rtn) {
    try {
      folds = plan_folded_scales(qc, source, quantized, dequantized_of);
    } catch (const std::exception& e) {
      fold_error = "reading the folded scales of algo_config.scaling_layers failed: " + describe_error(e);
    }
  }

  uint64_t checked = 0, failed = 0, reproduced = 0, folded = 0;
  double worst_fold_ratio = 1.0;  // max(g, 1/g) of the exactly read channels' gains
  double worst = std::numeric_limits<double>::infinity();
  std::string worst_module;
  std::vector<float> src_f32, deq;
  r.details.push_back("| module | scheme | folded scales | SQNR vs source | floor | reproduces RTN | check |");
  r.details.push_back("|---|---|---|---:|---:|---|---|");
  for (const std::string& name : qw.tensor_names()) {
    if (name.size() <= kScaleSuffix.size() ||
        name.compare(name.size() - kScaleSuffix.size(), kScaleSuffix.size(), kScaleSuffix) != 0)
      continue;
    const std::string module = name.substr(0, name.size() - kScaleSuffix.size());
    std::string problem, scheme = "?", sqnr_text = "-", floor_text = "-", repro = "-", fold_text = "-";
    try {
      const auto spec = exporter::resolve_layer_quant_spec(qc, module, quantized.path().string());
      if (!spec || !spec->weight) throw Error(ErrorKind::kInvalidInput, "", module, "has a weight_scale but quantization_config assigns it no weight spec");
      // A progressive weight (int4_fp8) is held to its stored (last) stage's
      // format; a scale-quant one (nvfp4, amdfp4_global*) to its fp4 first stage.
      const bool progressive = spec->weight_stage2 && !spec->weight_stage2->is_scale_quant;
      const quant::QuantSpec& ws = progressive ? *spec->weight_stage2 : *spec->weight;
      scheme = quant::quant_dtype_name(ws.dtype);
      if (ws.qscheme == quant::QScheme::kPerGroup) scheme += " g" + std::to_string(ws.group_size);
      if (progressive) scheme += std::string(" via ") + quant::quant_dtype_name(spec->weight->dtype);
      quant::QuantizedTensor qt;
      quant::ProgressiveTensor pt;
      if (progressive) {
        pt = exporter::unpack_progressive_weight(module, *spec->weight, ws, lookup, order);
        deq = quant::dequantize_progressive(pt);
      } else {
        qt = exporter::unpack_quantized_weight(module, ws, lookup, order, spec->weight_stage2);
        deq = quant::dequantize(qt);
      }
      const io::TensorInfo* si = sw.find(module + ".weight");
      if (si == nullptr) throw Error(ErrorKind::kNotFound, "", module + ".weight", "not in the source checkpoint");
      src_f32.resize(si->numel());
      to_f32(si->dtype, sw.view(module + ".weight").data.data(), src_f32.data(), src_f32.size());
      if (src_f32.size() != deq.size()) throw Error(ErrorKind::kInvalidInput, "", module, "element count differs from the source");
      std::string fold_problem;
      if (const auto ft = folds.modules.find(module); ft != folds.modules.end() && si->shape.size() == 2) {
        const FoldFit ff = fold_check(ft->second, src_f32, deq, si->shape[0], si->shape[1]);
        const double ratio = ff.worst_gain > 0 ? std::max(ff.worst_gain, 1.0 / ff.worst_gain) : HUGE_VAL;
        if (ratio > worst_fold_ratio) worst_fold_ratio = ratio;
        apply_fold(ft->second, src_f32, si->shape[0], si->shape[1]);
        fold_text = ft->second.how;
        ++folded;
        if (!ff.mismatched.empty()) {
          char gain[32];
          std::snprintf(gain, sizeof gain, "%.3g", ff.worst_gain);
          fold_problem = std::to_string(ff.mismatched.size()) + " input channel(s) (first: " +
                         std::to_string(ff.mismatched.front()) + ") carry a scale the folded " + ft->second.how +
                         " does not explain (gain " + gain + " instead of ~1): the exported norm / producer and "
                         "this weight disagree";
        }
      }
      const quant::DistortionStats d = quant::measure_distortion(src_f32.data(), deq.data(), deq.size());
      std::optional<double> rtn_sqnr;
      bool same_as_rtn = false;
      if (model_dtype && progressive) {
        const quant::ProgressiveTensor again = quant::quantize_progressive(
            src_f32.data(), si->shape[0], si->shape[1], *spec->weight, ws, module + ".weight", *model_dtype);
        same_as_rtn = again.second.codes == pt.second.codes && again.second.scales == pt.second.scales &&
                      again.second.zero_points == pt.second.zero_points && again.first.scales == pt.first.scales;
        const std::vector<float> ref = quant::dequantize_progressive(again);
        rtn_sqnr = quant::measure_distortion(src_f32.data(), ref.data(), ref.size()).sqnr_db;
      } else if (model_dtype) {
        const quant::QuantizedTensor again =
            rtn_reference(src_f32, si->shape, ws, qt, module, *model_dtype, problem);
        same_as_rtn = again.codes == qt.codes && again.scales == qt.scales && again.zero_points == qt.zero_points &&
                      again.global_scale == qt.global_scale;
        const std::vector<float> ref = quant::dequantize(again);
        rtn_sqnr = quant::measure_distortion(src_f32.data(), ref.data(), ref.size()).sqnr_db;
      }
      const double floor = module_sqnr_floor_db(ws, rtn_sqnr, rtn);
      sqnr_text = fmt_db(d.sqnr_db);
      floor_text = fmt_db(floor) + (rtn_sqnr && floor < sqnr_floor_db(ws) ? " (RTN " + fmt_db(*rtn_sqnr) + ")" : "");
      if (!fold_problem.empty()) problem = fold_problem;  // the root cause of a low SQNR too
      else if (!(d.sqnr_db >= floor)) problem = "SQNR " + sqnr_text + " below the floor " + floor_text;
      if (d.sqnr_db < worst) {
        worst = d.sqnr_db;
        worst_module = module;
      }
      if (rtn && model_dtype) {
        repro = same_as_rtn ? "yes" : "no";
        if (same_as_rtn) ++reproduced;
        else if (problem.empty()) problem = "codes/scales differ from the round-to-nearest reference for the source";
      }
    } catch (const std::exception& e) {
      problem = describe_error(e);
    }
    ++checked;
    if (!problem.empty()) ++failed;
    r.details.push_back("| `" + module + "` | " + scheme + " | " + fold_text + " | " + sqnr_text + " | " + floor_text +
                        " | " + repro + " | " + (problem.empty() ? "ok" : "FAIL: " + problem) + " |");
  }
  if (!fold_error.empty()) {
    r.details.push_back("");
    r.details.push_back("FAIL: " + fold_error);
  }
  for (const std::string& n : folds.notes) r.details.push_back("folded scales: " + n);
  r.data["checked"] = checked;
  r.data["failed"] = failed;
  r.data["reproduced_rtn"] = reproduced;
  r.data["rtn_reference_checked"] = rtn;
  r.data["folded_scales_checked"] = folded;  // weights compared with the folded scales taken out
  r.data["folded_scale_entries"] = folds.entries;
  r.data["folded_scale_worst_gain_ratio"] = worst_fold_ratio;  // limit kFoldRatioLimit
  r.data["worst_sqnr_db"] = std::isfinite(worst) ? nlohmann::ordered_json(worst) : nlohmann::ordered_json(nullptr);
  r.data["worst_module"] = worst_module;
  if (checked == 0) {
    r.status = StepResult::kSkipped;
    r.summary = "no quantized weights (no <module>.weight_scale) found";
    r.details.clear();
    return r;
  }
  r.status = failed || !fold_error.empty() ? StepResult::kFail : StepResult::kOk;
  r.summary = std::to_string(checked - failed) + " of " + std::to_string(checked) +
              " quantized weights dequantize within their SQNR floor" +
              (folded ? " (" + std::to_string(folded) + " with folded AWQ / SmoothQuant scales taken out)" : "") +
              (fold_error.empty() ? "" : "; " + fold_error) +
              (rtn ? ", " + std::to_string(reproduced) + " reproduce the RTN reference bit for bit" : "") +
              "; worst " + fmt_db(worst) + " (" + worst_module + ")";
  // The engine loads the checkpoint and scores one window against the source.
  std::string engine_summary;
  try {
    const WindowResult w = engine_window(source, quantized, runtime);
    char buf[200];
    std::snprintf(buf, sizeof buf, "engine%s: one %zu-token window, KL(source||quantized) %.5f, top-1 agreement %.1f%%",
                  runtime == exporter::Runtime::kNative ? " (native runtime)" : "", w.tokens, w.kld_mean,
                  100.0 * w.top1);
    engine_summary = buf;
    r.data["engine_window_tokens"] = w.tokens;
    r.data["engine_kld_mean"] = w.kld_mean;
    r.data["engine_top1_agreement"] = w.top1;
    if (!w.finite) {
      engine_summary += " — FAIL: non-finite logits";
      r.status = StepResult::kFail;
    }
  } catch (const std::exception& e) {
    engine_summary = "engine: FAIL — " + describe_error(e);
    r.status = StepResult::kFail;
    // Why the engine could not run it: "unsupported" means qloom's engine
    // lacks a feature (e.g. a RoPE type), not that the checkpoint is broken.
    const auto* qe = dynamic_cast<const Error*>(&e);
    r.data["engine_error_kind"] = qe ? error_kind_name(qe->kind()) : (dynamic_cast<const std::bad_alloc*>(&e) ? "oom" : "other");
  }
  r.details.push_back("");
  r.details.push_back(engine_summary);
  r.summary += "; " + engine_summary;
  return r;
}

}  // namespace qloom::validate
