// agent/intent: a table of prompts, each with the intent fields it must yield
// and exactly the open questions it must raise (an empty list is checked too:
// a row that expects no question fails when one is asked). Every row names
// the scheme it expects, so every row checks at least two things.
#include "qloom/agent/intent.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "qloom/quant/scheme_registry.h"

namespace qloom::agent {
namespace {

struct Row {
  std::string prompt;
  std::string scheme;                     // expected quant_scheme ("" = none, with a question)
  std::vector<std::string> ask = {};      // expected open-question fields, in order
  std::optional<std::string> model = {};  // expected model value
  std::optional<std::string> kind = {};   // expected model_kind
  std::optional<std::string> kv = {};
  std::optional<std::string> algo = {};
  std::optional<std::vector<std::string>> exclude = {};
  std::optional<std::map<std::string, std::string>> overrides = {};
  std::optional<std::vector<std::string>> quantize = {};
  std::optional<uint64_t> calib = {};
  std::optional<uint64_t> seq = {};
  std::optional<std::string> dataset = {};
  std::optional<std::string> output = {};
  std::optional<std::string> hardware = {};
  std::optional<std::string> priority = {};
  std::optional<double> gap = {};         // -1: no gap stated
  std::optional<std::string> gap_kind = {};
  std::optional<std::string> metric = {};
  std::optional<std::string> eval_dataset = {};
  std::optional<bool> eval = {};
  std::optional<uint64_t> eval_limit = {};
  std::optional<Source> scheme_src = {};
  std::optional<std::string> note = {};   // substring of one of the notes
  std::optional<std::vector<std::string>> exports = {};  // expected model_export
};

const char* kQwen = "Qwen/Qwen2.5-0.5B";
const char* kLlama = "meta-llama/Llama-3.1-8B-Instruct";

IntentContext context() {
  IntentContext c;
  c.demo_model_dir = QLOOM_DEMO_MODEL_DIR;
  c.local_model_dirs = {"/models/my-llama-7b"};
  c.output_root = "/ws";
  return c;
}

const std::vector<Row>& table() {
  static const std::vector<Row> rows = {
      // ---- scheme aliases --------------------------------------------------------------
      {.prompt = "Quantize Qwen/Qwen2.5-0.5B to FP8", .scheme = "fp8", .model = kQwen, .kind = "hub", .kv = "fp8",
       .algo = "", .output = "/ws/Qwen2.5-0.5B-fp8", .gap = -1, .metric = "gsm8k", .scheme_src = Source::kStated},
      {.prompt = "quantize meta-llama/Llama-3.1-8B-Instruct with W8A8", .scheme = "fp8", .model = kLlama, .kind = "hub"},
      {.prompt = "W8A8-INT8 for meta-llama/Llama-3.1-8B-Instruct please", .scheme = "int8", .model = kLlama, .kv = ""},
      {.prompt = "int8 quantization of Qwen/Qwen2.5-0.5B for CPU deployment", .scheme = "int8", .hardware = "cpu"},
      {.prompt = "Quantize Qwen/Qwen2.5-0.5B to W4A16", .scheme = "int4_wo_128", .kv = "", .algo = ""},
      {.prompt = "Qwen/Qwen2.5-0.5B, INT4 g128", .scheme = "int4_wo_128", .model = kQwen},
      {.prompt = "Qwen/Qwen2.5-0.5B int4 with group size 64", .scheme = "int4_wo_64"},
      {.prompt = "make a 4-bit g32 version of Qwen/Qwen2.5-0.5B", .scheme = "int4_wo_32", .model = kQwen},
      {.prompt = "INT4 per-channel weights for ./models/llama", .scheme = "int4_wo_per_channel", .model = "./models/llama",
       .kind = "local"},
      {.prompt = "asymmetric int4 quantization of Qwen/Qwen2.5-0.5B", .scheme = "uint4_wo_128"},
      {.prompt = "UINT4 g64 on Qwen/Qwen2.5-0.5B", .scheme = "uint4_wo_64", .algo = ""},
      {.prompt = "AWQ 4-bit for meta-llama/Llama-3.1-8B-Instruct", .scheme = "uint4_wo_128", .model = kLlama,
       .algo = "awq", .note = "AWQ 4-bit"},
      {.prompt = "Run GPTQ on Qwen/Qwen2.5-0.5B", .scheme = "int4_wo_128", .algo = "gptq",
       .scheme_src = Source::kInferred},
      {.prompt = "GPTQ with int4_wo_64 on Qwen/Qwen2.5-0.5B", .scheme = "int4_wo_64", .algo = "gptq",
       .scheme_src = Source::kStated},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to MXFP4", .scheme = "mxfp4", .kv = ""},
      {.prompt = "MXFP4 weights only for Qwen/Qwen2.5-0.5B", .scheme = "mxfp4_weight_only", .model = kQwen},
      {.prompt = "per-channel FP8 for Qwen/Qwen2.5-0.5B", .scheme = "ptpc_fp8", .kv = "fp8"},
      {.prompt = "PTPC quantization of meta-llama/Llama-3.1-8B-Instruct", .scheme = "ptpc_fp8", .model = kLlama},
      {.prompt = "Quantize Qwen/Qwen2.5-0.5B: w_uint4_per_group_asym", .scheme = "uint4_wo_128", .note = "legacy"},
      {.prompt = "Quantize Qwen/Qwen2.5-0.5B to 8-bit integer", .scheme = "int8"},
      {.prompt = "Quantize Qwen/Qwen2.5-0.5B to W4A16 and use a group size of 64", .scheme = "int4_wo_64"},
      {.prompt = "smoothquant + int8 on Qwen/Qwen2.5-0.5B", .scheme = "int8", .algo = "smoothquant"},
      {.prompt = "Quantize Qwen/Qwen2.5-0.5B. FP8, no gptq", .scheme = "fp8", .algo = "", .note = "negated"},
      {.prompt = "symmetric int4 with AWQ for Qwen/Qwen2.5-0.5B", .scheme = "int4_wo_128", .algo = "awq"},
      // ---- issue 17: W4A8, MXFP6, NVFP4, AMD FP4, rotation and the GPTQ variants --------
      {.prompt = "W4A8 on Qwen/Qwen2.5-0.5B", .scheme = "int4_fp8", .kv = "", .scheme_src = Source::kStated},
      {.prompt = "W4A8 MXFP4 for Qwen/Qwen2.5-0.5B", .scheme = "mxfp4_fp8"},
      {.prompt = "Qwen/Qwen2.5-0.5B with mxfp4 weights and fp8 activations", .scheme = "mxfp4_fp8"},
      {.prompt = "Qwen/Qwen2.5-0.5B to mxfp4 with an fp8 kv cache", .scheme = "mxfp4", .kv = "fp8"},
      {.prompt = "W4A8 with fp8 kv cache for Qwen/Qwen2.5-0.5B", .scheme = "int4_fp8", .kv = "fp8"},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to MXFP6", .scheme = "mxfp6_e2m3"},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to MXFP6 e3m2", .scheme = "mxfp6_e3m2"},
      {.prompt = "mxfp4_mxfp6_e2m3 for Qwen/Qwen2.5-0.5B", .scheme = "mxfp4_mxfp6_e2m3"},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to NVFP4", .scheme = "nvfp4", .kv = ""},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to fp4_block16_scale_e4m3", .scheme = "nvfp4", .note = "legacy name"},
      {.prompt = "amdfp4 for Qwen/Qwen2.5-0.5B", .scheme = "amdfp4"},
      {.prompt = "amdfp4 group size 32 for Qwen/Qwen2.5-0.5B", .scheme = "amdfp4_g32"},
      {.prompt = "amdfp4 with global scale g32 for Qwen/Qwen2.5-0.5B", .scheme = "amdfp4_global32"},
      {.prompt = "amdfp4 g64 for Qwen/Qwen2.5-0.5B", .scheme = "", .ask = {"quant_scheme"}},
      {.prompt = "QuaRot int4 for Qwen/Qwen2.5-0.5B", .scheme = "int4_wo_128", .algo = "rotation"},
      {.prompt = "rotate then GPTQ Qwen/Qwen2.5-0.5B to int4 per-channel", .scheme = "int4_wo_per_channel",
       .algo = "rotation,gptq"},
      {.prompt = "Qwen/Qwen2.5-0.5B mxfp4 with gptq after a QuaRot rotation", .scheme = "mxfp4", .algo = "rotation,gptq"},
      {.prompt = "GPTAQ int4 for Qwen/Qwen2.5-0.5B", .scheme = "int4_wo_128", .algo = "gptaq"},
      {.prompt = "Qwen/Qwen2.5-0.5B int4_wo_64 with qronos", .scheme = "int4_wo_64", .algo = "qronos"},
      {.prompt = "auto smoothquant + int8 on Qwen/Qwen2.5-0.5B", .scheme = "int8", .algo = "autosmoothquant"},
      {.prompt = "Qwen/Qwen2.5-0.5B int4 with gptq and awq", .scheme = "int4_wo_128", .ask = {"quant_algo"}},
      // ---- demo / bundled / local / missing models ------------------------------------
      {.prompt = "quantize the bundled model to int4 g128 with fp8 kv cache, accept a 10% perplexity gap",
       .scheme = "int4_wo_128", .model = "demo", .kind = "demo", .kv = "fp8", .gap = 0.10, .gap_kind = "relative",
       .metric = "ppl", .eval_dataset = "wikitext2"},
      {.prompt = "Quantize the demo model to fp8", .scheme = "fp8", .model = "demo", .kind = "demo",
       .output = "/ws/stories260K-hf-bf16-fp8"},
      {.prompt = "int4 stories260K", .scheme = "int4_wo_128", .model = "demo", .kind = "demo"},
      {.prompt = "quantize my-llama-7b to fp8", .scheme = "fp8", .model = "/models/my-llama-7b", .kind = "local"},
      {.prompt = "quantize to fp8", .scheme = "fp8", .ask = {"model"}, .model = "", .kind = ""},
      {.prompt = "Please quantize to int4, keep lm_head in bf16", .scheme = "int4_wo_128", .ask = {"model"},
       .exclude = std::vector<std::string>{"lm_head"}},
      {.prompt = "", .scheme = "fp8", .ask = {"model"}, .scheme_src = Source::kDefault},
      {.prompt = "fp8 quantize Llama-3.1-8B", .scheme = "fp8", .ask = {"model"}, .model = "Llama-3.1-8B", .kind = "name"},
      {.prompt = "quantize qwen 2.5 7b to int4", .scheme = "int4_wo_128", .ask = {"model"}, .kind = "name"},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B and Qwen/Qwen2.5-1.5B to fp8", .scheme = "fp8", .ask = {"model"}},
      {.prompt = "quantize https://huggingface.co/Qwen/Qwen2.5-0.5B to fp8", .scheme = "fp8", .model = kQwen, .kind = "hub"},
      {.prompt = "Quantize /models/llama-3 to int4", .scheme = "int4_wo_128", .model = "/models/llama-3", .kind = "local",
       .output = "/ws/llama-3-int4_wo_128"},
      {.prompt = "quantize ~/models/phi-2 with fp8", .scheme = "fp8", .model = "~/models/phi-2", .kind = "local"},
      {.prompt = "I'd like Qwen/Qwen2.5-0.5B quantized, doesn't matter how", .scheme = "fp8", .model = kQwen,
       .scheme_src = Source::kDefault},
      // ---- conflicts and negations ------------------------------------------------------
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to fp8 ... actually make it int4", .scheme = "int4_wo_128", .kv = "",
       .note = "replaces the earlier"},
      {.prompt = "Use fp8 for Qwen/Qwen2.5-0.5B. No wait, switch to mxfp4.", .scheme = "mxfp4"},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to fp8 or int4", .scheme = "", .ask = {"quant_scheme"}},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B with fp8 and int8", .scheme = "", .ask = {"quant_scheme"}},
      {.prompt = "Qwen/Qwen2.5-0.5B to int4 instead of fp8", .scheme = "int4_wo_128"},
      {.prompt = "Qwen/Qwen2.5-0.5B: not fp8, use mxfp4", .scheme = "mxfp4"},
      {.prompt = "Qwen/Qwen2.5-0.5B, awq... no, gptq instead", .scheme = "int4_wo_128", .algo = "gptq"},
      {.prompt = "W4A16 (uint4_wo_64) for Qwen/Qwen2.5-0.5B", .scheme = "uint4_wo_64"},
      // ---- typos of scheme names --------------------------------------------------------
      {.prompt = "quantize Qwen/Qwen2.5-0.5B with int4_wo_12", .scheme = "int4_wo_128", .scheme_src = Source::kInferred,
       .note = "did you mean int4_wo_128"},
      {.prompt = "Qwen/Qwen2.5-0.5B mxpf4 please", .scheme = "mxfp4", .scheme_src = Source::kInferred},
      {.prompt = "fp88 quantization for Qwen/Qwen2.5-0.5B", .scheme = "fp8", .scheme_src = Source::kInferred},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B as uint4_wo128", .scheme = "uint4_wo_128"},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to ptcp_fp8", .scheme = "ptpc_fp8"},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to int5", .scheme = "", .ask = {"quant_scheme"}},
      {.prompt = "Qwen/Qwen2.5-0.5B with gtpq", .scheme = "int4_wo_128", .algo = "gptq", .note = "read as gptq"},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to nf4", .scheme = "", .ask = {"quant_scheme"}},
      // ---- schemes qloom cannot run / impossible values ----------------------------------
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to mx6", .scheme = "mx6", .ask = {"quant_scheme"}},
      {.prompt = "bfp16 for Qwen/Qwen2.5-0.5B", .scheme = "bfp16", .ask = {"quant_scheme"}},
      {.prompt = "Qwen/Qwen2.5-0.5B int4 group size 256", .scheme = "", .ask = {"quant_scheme"}},
      {.prompt = "W8A16 for Qwen/Qwen2.5-0.5B", .scheme = "", .ask = {"quant_scheme"}},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to fp8 with an int8 kv cache", .scheme = "fp8", .ask = {"kv_cache_dtype"}},
      // ---- hardware hints and priorities (seed 001 recommendation table) -----------------
      {.prompt = "quantize Qwen/Qwen2.5-0.5B for MI300X", .scheme = "fp8", .kv = "fp8", .hardware = "mi300x",
       .priority = "amd_mi300x", .scheme_src = Source::kInferred},
      {.prompt = "Target: 8x MI355X. Model: meta-llama/Llama-3.1-8B-Instruct", .scheme = "mxfp4", .model = kLlama,
       .hardware = "mi355x", .priority = "amd_mi355x", .scheme_src = Source::kInferred},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B for mi350", .scheme = "mxfp4", .hardware = "mi350x", .priority = "amd_mi355x"},
      {.prompt = "Qwen/Qwen2.5-0.5B for a GB200 cluster", .scheme = "nvfp4", .hardware = "gb200",
       .priority = "nvidia_blackwell", .scheme_src = Source::kInferred},
      {.prompt = "serve Qwen/Qwen2.5-0.5B on Blackwell", .scheme = "nvfp4", .hardware = "blackwell"},
      {.prompt = "Qwen/Qwen2.5-0.5B on MI355X, but use fp8", .scheme = "fp8", .hardware = "mi355x",
       .scheme_src = Source::kStated},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B for H100 serving", .scheme = "fp8", .hardware = "h100",
       .priority = "nvidia_h100"},
      {.prompt = "Qwen/Qwen2.5-0.5B on cpu", .scheme = "int8", .kv = "", .hardware = "cpu", .priority = "cpu_deployment",
       .scheme_src = Source::kInferred},
      {.prompt = "Make Qwen/Qwen2.5-0.5B as small as possible", .scheme = "int4_wo_32", .algo = "gptq",
       .priority = "smallest_model"},
      {.prompt = "I need the best accuracy for Qwen/Qwen2.5-0.5B on MI300X", .scheme = "fp8", .hardware = "mi300x",
       .priority = "best_accuracy"},
      {.prompt = "export Qwen/Qwen2.5-0.5B for llama.cpp", .scheme = "uint4_wo_32", .model = kQwen, .algo = "awq",
       .priority = "gguf_export", .exports = std::vector<std::string>{"gguf"}},
      {.prompt = "Qwen/Qwen2.5-0.5B to fp8, also as compressed tensors and GGUF", .scheme = "fp8", .model = kQwen,
       .exports = std::vector<std::string>{"compressed-tensors", "gguf"}},
      {.prompt = "int4 Qwen/Qwen2.5-0.5B for llm-compressor users", .scheme = "int4_wo_128", .model = kQwen,
       .exports = std::vector<std::string>{"compressed-tensors"}},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B for an A100", .scheme = "fp8", .hardware = "a100", .note = "no native FP8"},
      {.prompt = "mxfp4 on MI355X for Qwen/Qwen2.5-0.5B", .scheme = "mxfp4", .hardware = "mi355x",
       .scheme_src = Source::kStated},
      // ---- output directories ---------------------------------------------------------
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to fp8 and save it to '/tmp/my out dir'", .scheme = "fp8",
       .model = kQwen, .output = "/tmp/my out dir"},
      {.prompt = "Quantize /models/llama-3 to int4 and write the result to \"./out dir/llama int4\"",
       .scheme = "int4_wo_128", .model = "/models/llama-3", .output = "./out dir/llama int4"},
      {.prompt = "quantize ./models/llama to ./out/llama-fp8", .scheme = "fp8", .model = "./models/llama",
       .output = "./out/llama-fp8"},
      {.prompt = "--model_dir /models/qwen --quant_scheme fp8 --output_dir /tmp/q", .scheme = "fp8",
       .model = "/models/qwen", .output = "/tmp/q"},
      {.prompt = "Qwen/Qwen2.5-0.5B fp8, output_dir=/tmp/qwen-fp8", .scheme = "fp8", .output = "/tmp/qwen-fp8"},
      {.prompt = "fp8 Qwen/Qwen2.5-0.5B, save it to \xE2\x80\x9C/tmp/fancy out\xE2\x80\x9D", .scheme = "fp8",
       .output = "/tmp/fancy out"},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to int4, output dir qwen_int4", .scheme = "int4_wo_128",
       .output = "qwen_int4"},
      // ---- accuracy tolerance -----------------------------------------------------------
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to fp8, accept a 5% gap", .scheme = "fp8", .gap = 0.05,
       .gap_kind = "relative"},
      {.prompt = "fp8 for Qwen/Qwen2.5-0.5B; it's ok to lose up to 0.05 accuracy", .scheme = "fp8", .gap = 0.05,
       .gap_kind = "absolute", .note = "accuracy points"},
      {.prompt = "int4 Qwen/Qwen2.5-0.5B, stay within 2% of the original on gsm8k", .scheme = "int4_wo_128",
       .gap = 0.02, .metric = "gsm8k"},
      {.prompt = "Qwen/Qwen2.5-0.5B to fp8 with at most 1.5 percent degradation", .scheme = "fp8", .gap = 0.015},
      {.prompt = "fp8 Qwen/Qwen2.5-0.5B, threshold 0.02", .scheme = "fp8", .gap = 0.02},
      {.prompt = "Qwen/Qwen2.5-0.5B fp8, I can tolerate a drop of 3 points in accuracy", .scheme = "fp8", .gap = 0.03,
       .gap_kind = "absolute"},
      {.prompt = "fp8 Qwen/Qwen2.5-0.5B, accept a gap of 4", .scheme = "fp8", .gap = 0.04, .note = "read as 4%"},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to fp8 with a 150% gap", .scheme = "fp8", .ask = {"eval_gap_threshold"}},
      {.prompt = "fp8 Qwen/Qwen2.5-0.5B --acceptable-eval-gap 0.04", .scheme = "fp8", .gap = 0.04},
      // ---- metrics ------------------------------------------------------------------------
      {.prompt = "fp8 Qwen/Qwen2.5-0.5B, report ppl on wikitext-2", .scheme = "fp8", .metric = "ppl",
       .eval_dataset = "wikitext2"},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B and measure perplexity", .scheme = "fp8", .metric = "ppl"},
      {.prompt = "Qwen/Qwen2.5-0.5B to int4, evaluate on MMLU", .scheme = "int4_wo_128", .metric = "mmlu",
       .eval_dataset = "mmlu"},
      {.prompt = "fp8 Qwen/Qwen2.5-0.5B with KL divergence against the source", .scheme = "fp8", .metric = "kld"},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to int8 and judge it by hellaswag", .scheme = "int8", .metric = "hellaswag",
       .eval_dataset = "hellaswag"},
      {.prompt = "Qwen/Qwen2.5-0.5B fp8, judged by arc-easy", .scheme = "fp8", .metric = "arc_easy",
       .eval_dataset = "arc_easy"},
      {.prompt = "Qwen/Qwen2.5-0.5B fp8, skip eval", .scheme = "fp8", .eval = false},
      {.prompt = "fp8 Qwen/Qwen2.5-0.5B, evaluate gsm8k on 200 samples", .scheme = "fp8", .calib = 128,
       .metric = "gsm8k", .eval_limit = 200},
      // ---- exclusions and overrides ------------------------------------------------------
      {.prompt = "int4 Qwen/Qwen2.5-0.5B but don't quantize attention", .scheme = "int4_wo_128",
       .exclude = std::vector<std::string>{"*self_attn*"}},
      {.prompt = "fp8 for Qwen/Qwen2.5-0.5B, keep lm_head and attention in bf16", .scheme = "fp8",
       .exclude = std::vector<std::string>{"lm_head", "*self_attn*"}},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to int4 but keep attention in fp8", .scheme = "int4_wo_128",
       .exclude = std::vector<std::string>{},
       .overrides = std::map<std::string, std::string>{{"*self_attn*", "fp8"}}},
      {.prompt = "fp8 for Qwen/Qwen2.5-0.5B, exclude *mlp.gate and the first 2 layers", .scheme = "fp8",
       .exclude = std::vector<std::string>{"*mlp.gate", "model.layers.0.*", "model.layers.1.*"}},
      {.prompt = "mxfp4 for Qwen/Qwen3-30B-A3B, skip the experts and the router", .scheme = "mxfp4",
       .exclude = std::vector<std::string>{"*experts*", "*.gate"}},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to fp8, and quantize the lm_head too", .scheme = "fp8",
       .exclude = std::vector<std::string>{}, .quantize = std::vector<std::string>{"lm_head"}},
      {.prompt = "int4 for Qwen/Qwen2.5-0.5B, leave down_proj unquantized", .scheme = "int4_wo_128",
       .exclude = std::vector<std::string>{"*down_proj"}},
      {.prompt = "fp8 Qwen/Qwen2.5-0.5B but skip the last 2 layers", .scheme = "fp8", .ask = {"exclude_layers"}},
      // ---- calibration --------------------------------------------------------------------
      {.prompt = "int4 Qwen/Qwen2.5-0.5B, calibrate on 256 samples with seq len 1024", .scheme = "int4_wo_128",
       .calib = 256, .seq = 1024, .dataset = "pileval"},
      {.prompt = "GPTQ Qwen/Qwen2.5-0.5B using 64 calibration samples of 2048 tokens from c4", .scheme = "int4_wo_128",
       .algo = "gptq", .calib = 64, .seq = 2048, .dataset = "c4"},
      {.prompt = "fp8 Qwen/Qwen2.5-0.5B --num_calib_data 512 --seq_len 256 --dataset pileval", .scheme = "fp8",
       .calib = 512, .seq = 256, .dataset = "pileval"},
      {.prompt = "fp8 Qwen/Qwen2.5-0.5B, num_calib_data=16, seq_len=64", .scheme = "fp8", .calib = 16, .seq = 64},
      {.prompt = "fp8 Qwen/Qwen2.5-0.5B num_calib_data 16 seq_len 64", .scheme = "fp8", .calib = 16, .seq = 64},
      {.prompt = "fp8 Qwen/Qwen2.5-0.5B with 2048 seq_len", .scheme = "fp8", .seq = 2048},
      {.prompt = "calibrate Qwen/Qwen2.5-0.5B on wikitext2 and evaluate ppl on tinystories, int8", .scheme = "int8",
       .dataset = "wikitext2", .metric = "ppl", .eval_dataset = "tinystories"},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to fp8 with calibration data /data/calib.jsonl", .scheme = "fp8",
       .model = kQwen, .dataset = "/data/calib.jsonl"},
      {.prompt = "fp8 Qwen/Qwen2.5-0.5B with a 2k-token sequence length and 1k samples", .scheme = "fp8",
       .calib = 1000, .seq = 2048},
      // ---- KV cache -----------------------------------------------------------------------
      {.prompt = "quantize Qwen/Qwen2.5-0.5B with fp8, fp8 kv cache", .scheme = "fp8", .kv = "fp8"},
      {.prompt = "int4_wo_128 for Qwen/Qwen2.5-0.5B without kv cache quantization", .scheme = "int4_wo_128", .kv = ""},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to fp8 but leave the KV cache in bf16", .scheme = "fp8", .kv = ""},
      {.prompt = "mxfp4 Qwen/Qwen2.5-0.5B, kv cache in fp8", .scheme = "mxfp4", .kv = "fp8"},
      {.prompt = "uint4 Qwen/Qwen2.5-0.5B --kv_cache_dtype fp8", .scheme = "uint4_wo_128", .kv = "fp8"},
      // ---- longer, mixed requests ---------------------------------------------------------
      {.prompt = "Can you quantize Qwen/Qwen2.5-7B-Instruct to fp8 for MI300X and save it under /scratch/out? "
                 "Keep the accuracy within 1% on gsm8k.",
       .scheme = "fp8", .model = "Qwen/Qwen2.5-7B-Instruct", .kv = "fp8", .output = "/scratch/out",
       .hardware = "mi300x", .gap = 0.01, .metric = "gsm8k", .scheme_src = Source::kStated},
      {.prompt = "I want an int4 AWQ version of mistralai/Mistral-7B-Instruct-v0.3 with group size 32, calibrated on "
                 "512 samples.",
       .scheme = "uint4_wo_32", .model = "mistralai/Mistral-7B-Instruct-v0.3", .algo = "awq", .calib = 512},
      {.prompt = "quantize the model in /data/models/llama3 with gptq 4bit g64, skip lm_head, 1024 seq len",
       .scheme = "int4_wo_64", .model = "/data/models/llama3", .kind = "local", .algo = "gptq",
       .exclude = std::vector<std::string>{"lm_head"}, .seq = 1024},
      {.prompt = "Use W4A16 GPTQ on meta-llama/Llama-3.1-8B-Instruct, but don't touch the attention layers or the lm head.",
       .scheme = "int4_wo_128", .algo = "gptq", .exclude = std::vector<std::string>{"*self_attn*", "lm_head"}},
      {.prompt = "quantise Qwen/Qwen2.5-0.5B in FP8 (W8A8) and FP8 KV, evaluate on 50 gsm8k problems", .scheme = "fp8",
       .kv = "fp8", .calib = 128, .eval_limit = 50},
      {.prompt = "Qwen/Qwen2.5-0.5B: int4 weight-only, per-group 64, asymmetric", .scheme = "uint4_wo_64"},
      {.prompt = "Please quantize Qwen/Qwen2.5-0.5B with uint4, actually no, int4 per channel would be better",
       .scheme = "int4_wo_per_channel", .note = "replaces the earlier"},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to fp8. Output: \"/tmp/a b\". Actually save it to /tmp/c instead",
       .scheme = "fp8", .output = "/tmp/c"},
      {.prompt = "quantize /models/x/ to fp8 but not the lm_head and not the mlp.down_proj", .scheme = "fp8",
       .model = "/models/x/", .exclude = std::vector<std::string>{"lm_head", "*mlp.down_proj"}},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B, everything except attention, to int8", .scheme = "int8",
       .exclude = std::vector<std::string>{"*self_attn*"}},
      {.prompt = "Quantize Qwen/Qwen2.5-0.5B to FP8 on MI325X, no kv cache quantization, 2% relative gap max on MMLU, "
                 "64 samples",
       .scheme = "fp8", .kv = "", .calib = 64, .hardware = "mi325x", .gap = 0.02, .metric = "mmlu"},
      {.prompt = "I have an H100. Quantize deepseek-ai/DeepSeek-V2-Lite for it, keep experts in bf16", .scheme = "fp8",
       .model = "deepseek-ai/DeepSeek-V2-Lite", .exclude = std::vector<std::string>{"*experts*"}, .hardware = "h100",
       .scheme_src = Source::kInferred},
      {.prompt = "Hey, could you shrink google/gemma-2-2b-it for my laptop cpu?", .scheme = "int8",
       .model = "google/gemma-2-2b-it", .hardware = "cpu"},
      {.prompt = "quantize Qwen/Qwen2.5-0.5B to fp8 for vllm, losing no more than 1 point of gsm8k accuracy",
       .scheme = "fp8", .gap = 0.01, .gap_kind = "absolute"},
      {.prompt = "quantize facebook/opt-125m to int4 groupsize=32 and evaluate perplexity on wikitext",
       .scheme = "int4_wo_32", .model = "facebook/opt-125m", .metric = "ppl", .eval_dataset = "wikitext2"},
      {.prompt = "Quantize the bundled model. Use smoothquant. Accept a 0.5% gap. Save to /tmp/out.", .scheme = "fp8",
       .model = "demo", .algo = "smoothquant", .output = "/tmp/out", .gap = 0.005},
  };
  return rows;
}

