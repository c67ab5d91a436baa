#include "qloom/eval/run_eval.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "qloom/core/error.h"
#include "qloom/engine/tokenizer.h"
#include "qloom/eval/budget.h"
#include "qloom/eval/checkpoint_runtime.h"
#include "qloom/eval/datasets.h"
#include "qloom/eval/gsm8k.h"
#include "qloom/eval/kld.h"
#include "qloom/eval/perplexity.h"
#include "qloom/eval/progress.h"

namespace qloom::eval {
namespace {

using Clock = std::chrono::steady_clock;

void note(const EvalOptions& o, EvalReport& r, const std::string& msg) {
  r.notes.push_back(msg);
  if (o.log != nullptr) *o.log << "qloom eval: " << msg << "\n" << std::flush;
}

void enter(const EvalOptions& o, EvalStage stage) {
  if (o.stage != nullptr) *o.stage = stage;
}

engine::Tokenizer load_tokenizer(const EvalOptions& o) {
  if (!o.tokenizer_dir.empty()) return engine::Tokenizer::load(o.tokenizer_dir);
  try {
    return engine::Tokenizer::load(o.model_dir);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kNotFound || o.source_dir.empty()) throw;
    return engine::Tokenizer::load(o.source_dir);
  }
}

// Budget-aware per-unit callback shared by all tasks.
struct UnitTracker {
  const EvalOptions& o;
  EvalReport& report;
  Progress& progress;
  std::string unit;          // singular
  int64_t total;             // after --limit
  int64_t tokens_per_unit;   // for the tokens/s figure (0: omit)
  int64_t planned;
  Clock::time_point start = Clock::now();

