// The individual validation steps. validate_checkpoint() runs them in order;
// they are public so tests and tools can run one alone.
//
// Names: a tensor T is *quantized* when T ends in ".weight", the quantized
// checkpoint holds "<module>.weight_scale" beside it, and the module does not
// match quantization_config.exclude. Every other source tensor is
// *unquantized* (embeddings, norms, biases, lm_head, excluded layers).
#pragma once

#include "qloom/validate/checkpoint_pair.h"
#include "qloom/validate/report.h"
#include "qloom/validate/validator.h"

namespace qloom::validate {

// Step 4. Patterns are canonicalize_tensor_name() of every tensor name. FAIL
// when the quantized weights cannot be opened, or any of:
//  - missing pattern: a source pattern absent from the quantized checkpoint;
//  - unexpected pattern: a quantized pattern that is neither a source pattern
//    nor "<M>.<suffix>" (suffix from quantization_suffix()) with "<M>.weight"
//    a source pattern ("<M>.o_proj.weight" for an attention module's
//    prob_output_scale);
//  - count mismatch: a source pattern whose tensor count differs, or a
//    quantization pattern with more tensors than its "<M>.weight" pattern has
//    in the source;
//  - missing / unexpected tensor: the same rules name by name (a tensor
//    renamed to another index keeps every count but is caught here).
// Dtypes are reported, never judged: a pattern with several dtypes (some
// layers excluded) is listed as mixed. Skipped when the source weights cannot
// be opened (the quantized patterns are still listed); ok with the listing
// alone when no source was given.
StepResult check_fuzzy_tensor_names(const CheckpointPair& pair, const ValidateOptions& opts);

// Step 1. The source's top-level non-weight files except config.json
// (io::ModelDir::aux_files()) must each exist in the quantized directory with
// the same size and MD5. A differing .json file is compared semantically
// (drift.h): when every difference is benign drift (re-serialised, metadata,
// defaults, tokenizer_config.json re-saves) the file is listed under
// data["benign_drift"] and does not fail. FAIL on any missing file or real
// difference; files only in the quantized directory are listed as extra and
// do not fail. Skipped when no source was given.
StepResult check_auxiliary_files(const CheckpointPair& pair, const ValidateOptions& opts);

// Step 3. Both config.json files with every "quantization_config" key removed
// (at any depth) must be equal as JSON values: same keys, arrays of the same
// length, equal scalars (numbers compare by value, so 10000 equals 10000.0;
// true is not 1), after compare_configs() (drift.h) has set aside benign
// drift — torch_dtype/dtype and rope_theta/rope_parameters spellings,
// one-sided keys at transformers' default, transformers_version — which is
// listed as "benign drift: key: old → new (kind: why)" and under
// data["benign_drift"]. Each real difference is reported as "path: source / quantized".
// The quantized config must also hold a top-level "quantization_config"
// object with "quant_method": "quark"; the scheme it declares is summarized.
// FAIL on any difference, a missing or unreadable quantized config.json, or a
// missing / non-Quark quantization_config. Skipped when no source was given.
StepResult check_config(const CheckpointPair& pair, const ValidateOptions& opts);

// Step 2. Every unquantized source tensor present in the quantized checkpoint
// must have the same dtype, shape and MD5 of its raw bytes (hashed in
// parallel, straight from the memory maps). FAIL on any dtype, shape or MD5
// difference, and when a module named by quantization_config.exclude was
// quantized anyway. Tensors missing from the quantized checkpoint are listed
// but left to step 4. Exempt tensors (ValidateOptions::md5_exempt, folded
// scales) may differ in bytes. Skipped when either side's weights cannot be
// opened, or no source was given.
StepResult check_excluded_tensors_md5(const CheckpointPair& pair, const ValidateOptions& opts);

// Step 5: runs opts.numeric_step, or reports why it is skipped.
StepResult run_numeric_step(const CheckpointPair& pair, const ValidateOptions& opts);

// Step 6 (vllm_rules.h): the rules vLLM's Quark loader applies — layer-config
// lookup order, fused q/k/v and gate/up modules resolving to one scheme, the
// KV-cache group, no output / bias specs outside it, export.pack_method
// against the stored int4 words (compared with the source weights when there
// is a source), and a (weight, input) pair vLLM implements. One line per rule
// when it passes; FAIL lists each finding with the layer or field and what to
// change. Skipped when the quantized directory, its Quark
// quantization_config or its weights cannot be read.
StepResult check_vllm_loadable(const CheckpointPair& pair, const ValidateOptions& opts);
// Step 6's result as deployability on vLLM <release series> ("0.33"): yes
// (ok), no with the first finding as the reason (FAIL), unknown with the
// skip reason (skipped).
Deployability vllm_deployability(const StepResult& step);

}  // namespace qloom::validate
