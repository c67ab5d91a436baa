#include "qloom/cli/runtime_flags.h"

#include "qloom/cli/flags.h"

namespace qloom::cli {

void add_runtime_flags(CLI::App* sub, RuntimeFlags& flags, const std::string& default_runtime) {
  flags.runtime = default_runtime;
  sub->add_option(flag_names("runtime"), flags.runtime,
                  "how a Quark checkpoint's quantized linears compute: simulate (weights dequantized, "
                  "activation / KV quantization simulated: Quark's arithmetic) or native (the engine's "
                  "int8 / fp8 / 4-bit kernels, fp8 KV cache; specs without a kernel fall back to "
                  "simulate). Default " + default_runtime)
      ->check(CLI::IsMember({"simulate", "native"}));
  sub->add_option(flag_names("compute"), flags.compute,
                  "unquantized linears: f32 (exact fp32 activations, default) or bf16 (activations "
                  "rounded to bf16 on the bf16 dot-product kernel, as llama.cpp's BF16)")
      ->check(CLI::IsMember({"f32", "bf16"}));
}

}  // namespace qloom::cli
