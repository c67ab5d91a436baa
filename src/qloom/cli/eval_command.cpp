// qloom eval <model_dir> [--source DIR] --task ppl|kld|gsm8k|hellaswag|arc_easy|arc_challenge|piqa|
//            winogrande|mmlu --dataset PATH|wikitext2|gsm8k|hellaswag [--num_fewshot N
//            --fewshot_dataset FILE]
//            [--seq_len N] [--protocol quark|llamacpp] [--limit N] [--time_budget S]
//            [--max_gen_toks N] [--json out.json] [--log_samples out.jsonl] [--threads N]
//            [--server URL [--api_key KEY] [--model NAME] [--concurrency N] [--max_retries N]]
//            [--source_server URL]
#include <unistd.h>

#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "qloom/cli/commands.h"
#include "qloom/cli/flags.h"
#include "qloom/cli/model_spec.h"
#include "qloom/cli/runtime_flags.h"
#include "qloom/core/error.h"
#include "qloom/eval/eval_report.h"
#include "qloom/eval/mc_tasks.h"
#include "qloom/eval/run_eval.h"

namespace qloom::cli {

void register_eval(CLI::App& app, CommandFn& run) {
  struct Options {
    eval::EvalOptions eval;
    int64_t limit = 0;
    std::string json;
    std::string log_samples;
    RuntimeFlags runtime;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "eval", "Evaluate a model: perplexity (Quark or llama.cpp protocol), KL divergence "
              "against its source, GSM8K (lm-eval's 5-shot task), or a multiple-choice task "
              "scored by log-likelihood as lm-eval scores it (acc, acc_norm)");
  sub->add_option("model_dir", o->eval.model_dir, "the model to evaluate (the quantized one for kld)")
      ->required();
  sub->add_option(flag_names("source"), o->eval.source_dir,
                  "kld: the source (reference) model; multiple choice: also score it on the same "
                  "documents and report the paired difference");
  sub->add_option(flag_names("task"), o->eval.task,
                  "ppl, kld, gsm8k, hellaswag, arc_easy, arc_challenge, piqa, winogrande or mmlu")
      ->required()
      ->check(CLI::IsMember({"ppl", "kld", "gsm8k", "hellaswag", "arc_easy", "arc_challenge", "piqa",
                             "winogrande", "mmlu"}));
  sub->add_option(flag_names("dataset"), o->eval.dataset,
                  "wikitext2, tinystories, gsm8k, hellaswag (bundled first 200), or a file (.txt: one "
                  "document; .jsonl: gsm8k questions or the multiple-choice task's HF rows; "
                  "hellaswag also reads llama.cpp's hellaswag text file); default wikitext2 "
                  "(ppl/kld), gsm8k, hellaswag");
  sub->add_option(flag_names("seq_len"), o->eval.seq_len,
                  "window length in tokens (default: quark min(2048, max_position_embeddings), "
                  "llamacpp 512)");
  sub->add_option(flag_names("protocol"), o->eval.protocol, "ppl/kld windowing: quark or llamacpp")
      ->check(CLI::IsMember({"quark", "llamacpp"}));
  sub->add_option(flag_names("limit"), o->limit,
                  "only the first N windows (ppl/kld), questions (gsm8k) or documents");
  sub->add_option(flag_names("time_budget"), o->eval.time_budget,
                  "seconds: time the first window/question and limit the work to fit");
  sub->add_option(flag_names("max_gen_toks"), o->eval.max_gen_toks,
                  "gsm8k: most tokens generated per answer (default 256)");
  sub->add_option(flag_names("num_fewshot"), o->eval.num_fewshot,
                  "multiple choice: few-shot examples per document (default 0, lm-eval's default "
                  "for these tasks)");
  sub->add_option(flag_names("fewshot_dataset"), o->eval.fewshot_dataset,
                  "multiple choice: the file the few-shot examples are drawn from (lm-eval: the "
                  "train split; mmlu: dev, first n of the subject)");
  sub->add_option(flag_names("server"), o->eval.server,
                  "score through this OpenAI-compatible server (qloom serve, vLLM, SGLang) instead of the "
                  "engine; model_dir then only supplies the tokenizer (gsm8k and multiple choice)");
  sub->add_option(flag_names("source_server"), o->eval.source_server,
                  "multiple choice with --source: score the source through this server");
  sub->add_option(flag_names("api_key"), o->eval.api_key, "--server: sent as 'Authorization: Bearer KEY'");
  sub->add_option(flag_names("model"), o->eval.served_model,
                  "--server: the served model's name (default: the first GET /v1/models lists)");
  sub->add_option(flag_names("concurrency"), o->eval.concurrency,
                  "--server: documents / questions in flight (default 4)")
      ->check(CLI::Range(1u, 256u));
  sub->add_option(flag_names("max_retries"), o->eval.max_retries,
                  "--server: retries of a request that failed to connect or got 429 / 5xx (default 3)")
      ->check(CLI::Range(0, 20));
  sub->add_option(flag_names("log_samples"), o->log_samples,
                  "multiple choice: write every document's option log-likelihoods here (JSON lines)");
  sub->add_option(flag_names("json"), o->json, "also write the results as one JSON object here");
  sub->add_option(flag_names("threads"), o->eval.threads, "compute threads (0 = all cores)");
  add_runtime_flags(sub, o->runtime, "simulate");
  sub->callback([o, sub, &run] {
    run = [o, sub] {
      eval::EvalOptions opts = o->eval;
      opts.model_dir = resolve_model_arg(opts.model_dir, io::HubFetch::kModel);
      opts.source_dir = resolve_model_arg(opts.source_dir, io::HubFetch::kModel);
      if (sub->count("--limit") > 0) opts.limit = o->limit;
      opts.runtime = o->runtime.parsed_runtime();
      opts.compute = o->runtime.parsed_compute();
      if (!o->log_samples.empty() && eval::find_mc_task(opts.task) == nullptr)
        throw Error(ErrorKind::kUsage, "", "--log_samples", "--log_samples is written for the multiple-choice tasks only",
                    "drop --log_samples, or evaluate hellaswag, arc_easy, arc_challenge, piqa, winogrande or mmlu");
      opts.log = &std::cerr;
      opts.log_is_tty = ::isatty(STDERR_FILENO) == 1;
      const eval::EvalReport r = eval::run_eval(opts);
      if (r.task == "ppl")
        std::cout << eval::ppl_line(r.ppl, r.ppl_stderr) << "\n\n";
      else if (r.task == "kld")
        std::cout << eval::kld_block(r.kld) << "\n";
      std::cout << eval::render_table(r);
      if (!o->json.empty()) eval::write_report_json(r, o->json);
      if (!o->log_samples.empty()) eval::write_mc_samples(r, o->log_samples);
      return 0;
    };
  });
}

}  // namespace qloom::cli