std::string describe(const Intent& in) { return to_json(in).dump(1); }

class IntentTable : public ::testing::TestWithParam<size_t> {};

TEST_P(IntentTable, Row) {
  const Row& r = table()[GetParam()];
  const Intent in = parse_intent(r.prompt, context());
  SCOPED_TRACE("prompt: " + r.prompt + "\nintent: " + describe(in));
  EXPECT_EQ(in.quant_scheme.value, r.scheme);
  std::vector<std::string> asked;
  for (const auto& q : in.open_questions) asked.push_back(q.field);
  EXPECT_EQ(asked, r.ask);
  if (r.model) { EXPECT_EQ(in.model.value, *r.model); }
  if (r.kind) { EXPECT_EQ(in.model_kind, *r.kind); }
  if (r.kv) { EXPECT_EQ(in.kv_cache_dtype.value, *r.kv); }
  if (r.algo) { EXPECT_EQ(in.quant_algo.value, *r.algo); }
  if (r.exclude) { EXPECT_EQ(in.exclude_layers.value, *r.exclude); }
  if (r.overrides) { EXPECT_EQ(in.layer_quant_scheme.value, *r.overrides); }
  if (r.quantize) { EXPECT_EQ(in.quantize_layers.value, *r.quantize); }
  if (r.calib) { EXPECT_EQ(in.num_calib_data.value, *r.calib); }
  if (r.seq) { EXPECT_EQ(in.seq_len.value, *r.seq); }
  if (r.dataset) { EXPECT_EQ(in.dataset.value, *r.dataset); }
  if (r.output) { EXPECT_EQ(in.output_dir.value, *r.output); }
  if (r.hardware) { EXPECT_EQ(in.hardware.value, *r.hardware); }
  if (r.priority) { EXPECT_EQ(in.priority.value, *r.priority); }
  if (r.gap) {
    if (*r.gap < 0) {
      EXPECT_FALSE(in.eval_gap_threshold.value.has_value());
    } else {
      ASSERT_TRUE(in.eval_gap_threshold.value.has_value());
      EXPECT_NEAR(*in.eval_gap_threshold.value, *r.gap, 1e-12);
    }
  }
  if (r.gap_kind) { EXPECT_EQ(in.eval_gap_kind, *r.gap_kind); }
  if (r.metric) { EXPECT_EQ(in.metric_name.value, *r.metric); }
  if (r.eval_dataset) { EXPECT_EQ(in.eval_dataset.value, *r.eval_dataset); }
  if (r.eval) { EXPECT_EQ(in.eval_requested.value, *r.eval); }
  if (r.eval_limit) {
    ASSERT_TRUE(in.eval_limit.value.has_value());
    EXPECT_EQ(*in.eval_limit.value, *r.eval_limit);
  }
  if (r.exports) { EXPECT_EQ(in.model_export.value, *r.exports); }
  if (r.scheme_src) { EXPECT_EQ(source_name(in.quant_scheme.source), std::string(source_name(*r.scheme_src))); }
  if (r.note) {
    bool found = false;
    for (const auto& n : in.notes) found = found || n.find(*r.note) != std::string::npos;
    EXPECT_TRUE(found) << "no note contains '" << *r.note << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(Prompts, IntentTable, ::testing::Range<size_t>(0, table().size()));

TEST(Intent, TableHasAtLeastSixtyRows) { EXPECT_GE(table().size(), 60u); }

TEST(Intent, EverySchemeIsAQuarkNameOrEmpty) {
  // Every resolved scheme in the table is in the registry, or empty with a
  // question, or a Quark-only name with a question.
  for (const auto& r : table()) {
    const Intent in = parse_intent(r.prompt, context());
    if (in.quant_scheme.value.empty() || in.has_question("quant_scheme")) {
      EXPECT_TRUE(in.has_question("quant_scheme")) << r.prompt;
      const auto& later = quant::quark_only_scheme_names();
      EXPECT_TRUE(in.quant_scheme.value.empty() ||
                  std::find(later.begin(), later.end(), in.quant_scheme.value) != later.end())
          << r.prompt;
      continue;
    }
    EXPECT_NE(quant::find_scheme(in.quant_scheme.value), nullptr) << r.prompt;
  }
}

TEST(Intent, DefaultsFollowTheDecisionTable) {
  const Intent in = parse_intent("quantize Qwen/Qwen2.5-0.5B", context());
  EXPECT_EQ(in.quant_scheme.value, "fp8");
  EXPECT_EQ(in.quant_scheme.source, Source::kDefault);
  EXPECT_EQ(in.kv_cache_dtype.value, "fp8");
  EXPECT_EQ(in.kv_cache_dtype.source, Source::kDefault);
  EXPECT_EQ(in.dataset.value, "pileval");
  EXPECT_EQ(in.num_calib_data.value, 128u);
  EXPECT_EQ(in.seq_len.value, 512u);
  EXPECT_EQ(in.num_calib_data.source, Source::kDefault);
  EXPECT_EQ(in.metric_name.value, "gsm8k");
  EXPECT_EQ(in.eval_dataset.value, "gsm8k");
  EXPECT_TRUE(in.metric_higher_is_better);
  EXPECT_TRUE(in.eval_requested.value);
  EXPECT_FALSE(in.eval_gap_threshold.value.has_value());
  EXPECT_EQ(in.output_dir.value, "/ws/Qwen2.5-0.5B-fp8");
  EXPECT_EQ(in.output_dir.source, Source::kDefault);
  EXPECT_TRUE(in.exclude_layers.value.empty());
  EXPECT_TRUE(in.open_questions.empty());
  EXPECT_EQ(in.model_path, "");
}

TEST(Intent, DemoModelResolvesToContextDir) {
  const Intent in = parse_intent("quantize the bundled model", context());
  EXPECT_EQ(in.model.value, "demo");
  EXPECT_EQ(in.model_path, QLOOM_DEMO_MODEL_DIR);
  IntentContext none = context();
  none.demo_model_dir.clear();
  const Intent lost = parse_intent("quantize the bundled model", none);
  EXPECT_TRUE(lost.has_question("model"));
}

TEST(Intent, PerplexityIsLowerBetter) {
  EXPECT_FALSE(parse_intent("Qwen/Qwen2.5-0.5B fp8, ppl", context()).metric_higher_is_better);
  EXPECT_TRUE(parse_intent("Qwen/Qwen2.5-0.5B fp8, mmlu", context()).metric_higher_is_better);
}

TEST(Intent, ChangeAtCheckpointWins) {
  const IntentContext ctx = context();
  const Intent base = parse_intent("quantize Qwen/Qwen2.5-0.5B to int4 with 128 samples", ctx);
  ASSERT_EQ(base.quant_scheme.value, "int4_wo_128");
  const Intent awq = apply_intent_change(base, "use awq", ctx);
  EXPECT_EQ(awq.quant_algo.value, "awq");
  EXPECT_EQ(awq.quant_scheme.value, "uint4_wo_128");
  const Intent more = apply_intent_change(base, "calibrate on 256 samples", ctx);
  EXPECT_EQ(more.num_calib_data.value, 256u);
  const Intent keep = apply_intent_change(more, "keep attention in bf16", ctx);
  EXPECT_EQ(keep.exclude_layers.value, std::vector<std::string>{"*self_attn*"});
  EXPECT_EQ(keep.num_calib_data.value, 256u);
  const Intent fp8 = apply_intent_change(base, "switch to fp8", ctx);
  EXPECT_EQ(fp8.quant_scheme.value, "fp8");
  EXPECT_TRUE(fp8.open_questions.empty());
}

TEST(Intent, JsonCarriesEveryFieldWithItsSource) {
  const Intent in = parse_intent("quantize Qwen/Qwen2.5-0.5B to fp8, accept a 5% gap", context());
  const auto j = to_json(in);
  EXPECT_EQ(j["model"], "Qwen/Qwen2.5-0.5B");
  EXPECT_EQ(j["quant_scheme"], "fp8");
  EXPECT_EQ(j["kv_cache_dtype"], "fp8");
  EXPECT_DOUBLE_EQ(j["eval_gap_threshold"].get<double>(), 0.05);
  EXPECT_EQ(j["sources"]["quant_scheme"], "stated");
  EXPECT_EQ(j["sources"]["kv_cache_dtype"], "default");
  EXPECT_EQ(j["sources"]["num_calib_data"], "default");
  EXPECT_EQ(j["sources"]["eval_gap_threshold"], "stated");
  EXPECT_TRUE(j["open_questions"].is_array());
  EXPECT_TRUE(j["eval_limit"].is_null());
  EXPECT_EQ(j.begin().key(), "user_prompt");
  const auto missing = to_json(parse_intent("fp8 please", context()));
  EXPECT_EQ(missing["sources"]["model"], "missing");
  EXPECT_EQ(missing["open_questions"][0]["field"], "model");
}

TEST(Intent, Deterministic) {
  for (const auto& r : table()) {
    const std::string a = to_json(parse_intent(r.prompt, context())).dump();
    const std::string b = to_json(parse_intent(r.prompt, context())).dump();
    EXPECT_EQ(a, b) << r.prompt;
  }
}

}  // namespace
}  // namespace qloom::agent
