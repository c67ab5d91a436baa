// The agent's intent: what a `qloom run "<prompt>"` request asks for, parsed
// deterministically (no LLM, no network, no file reads) from the prompt.
//
// Contract (seed 000 §2, §4, §5.2, §5.4, §6 #8; seed 001 Step 2; mission §1):
//   - Every field carries its source: "stated" (the prompt says it),
//     "inferred" (derived from something the prompt says: a hardware hint, an
//     algorithm, a corrected typo), "default" (the prompt is silent; the
//     documented default of seed 001's decision table / seed 000 applies), or
//     "missing" (cannot be defaulted; an open question names it).
//   - What cannot be defaulted becomes an OpenQuestion (seed 000 §4: "do NOT
//     guess"): no model named, a model named without its org, conflicting or
//     unknown schemes, a scheme qloom does not implement yet, an impossible
//     group size or gap. The phases ask it (interactive) or write
//     checkpoint_aborted + the question to blocked.md.
//   - Notes record every resolution a reader should know about: conflicts
//     resolved by a correction ("fp8 ... actually int4"), typos corrected
//     ("int4_wo_12" -> int4_wo_128), AWQ's uint4 choice, ignored statements.
//   - Scheme names are Quark's exact --quant_scheme names
//     (qloom/quant/scheme_registry.h); quant_algo and kv_cache_dtype use the
//     values of --quant_algo / --kv_cache_dtype.
// Same prompt + same context -> identical Intent and identical to_json().
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace qloom::agent {

enum class Source { kStated, kDefault, kInferred, kMissing };
// "stated" | "default" | "inferred" | "missing".
const char* source_name(Source s);

template <class T>
struct Sourced {
  T value{};
  Source source = Source::kDefault;
};

struct OpenQuestion {
  std::string field;     // the Intent field it is about (wire name, e.g. "model")
  std::string question;  // one sentence, ready for [quark-checkpoint] / blocked.md
};

struct IntentContext {
  // The bundled demo model (models/stories260K-hf-bf16): "the bundled model",
  // "the demo model", its directory name. Empty: such a prompt gets a question.
  std::string demo_model_dir;
  // Local model directories the caller knows; a prompt naming one by its
  // directory name (case-insensitive) resolves to it.
  std::vector<std::string> local_model_dirs;
  // Where the default output directory goes (normally the workspace); empty:
  // the default output_dir is a bare relative name.
  std::string output_root;
};

struct Intent {
  std::string user_prompt;  // verbatim

  // Model: HF id ("Qwen/Qwen2.5-0.5B"), local path as written, "demo", a bare
  // name the prompt used without org (kind "name", with a question), or "".
  Sourced<std::string> model;
  std::string model_kind;  // "hub" | "local" | "demo" | "name" | ""
  std::string model_path;  // local directory to read (local / demo / context-known), "" for hub

  Sourced<std::string> quant_scheme;    // Quark --quant_scheme name ("" only with a question)
  // The prompt fixes the group size of a per-group 4-bit scheme ("g64",
  // "group size 128", an exact name such as "int4_wo_128"). When false the
  // group is a derived default (seed 000 §4): the plan takes the largest of
  // 128, 64, 32 that fits every layer to quantize instead of asking.
  bool group_size_stated = false;
  Sourced<std::string> kv_cache_dtype;  // "" or "fp8"
  Sourced<std::string> quant_algo;      // "" (RTN) | "gptq" | "awq" | "smoothquant"
  // Quark patterns the prompt keeps unquantized, added by the plan to the
  // model template's default exclusions ("keep lm_head in bf16" -> lm_head,
  // "don't quantize attention" -> *self_attn*).
  Sourced<std::vector<std::string>> exclude_layers;
  // Patterns the prompt wants quantized although a template may exclude them
  // ("quantize the lm_head too" -> lm_head).
  Sourced<std::vector<std::string>> quantize_layers;
  // "keep the layers that don't fit in bf16": layers the scheme's Quark
  // layout cannot hold (e.g. int4 with out_features % 8 != 0) stay in the
  // source dtype instead of being an open question (the plan excludes them
  // by pattern).
  Sourced<bool> exclude_unsupported;
  // --layer_quant_scheme PATTERN SCHEME overrides ("keep attention in fp8").
  Sourced<std::map<std::string, std::string>> layer_quant_scheme;

  Sourced<std::string> dataset;         // calibration data: pileval | c4 | wikitext2 | a file path
  Sourced<uint64_t> num_calib_data;
  Sourced<uint64_t> seq_len;
  // --model_export formats beyond hf_format the prompt asks for ("gguf",
  // "compressed-tensors"); the agent always writes hf_format first (it
  // validates and evaluates that checkpoint).
  Sourced<std::vector<std::string>> model_export;
  Sourced<std::string> output_dir;      // as written, or <output_root>/<model>-<scheme>

  Sourced<std::string> hardware;  // "mi300x" | "mi325x" | "mi350x" | "mi355x" | "h100" | "h200" | "cpu" | ... | ""
  // Seed 001 recommendation-table row the prompt selects: a stated priority
  // ("best accuracy", "as small as possible", "for llama.cpp") or, inferred,
  // the row of the hardware hint: "best_accuracy" | "smallest_model" |
  // "cpu_deployment" | "amd_mi300x" | "amd_mi355x" | "nvidia_h100" |
  // "nvidia_blackwell" | "gguf_export" | "".
  // It chooses quant_scheme (and quant_algo) only when no scheme is stated.
  Sourced<std::string> priority;

  // Accepted eval gap as a fraction ("accept a 5% gap" -> 0.05, "ok to lose
  // up to 0.05 accuracy" -> 0.05); nullopt when the prompt states none (the
  // eval phase then resolves caller -> eval_gap_threshold.txt -> 0.03).
  Sourced<std::optional<double>> eval_gap_threshold;
  // "relative" (a percentage / fraction of the score: mission §7's
  // relative_gap) | "absolute" (stated as accuracy points; seed 000 §5.4
  // still writes the number as-is) | "".
  std::string eval_gap_kind;

  Sourced<std::string> metric_name;   // "gsm8k" | "ppl" | "kld" | "mmlu" | "hellaswag" | ...
  Sourced<std::string> eval_dataset;  // "gsm8k" | "wikitext2" | "tinystories" | "mmlu" | a file path
  bool metric_higher_is_better = true;
  Sourced<bool> eval_requested;       // false: "skip eval"
  Sourced<std::optional<uint64_t>> eval_limit;  // "evaluate on 200 samples"

  // Decision-table reasons (seed 001 Step 2: decision | value | reason), keyed
  // by field wire name.
  std::map<std::string, std::string> reasons;
  std::vector<OpenQuestion> open_questions;
  std::vector<std::string> notes;

  bool has_question(std::string_view field) const;
};

// Parses `prompt`. Never throws for any prompt text (unknowns become open
// questions); throws qloom::Error(kInternal) only on a bug.
Intent parse_intent(std::string_view prompt, const IntentContext& ctx);

// A change stated in plain words at a checkpoint ("use awq", "calibrate on
// 256 samples", "keep attention in bf16"): the intent of the original prompt
// followed by the change as a correction, so the change wins every conflict.
Intent apply_intent_change(const Intent& base, std::string_view change, const IntentContext& ctx);

// JSON for session_context.json: every field by its wire name, "sources"
// (field -> source name), "reasons", "open_questions" [{field, question}],
// "notes". Keys in a fixed order.
nlohmann::ordered_json to_json(const Intent& intent);

}  // namespace qloom::agent
