#include "qloom/validate/validator.h"

#include <exception>

#include "qloom/validate/checkpoint_pair.h"
#include "qloom/validate/checks.h"
#include "qloom/validate/step_util.h"

namespace qloom::validate {

StepResult run_numeric_step(const CheckpointPair& pair, const ValidateOptions& opts) {
  StepResult r;
  r.number = 5;
  r.title = kNumericTitle;
  r.status = StepResult::kSkipped;
  if (!opts.numeric_step)
    return detail::skipped(std::move(r),
                           "no numeric checker in this run (dequantize-and-compare and engine load are "
                           "supplied by qloom's quant and engine modules)",
                           "no_numeric_checker");
  if (!pair.source())
    return detail::skipped(std::move(r), "no source model given, nothing to compare the dequantized weights with",
                           "no_source");
  if (!pair.quantized())
    return detail::skipped(std::move(r),
                           "the quantized directory is not a readable model (see step 3): " + pair.quantized_error(),
                           "quantized_unreadable");
  if (!pair.weights_source())
    return detail::skipped(std::move(r), "no source weights to compare with: " + pair.source_weights_error(),
                           "source_unreadable");
  try {
    StepResult got = opts.numeric_step(*pair.weights_source(), *pair.quantized());
    got.number = 5;
    if (got.title.empty()) got.title = kNumericTitle;
    return got;
  } catch (const std::exception& e) {
    r.status = StepResult::kFail;
    r.summary = "the numeric checker stopped with an error: " + describe_error(e);
    r.data["reason"] = "checker_error";
    r.data["error"] = describe_error(e);
    return r;
  }
}

ValidationReport validate_checkpoint(const std::filesystem::path& source,
                                     const std::filesystem::path& quantized,
                                     const ValidateOptions& options) {
  const CheckpointPair pair = CheckpointPair::open(source, quantized);
  ValidationReport report;
  report.source = source.string();
  report.quantized = quantized.string();
  // Quark's cost order: headers, small files, one JSON, then tensor bytes.
  report.steps.push_back(check_fuzzy_tensor_names(pair, options));
  report.steps.push_back(check_auxiliary_files(pair, options));
  report.steps.push_back(check_config(pair, options));
  report.steps.push_back(check_excluded_tensors_md5(pair, options));
  report.steps.push_back(run_numeric_step(pair, options));
  report.steps.push_back(check_vllm_loadable(pair, options));
  report.target = options.target;
  report.vllm = vllm_deployability(report.steps.back());
  return report;
}

}  // namespace qloom::validate
