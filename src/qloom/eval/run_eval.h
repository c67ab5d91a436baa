// run_eval: everything `qloom eval` does, as one library call. Loads the
// model(s) with load_for_eval (so each is evaluated as its checkpoint
// computes), the tokenizer (the model directory's; for kld the quantized
// directory's, else the source's), the data set, applies --limit and
// --time_budget, drives the progress line, and returns the report, with the
// per-sample scores (EvalReport::samples) for pairing two runs.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "qloom/eval/checkpoint_runtime.h"
#include "qloom/eval/eval_report.h"

namespace qloom::eval {

// Where run_eval is, for a caller that catches its exceptions and must tell a
// model that does not load from a data set that cannot be read.
enum class EvalStage {
  kPrepare,     // options, data set, tokenizer, windows / prompts
  kLoadModel,   // load_for_eval(model_dir)
  kLoadSource,  // kld: load_for_eval(source_dir)
  kScore,       // forward passes and scoring
};

struct EvalOptions {
  std::string model_dir;
  std::string source_dir;     // kld: the reference model (required); multiple choice: paired with it (optional)
  std::string task;           // "ppl", "kld", "gsm8k", or a multiple-choice task (mc_tasks.h)
  // empty: wikitext2 (ppl/kld), gsm8k, or the task's bundled subset
  // (hellaswag: the first 200 validation tasks); a file path otherwise.
  std::string dataset;
  std::string protocol = "quark";
  int64_t seq_len = 0;        // 0: the protocol's default for the model
  std::optional<int64_t> limit;   // windows (ppl/kld), questions (gsm8k) or documents
  double time_budget = 0;     // seconds; <= 0: none
  unsigned threads = 0;       // 0: all cores
  // How the evaluated model (not the --source reference, always simulate /
  // f32) computes: simulate keeps Quark's arithmetic (the default; eval's
  // numbers mean what Quark's mean), native runs its quantized linears on
  // the engine's native kernels (checkpoint_runtime.h); compute kBF16 runs
  // its unquantized linears with bf16 activations (engine LoadOptions).
  exporter::Runtime runtime = exporter::Runtime::kSimulate;
  engine::LoadOptions::Compute compute = engine::LoadOptions::Compute::kF32;
  int64_t max_gen_toks = 256; // gsm8k
  int num_fewshot = 0;        // multiple choice: few-shot examples per document
  std::string fewshot_dataset;  // multiple choice: the few-shot pool (a file of the task's format)
  std::ostream* log = nullptr;  // progress and notes (stderr in the CLI)
  bool log_is_tty = false;
  // The tokenizer's directory; empty: model_dir's, or source_dir's when
  // model_dir has none. Two runs to be paired pass the same one, so they
  // score exactly the same tokens.
  std::string tokenizer_dir;
  // Tier 3 (openai_client.h): score `model_dir`'s task through this
  // OpenAI-compatible server instead of the engine; model_dir (or
  // tokenizer_dir) then only supplies the tokenizer. gsm8k and the
  // multiple-choice tasks; ppl / kld need the engine.
  std::string server;
  std::string source_server;  // multiple choice with --source: the source's server
  std::string api_key;
  std::string served_model;   // empty: the first model the server lists
  unsigned concurrency = 4;   // documents / questions in flight
  int max_retries = 3;
  // When set, updated as run_eval moves from stage to stage (it still holds
  // the failing stage when an exception leaves run_eval).
  EvalStage* stage = nullptr;
};

// Throws qloom::Error: kUsage for bad options (unknown task/protocol, missing
// --source for kld, non-positive --limit), kNotFound for missing data sets or
// model files, kInvalidInput for unusable data.
EvalReport run_eval(const EvalOptions& options);

}  // namespace qloom::eval
