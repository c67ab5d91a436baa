// qloom validate: checks that a quantized Quark hf_format checkpoint is a
// faithful export of its source model. The four checks of Quark's result
// validator run in its cost order, fuzzy (4) -> auxiliary (1) -> config (3) ->
// MD5 (2), then qloom's numeric step 5 and the vLLM step 6:
//
//   4  fuzzy tensor names  every tensor-name pattern (indices collapsed to
//                          `*`) of the source is present with the same count;
//                          only quantization tensors are new; dtype counts
//                          per pattern are reported.
//   1  auxiliary files     every top-level non-weight file of the source
//                          except config.json is present and byte-identical
//                          (JSON files: or differing only by benign drift).
//   3  config.json         equal to the source once quantization_config is
//                          removed, up to benign drift from a newer
//                          transformers (drift.h); quantization_config says
//                          quant_method "quark".
//   2  MD5 spot-check      every tensor left unquantized has the source's
//                          dtype, shape and raw bytes (all of them are
//                          checked, nothing is sampled).
//   5  numeric            supplied by the caller (ValidateOptions::numeric_step).
//   6  loads in vLLM      a static check of the rules vLLM's Quark loader
//                          applies (vllm_rules.h, read from vLLM 0.33.0).
//
// The exact rules are in checks.h. A step that cannot run says "skipped" and
// why; a failing step never stops the others. The verdict is about the
// checkpoint: steps 1–5 decide it, and step 6 is reported as deployability
// ("deployable on vLLM 0.33: no — <reason>"); only with
// ValidateOptions::target = kVllm does a failed step 6 fail the verdict too.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "qloom/io/model_dir.h"
#include "qloom/validate/report.h"

namespace qloom::validate {

struct ValidateOptions {
  // Threads hashing tensors in step 2; 0 = std::thread::hardware_concurrency().
  unsigned threads = 0;

  // The deployment target the verdict covers (report.h): kNone, steps 1–5
  // decide; kVllm, step 6 (vLLM's loader rules) decides too.
  DeployTarget target = DeployTarget::kNone;

  // Globs (name_patterns.h) of unquantized tensors whose bytes may legitimately
  // differ from the source, e.g. norms an algorithm folded scales into. Step 2
  // still requires their dtype and shape to match and lists those that differ,
  // without failing.
  std::vector<std::string> md5_exempt;
  // Also exempt the modules quantization_config.algo_config says scales were
  // folded into: for every algorithm entry with "scaling_layers", each
  // "prev_op" under "model_decoder_layers" (AWQ, SmoothQuant).
  bool exempt_folded_scales = true;

  // Most items a step lists in its details (missing files, mismatching
  // tensors, differing config keys); the rest are counted. data keeps up to
  // 10x as many.
  size_t max_listed = 50;

  // qloom's numeric step 5 (dequantize every quantized tensor and compare with
  // the source; load the checkpoint in the engine). It receives both opened
  // model directories; its result is reported as step 5 (number and a missing
  // title are filled in). An exception from it becomes a FAIL naming it. When
  // empty, step 5 is reported as skipped.
  std::function<StepResult(const io::ModelDir& source, const io::ModelDir& quantized)>
      numeric_step;
};

// Step titles, as in Quark's report template.
inline constexpr const char* kFuzzyTitle = "fuzzy tensor names";
inline constexpr const char* kAuxiliaryTitle = "auxiliary files";
inline constexpr const char* kConfigTitle = "config.json";
inline constexpr const char* kMd5Title = "MD5 spot-check";
inline constexpr const char* kNumericTitle = "numeric checks";
inline constexpr const char* kVllmTitle = "loads in vLLM";

// Runs steps 4, 1, 3, 2, 5 and 6 and returns the report (source and quantized
// as given; target from options, vllm = step 6's deployability). `source` may be empty: steps 1, 3, 2 and 5 are then skipped, step
// 4 only lists the quantized patterns and step 6 checks the quantized side
// alone (no byte comparison of the int4 packing). Throws qloom::Error only for bad input:
// a given source that is not a readable model directory, or a quantized path
// that does not exist or is not a directory. Everything wrong inside the
// quantized directory is a finding in the report.
ValidationReport validate_checkpoint(const std::filesystem::path& source,
                                     const std::filesystem::path& quantized,
                                     const ValidateOptions& options = {});

}  // namespace qloom::validate
