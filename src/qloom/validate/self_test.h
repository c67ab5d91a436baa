// The validator's self-test (`qloom validate --self-test`, Quark's
// "run_validation.py self-test"): build a tiny model and Quark-looking
// checkpoints of it — one correct, the others each with one planted defect —
// and check that every defect is caught by exactly the step meant to catch it.
// Also the fake-checkpoint writer the self-test and the tests share.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "qloom/io/safetensors_writer.h"
#include "qloom/validate/report.h"

namespace qloom::validate {

struct FakeQuarkOptions {
  // Modules (globs, matched against the module and the tensor name) kept in
  // source precision; also written as quantization_config.exclude.
  std::vector<std::string> exclude = {"lm_head"};
  // Write an input_scale beside each weight_scale (FP8 W8A8 static).
  bool input_scale = true;
  // > 0: shard the weights at this many bytes (model.safetensors.index.json).
  uint64_t max_shard_bytes = 0;
  // Called for every output tensor, in name order, before writing: it may
  // change the spec and bytes (keeping them consistent) or return false to
  // drop the tensor. Used to plant defects.
  std::function<bool(io::TensorSpec& spec, std::vector<std::byte>& bytes)> edit;
  // Tensors appended after the others (planting unexpected tensors).
  std::vector<std::pair<io::TensorSpec, std::vector<std::byte>>> extra_tensors;
};

// Writes into `out_dir` (created; must not exist) a checkpoint shaped like a
// Quark FP8 export of `source_dir`: every top-level non-weight file copied
// byte for byte; config.json = the source config (key order kept) plus a
// quantization_config with quant_method "quark"; every 2-D "*.weight" whose
// module is not an embedding and not excluded quantized per tensor to
// F8_E4M3 (scale = amax / 448, rounded to the source dtype) with a scalar
// weight_scale (and input_scale) beside it; every other tensor copied byte for
// byte. A real round-to-nearest FP8 quantization, but meant for tests: it
// holds the whole output in memory. The source weights must be floating point
// (F32, F16 or BF16) where quantized. Throws qloom::Error.
void write_fake_quark_checkpoint(const std::filesystem::path& source_dir,
                                 const std::filesystem::path& out_dir,
                                 const FakeQuarkOptions& options = {});

// Writes a tiny Llama-shaped source model into `dir` (created; must not
// exist): config.json, generation_config.json, tokenizer files, README.md,
// LICENSE and model.safetensors (BF16, 2 layers, attention biases, untied
// lm_head), all from fixed seeds so the bytes never change.
void write_self_test_source_model(const std::filesystem::path& dir);

// Runs the self-test in a fresh directory under `scratch_dir` (created when
// missing; the fresh directory is removed afterwards). Returns a report whose
// "steps" are the self-test cases (step_label "Case"): each is ok when
// validate_checkpoint() gave exactly the expected statuses for steps 4, 1, 3
// and 2, and FAIL with what it got otherwise. passed() is the self-test's
// verdict. The report's text does not depend on scratch_dir.
ValidationReport run_validator_self_test(const std::filesystem::path& scratch_dir);

}  // namespace qloom::validate