  bool operator()(int64_t done) {
    if (done == 1 && o.time_budget > 0) {
      const double first = std::chrono::duration<double>(Clock::now() - start).count();
      const BudgetPlan plan = plan_budget(total, first, tokens_per_unit, o.time_budget, unit);
      planned = plan.units;
      note(o, report, plan.message);
      progress.set_total(planned);
    }
    progress.update(done);
    return done < planned;
  }
};

void apply_limit(const EvalOptions& o, EvalReport& r, int64_t& count, const std::string& unit) {
  if (o.limit && *o.limit < count) {
    note(o, r, "--limit " + std::to_string(*o.limit) + ": evaluating the first " +
                   std::to_string(*o.limit) + " of " + std::to_string(count) + " " + unit + "s");
    count = *o.limit;
  }
}

void run_text_task(const EvalOptions& o, EvalReport& r) {
  const Protocol protocol = parse_protocol(o.protocol);
  r.protocol = protocol_name(protocol);
  if (r.task == "kld" && o.source_dir.empty())
    throw Error(ErrorKind::kUsage, "", "--source", "the kld task needs the source model",
                "pass --source <model_dir> (the unquantized model)");
  const TextDataset ds = load_text_dataset(r.dataset);
  if (o.log != nullptr) *o.log << "qloom eval: data set " << ds.name << " read from " << ds.file << "\n" << std::flush;

  engine::LoadOptions lo;
  lo.threads = o.threads;
  enter(o, EvalStage::kLoadModel);
  LoadedModel quant = load_for_eval(o.model_dir, lo);
  enter(o, EvalStage::kPrepare);
  const engine::Tokenizer tok = load_tokenizer(o);
  const std::vector<int32_t> doc = tok.encode(ds.text, true);

  r.seq_len = o.seq_len > 0 ? o.seq_len
                            : default_seq_len(protocol, quant.model->config().max_position_embeddings);
  std::vector<Window> windows = make_windows(protocol, int64_t(doc.size()), r.seq_len, tok.bos_id());
  r.windows_total = int64_t(windows.size());
  int64_t count = r.windows_total;
  apply_limit(o, r, count, "window");
  windows.resize(size_t(count));

  Progress progress(o.log, o.log_is_tty, r.task, "windows", count);
  UnitTracker track{o, r, progress, "window", count, r.seq_len, count};
  if (r.task == "ppl") {
    enter(o, EvalStage::kScore);
    PplResult res =
        run_perplexity(*quant.model, &quant.runtime.hooks, doc, windows, std::ref(track));
    progress.finish();
    r.windows = res.windows;
    r.tokens_scored = res.tokens_scored;
    r.ppl = res.nll.ppl();
    r.ppl_stderr = res.nll.ppl_stderr();
    r.samples.token_nll = std::move(res.token_nll);
    return;
  }
  enter(o, EvalStage::kLoadSource);
  LoadedModel source = load_for_eval(o.source_dir, lo);
  enter(o, EvalStage::kScore);
  track.start = Clock::now();
  KldResult res = run_kld(*source.model, &source.runtime.hooks, *quant.model,
                          &quant.runtime.hooks, doc, windows, std::ref(track));
  progress.finish();
  r.windows = res.windows;
  r.kld = summarize(res.stats);
  r.tokens_scored = r.kld.count;
  r.samples.token_nll = std::move(res.stats.nll_quantized_tokens);
  r.samples.source_token_nll = std::move(res.stats.nll_source_tokens);
}

void run_gsm8k_task(const EvalOptions& o, EvalReport& r) {
  std::vector<Gsm8kDoc> test;
  if (r.dataset == "gsm8k") {
    test = load_gsm8k_jsonl(bundled_file("gsm8k/test.jsonl"));
  } else if (r.dataset.size() > 6 && r.dataset.ends_with(".jsonl")) {
    test = load_gsm8k_jsonl(r.dataset);
  } else {
    throw Error(ErrorKind::kUsage, "", "--dataset",
                "the gsm8k task takes --dataset gsm8k or a .jsonl file of {question, answer}",
                "known data sets: wikitext2, tinystories (text), gsm8k");
  }
  const std::vector<Gsm8kDoc> train = load_gsm8k_jsonl(bundled_file("gsm8k/train.jsonl"));
  engine::LoadOptions lo;
  lo.threads = o.threads;
  enter(o, EvalStage::kLoadModel);
  LoadedModel model = load_for_eval(o.model_dir, lo);
  enter(o, EvalStage::kPrepare);
  const engine::Tokenizer tok = load_tokenizer(o);

  r.n_total = int64_t(test.size());
  int64_t count = r.n_total;
  apply_limit(o, r, count, "question");
  Progress progress(o.log, o.log_is_tty, r.task, "questions", count);
  UnitTracker track{o, r, progress, "question", count, 0, count};
  Gsm8kConfig cfg;
  cfg.max_gen_toks = o.max_gen_toks;
  enter(o, EvalStage::kScore);
  const Gsm8kResult res = run_gsm8k(*model.model, &model.runtime.hooks, tok, test, train,
                                    size_t(count), cfg, std::ref(track));
  progress.finish();
  r.n = res.n();
  r.accuracy_strict = res.accuracy_strict();
  r.accuracy_flexible = res.accuracy_flexible();
  r.samples.strict_correct.reserve(res.items.size());
  r.samples.flexible_correct.reserve(res.items.size());
  for (const Gsm8kItem& item : res.items) {
    r.samples.strict_correct.push_back(item.strict_ok ? 1 : 0);
    r.samples.flexible_correct.push_back(item.flexible_ok ? 1 : 0);
  }
}

}  // namespace

EvalReport run_eval(const EvalOptions& o) {
  const auto t0 = Clock::now();
  enter(o, EvalStage::kPrepare);
  EvalReport r;
  r.task = o.task;
  r.model = o.model_dir;
  r.source = o.source_dir;
  r.limit = o.limit;
  if (o.task != "ppl" && o.task != "kld" && o.task != "gsm8k")
    throw Error(ErrorKind::kUsage, "", "--task", "unknown task '" + o.task + "'",
                "use ppl, kld or gsm8k");
  if (o.limit && *o.limit < 1)
    throw Error(ErrorKind::kUsage, "", "--limit", "--limit must be at least 1");
  if (o.max_gen_toks < 1)
    throw Error(ErrorKind::kUsage, "", "--max_gen_toks", "--max_gen_toks must be at least 1");
  r.dataset = !o.dataset.empty() ? o.dataset : (o.task == "gsm8k" ? "gsm8k" : "wikitext2");
  if (o.task == "gsm8k")
    run_gsm8k_task(o, r);
  else
    run_text_task(o, r);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

}  // namespace qloom::eval
