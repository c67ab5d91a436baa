// --runtime native|simulate and --compute f32|bf16, shared by the commands
// that load a model into the engine (eval, validate, serve, perf).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "qloom/engine/model.h"
#include "qloom/export/checkpoint_runtime.h"

namespace qloom::cli {

struct RuntimeFlags {
  std::string runtime;  // set to the command's default by add_runtime_flags
  std::string compute = "f32";

  exporter::Runtime parsed_runtime() const { return exporter::parse_runtime(runtime); }
  engine::LoadOptions::Compute parsed_compute() const {
    return compute == "bf16" ? engine::LoadOptions::Compute::kBF16 : engine::LoadOptions::Compute::kF32;
  }
};

// default_runtime: "simulate" where the numbers must mean Quark's arithmetic
// (eval, validate), "native" where speed is the point (serve, perf).
void add_runtime_flags(CLI::App* sub, RuntimeFlags& flags, const std::string& default_runtime);

}  // namespace qloom::cli
