// The plan (seed 001 Step 2, seed 003 "Quantization plan"): quant_plan.json
// from the parsed intent and model_analysis.json.
//
// Contract:
//   - The Intent already carries the resolved choices and their sources
//     (scheme from the prompt or the recommendation row, defaults of seed
//     001's decision table); the plan adds what needs the model:
//       exclude_layers = the analysis's default exclusions (Quark template)
//         minus those matching a layer the prompt wants quantized
//         (intent.quantize_layers), then the prompt's exclusions; deduplicated,
//         in that order.
//       scheme_check: every linear layer that will be quantized checked
//         against the storage rules of its scheme (qloom's Quark exporter:
//         per-group schemes need in_features % group_size == 0; int4 / uint4
//         need out_features % 8 == 0, and in_features % 8 == 0 when per
//         channel; MX fp4 needs in_features % 32 == 0). Any layer that does not
//         fit -> an open question (field "quant_scheme") naming the layers and
//         the schemes that fit the whole model.
//       calibration: needed for static activation scales, an fp8 KV cache
//         or any algorithm; then the engine must run the model (analysis
//         engine.calibration) or an open question is asked. The default
//         calibration set "pileval" is not bundled: it maps to the bundled
//         c4 sample ("c4") with the reason stated, unless a local copy
//         <data_dir>/calibration/pileval.jsonl exists. A non-bundled set the
//         prompt names (pileval, wikitext2, ultrachat_200k, cnn_dailymail)
//         without a local copy is an open question; "c4" and file paths are
//         kept as given.
//       quant_algo: every comma-separated name must be implemented
//         (quant::implemented_algorithms()) else an open question; GPTQ / AWQ
//         with a non-int4 scheme and SmoothQuant with a weight-only scheme are
//         risks.
//       evaluation: metric -> qloom eval task (gsm8k, ppl, kld); a metric
//         qloom cannot compute is a risk ("eval_metric_unavailable": the eval
//         phase will write eval_skipped.txt). eval_limit null = the eval
//         phase sizes its own budget.
//       counts: num_calib_data or seq_len 0 with calibration, or an eval
//         limit of 0, are open questions.
//       resource_estimate: estimate_resources() for the resolved choices; a
//         peak above usable memory is a risk ("insufficient_memory").
//   - requires_confirmation is always true (checkpoint 2 sets it false).
//   - A model the analysis calls "unsupported" (incomplete config, already
//     quantized) is an open question (field "model").
//   - open_questions = the intent's, then the plan's, as {field, question};
//     notes = the intent's, then the plan's; risks are the plan's own
//     (pattern_matches_nothing, algorithm_scheme_mismatch,
//     seq_len_exceeds_context, eval_metric_unavailable, insufficient_memory;
//     the model's risks stay in model_analysis.json).
//   - "none" is JSON null for kv_cache_dtype, quant_algo, eval_limit,
//     eval_gap_threshold, eval_task (in the flat fields and in the decisions).
//   - Deterministic given intent, analysis and data_dir.
// The JSON validates against schemas/quant_plan.schema.json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/agent/intent.h"

namespace qloom::agent {

struct PlanOptions {
  // Where local copies of non-bundled calibration sets are looked for
  // (<data_dir>/calibration/<name>.jsonl, as quant/calib_data.h reads them).
  // nullopt: $QLOOM_DATA_DIR (none when unset).
  std::optional<std::string> data_dir;
  // Recorded as model.analysis_ref.
  std::string analysis_ref = "model_analysis.json";
};

// Keys, in order: model {model_path, resolved_path, model_type, analysis_ref},
// decisions [{decision, value, reason, source}] (global_scheme,
// kv_cache_scheme, exclude_layers, layer_quant_config, algorithm,
// calibration_dataset, num_calib_data, seq_len, evaluation_intent,
// evaluation_metric, evaluation_dataset, evaluation_limit,
// eval_gap_threshold, output_dir), the flat resolved fields quant_scheme,
// kv_cache_dtype, exclude_layers, layer_quant_scheme, quant_algo, dataset,
// num_calib_data, seq_len, output_dir, eval_requested, metric_name,
// eval_task, eval_dataset, eval_limit, metric_higher_is_better,
// eval_gap_threshold, eval_gap_kind, then needs_calibration, scheme_check,
// resource_estimate, risks, open_questions, notes, requires_confirmation.
// decision source: "stated" | "inferred" | "default" | "missing" (the
// intent's; a calibration set replaced because it is not bundled is
// "inferred") or "model" (exclude_layers when only the model template's
// defaults apply); the schema also admits "fix", which the workflow sets
// when a fix_hypothesis_attempt_N.md overrides a decision on a retry.
nlohmann::ordered_json build_quant_plan(const Intent& intent, const nlohmann::json& analysis,
                                        const PlanOptions& options = {});

// The decision table "decision | value | reason" (seed 001 Step 2), aligned,
// one row per decision, values as compact JSON (strings unquoted, null as
// "null"); then "Open questions:" and "Risks:" lines when there are any.
// Ends with a newline.
std::string render_plan_table(const nlohmann::json& plan);

// Why a linear [out_features, in_features] cannot be stored under `scheme`
// by qloom's Quark exporter, or "" when it can. Unknown scheme: throws as
// quant::get_scheme.
std::string scheme_layer_problem(const std::string& scheme, uint64_t out_features, uint64_t in_features);

}  // namespace qloom::agent
