#include "qloom/cli/help_examples.h"

#include <CLI/CLI.hpp>

namespace qloom::cli {
namespace {

// What a hub example needs; the docs tests serve only the demo model.
constexpr std::string_view kNetwork = "network: the Hugging Face Hub";

std::vector<CommandExamples> make_table() {
  return {
      {"inspect",
       {{"Architecture, layers, parameters by dtype, tensors, shards and size of a local model",
         "qloom inspect models/stories260K-hf-bf16", ""},
        {"The same facts as one JSON object, for scripts", "qloom inspect models/stories260K-hf-bf16 --json", ""},
        {"A Hugging Face Hub model: downloads its config.json only", "qloom inspect Qwen/Qwen2.5-0.5B-Instruct",
         kNetwork}}},
      {"quantize",
       {{"FP8 weights and activations plus an FP8 KV cache, calibrated on 32 samples of the bundled c4 text",
         "qloom quantize --model_dir models/stories260K-hf-bf16 --output_dir out/fp8 --quant_scheme fp8 "
         "--kv_cache_dtype fp8 --num_calib_data 32",
         ""},
        {"Int8 W8A8 after SmoothQuant, written as a Quark checkpoint and as a llama.cpp GGUF (out/int8/llama.gguf)",
         "qloom quantize --model_dir models/stories260K-hf-bf16 --output_dir out/int8 --quant_scheme int8 "
         "--quant_algo smoothquant --num_calib_data 16 --model_export hf_format gguf",
         ""},
        {"MXFP4 weights only; layers MXFP4 cannot store (in_features not a multiple of 32) stay in bf16",
         "qloom quantize --model_dir models/stories260K-hf-bf16 --output_dir out/mxfp4 --quant_scheme "
         "mxfp4_weight_only --exclude_unsupported",
         ""},
        {"Int4 weights in groups of 128 with GPTQ, straight from the Hub",
         "qloom quantize --model_dir Qwen/Qwen2.5-0.5B-Instruct --output_dir out/qwen-int4 --quant_scheme "
         "int4_wo_128 --quant_algo gptq",
         kNetwork}}},
      {"validate",
       {{"Check the fp8 checkpoint against its source: Quark's checks, numeric checks, vLLM's loader rules",
         "qloom validate --source models/stories260K-hf-bf16 --quantized out/fp8", ""},
        {"Also write validation_report.md and validation_report.json; skip the numeric step",
         "qloom validate --source models/stories260K-hf-bf16 --quantized out/int8 --report_dir out/int8-report "
         "--no_numeric",
         ""},
        {"The validator on a generated model and broken copies of it", "qloom validate --self-test", ""}}},
      {"eval",
       {{"Perplexity over the first 8 windows of the bundled TinyStories text",
         "qloom eval models/stories260K-hf-bf16 --task ppl --dataset tinystories --limit 8", ""},
        {"KL divergence of the fp8 checkpoint from its source, as llama-perplexity prints it",
         "qloom eval out/fp8 --source models/stories260K-hf-bf16 --task kld --limit 8", ""},
        {"HellaSwag on 20 documents, scored as lm-eval scores it; the results also as JSON",
         "qloom eval models/stories260K-hf-bf16 --task hellaswag --limit 20 --json out/hellaswag.json", ""},
        {"GSM8K (5-shot) through an OpenAI-compatible server (vLLM, SGLang, qloom serve) on port 8000",
         "qloom eval Qwen/Qwen2.5-0.5B-Instruct --task gsm8k --limit 50 --server http://127.0.0.1:8000",
         "network and a server on port 8000"}}},
      {"run",
       {{"The whole lifecycle from one sentence, without questions; every artifact in out/run-fp8",
         "qloom run \"quantize the bundled model to fp8 with fp8 kv cache, calibrate on 32 samples, measure "
         "perplexity on 20 samples, accept a 10% perplexity gap\" --workspace out/run-fp8 --interactive off",
         ""},
        {"A Hub model to int4 with AWQ, stopping at each checkpoint for y, n or a change in plain words",
         "qloom run \"quantize Qwen/Qwen2.5-0.5B-Instruct to int4 with awq, accept a 2% perplexity gap\" "
         "--workspace out/qwen-awq --interactive on",
         "network and a terminal to answer the checkpoints"}}},
      {"convert",
       {{"A Quark checkpoint as a llama.cpp GGUF, its codes carried over (int8 -> Q8_0)",
         "qloom convert out/int8 --to gguf --output out/int8.gguf", ""},
        {"A llama.cpp GGUF into a HuggingFace bf16 directory", "qloom convert out/int8.gguf --output_dir out/int8-hf",
         ""},
        {"A Quark checkpoint as compressed-tensors, for llm-compressor and vLLM",
         "qloom convert out/fp8 --to compressed-tensors --output_dir out/fp8-ct", ""}}},
      {"serve",
       {{"Serve the demo model on http://127.0.0.1:8000 until Ctrl-C", "qloom serve models/stories260K-hf-bf16",
         "a terminal of its own: it serves until stopped"},
        {"The fp8 checkpoint in the background on a free port (printed on stderr), requiring an API key",
         "qloom serve out/fp8 --port 0 --api_key secret &", ""},
        {"A Hub model on every interface, under its hub id as the served model name",
         "qloom serve Qwen/Qwen2.5-0.5B-Instruct --host 0.0.0.0 --port 8000 --served_model_name "
         "Qwen/Qwen2.5-0.5B-Instruct",
         kNetwork}}},
      {"perf",
       {{"One fixed recipe, gated on perplexity over 8 windows, in a resumable session directory",
         "qloom perf --model models/stories260K-hf-bf16 --quant-strategy \"fp8 with fp8 kv cache\" --eval-task ppl "
         "--eval-limit 8 --accuracy-gap 10% --num-calib-data 16 --session-dir runs/fp8",
         ""},
        {"A mixed-precision search: each partition gets native, fp8 or int8 by measured sensitivity",
         "qloom perf --model models/stories260K-hf-bf16 --eval-task ppl --eval-limit 8 --accuracy-gap 10% "
         "--layer-precision-candidates native fp8 int8 --num-calib-data 16 --session-dir runs/search",
         ""},
        {"A session's progress.json (safe while it runs)", "qloom perf status --session runs/search", ""},
        {"A 7B model on gsm8k with throughput measured before and after",
         "qloom perf --model /models/Qwen2.5-7B-Instruct --eval-task gsm8k --performance-mode measure "
         "--session-dir runs/qwen7b",
         "a local copy of Qwen2.5-7B-Instruct and hours of CPU time"}}},
  };
}

}  // namespace

const std::vector<CommandExamples>& help_examples() {
  static const std::vector<CommandExamples> table = make_table();
  return table;
}

std::string help_examples_footer(std::string_view command) {
  for (const CommandExamples& c : help_examples()) {
    if (c.command != command) continue;
    std::string out = "Examples (from the repository root; models/stories260K-hf-bf16 is the bundled demo model):\n";
    for (size_t i = 0; i < c.examples.size(); ++i) {
      const HelpExample& e = c.examples[i];
      if (i > 0) out += "\n";
      out += "  # ";
      out += e.comment;
      if (!e.needs.empty()) {
        out += "  [needs ";
        out += e.needs;
        out += "]";
      }
      out += "\n  ";
      out += e.command;
      out += "\n";
    }
    out.pop_back();  // CLI11 ends the footer with its own newline
    return out;
  }
  return {};
}

void attach_help_examples(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    if (std::string footer = help_examples_footer(sub->get_name()); !footer.empty()) sub->footer(std::move(footer));
}

}  // namespace qloom::cli
