#include "qloom/eval/run_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "qloom/core/error.h"
#include "qloom/text/tokenizer.h"
#include "qloom/eval/budget.h"
#include "qloom/eval/checkpoint_runtime.h"
#include "qloom/eval/datasets.h"
#include "qloom/eval/gsm8k.h"
#include "qloom/eval/kld.h"
#include "qloom/eval/multiple_choice.h"
#include "qloom/eval/openai_client.h"
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

text::Tokenizer load_tokenizer(const EvalOptions& o) {
  if (!o.tokenizer_dir.empty()) return text::Tokenizer::load(o.tokenizer_dir);
  try {
    return text::Tokenizer::load(o.model_dir);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kNotFound || o.source_dir.empty()) throw;
    return text::Tokenizer::load(o.source_dir);
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

// Loads `dir`: the evaluated model (o.model_dir) with o.runtime / o.compute
// (noted in the report when not the defaults), the --source reference as
// Quark computes it.
LoadedModel load_evaluated(const EvalOptions& o, EvalReport& r, const std::string& dir) {
  engine::LoadOptions lo;
  lo.threads = o.threads;
  if (dir != o.model_dir) return load_for_eval(dir, lo);
  lo.compute = o.compute;
  LoadedModel m = load_for_eval(dir, lo, o.runtime);
  r.runtime = exporter::runtime_name(o.runtime);
  if (o.compute == engine::LoadOptions::Compute::kBF16) r.runtime += "+bf16";
  if (r.runtime != "simulate" && r.notes.end() == std::find(r.notes.begin(), r.notes.end(), m.runtime.description))
    note(o, r, "runtime " + r.runtime + ": " + m.runtime.description);
  return m;
}

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
  LoadedModel quant = load_evaluated(o, r, o.model_dir);
  enter(o, EvalStage::kPrepare);
  const text::Tokenizer tok = load_tokenizer(o);
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

ServerOptions server_options(const EvalOptions& o, const std::string& url) {
  ServerOptions so;
  so.url = url;
  so.api_key = o.api_key;
  so.model = o.served_model;
  so.concurrency = o.concurrency;
  so.max_retries = o.max_retries;
  return so;
}

void note_server(const EvalOptions& o, EvalReport& r, const ServerInfo& info, const std::string& url) {
  r.backend = info.backend;
  r.server = url;
  r.served_model = info.model;
  note(o, r, "scored through " + url + " (model '" + info.model + "', " + info.backend +
                 "); the tokenizer is the local model directory's");
}

void record_gsm8k(EvalReport& r, const Gsm8kResult& res) {
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

std::vector<Gsm8kDoc> gsm8k_questions(const EvalReport& r) {
  if (r.dataset == "gsm8k") return load_gsm8k_jsonl(bundled_file("gsm8k/test.jsonl"));
  if (r.dataset.size() > 6 && r.dataset.ends_with(".jsonl")) return load_gsm8k_jsonl(r.dataset);
  throw Error(ErrorKind::kUsage, "", "--dataset",
              "the gsm8k task takes --dataset gsm8k or a .jsonl file of {question, answer}",
              "known data sets: wikitext2, tinystories (text), gsm8k");
}

// In-process (the engine's greedy decoding) or over --server (lm-eval's API
// models left-truncate to their max_length, 2048 by default, as well).
void run_gsm8k_task(const EvalOptions& o, EvalReport& r) {
  const std::vector<Gsm8kDoc> test = gsm8k_questions(r);
  const std::vector<Gsm8kDoc> train = load_gsm8k_jsonl(bundled_file("gsm8k/train.jsonl"));
  LoadedModel model;
  std::unique_ptr<OpenAiClient> client;
  if (o.server.empty()) {
    enter(o, EvalStage::kLoadModel);
    model = load_evaluated(o, r, o.model_dir);
  }
  enter(o, EvalStage::kPrepare);
  const text::Tokenizer tok = load_tokenizer(o);
  if (!o.server.empty()) {
    client = std::make_unique<OpenAiClient>(server_options(o, o.server));
    note_server(o, r, client->probe(), o.server);
  }
  r.n_total = int64_t(test.size());
  int64_t count = r.n_total;
  apply_limit(o, r, count, "question");
  Progress progress(o.log, o.log_is_tty, r.task, "questions", count);
  UnitTracker track{o, r, progress, "question", count, 0, count};
  Gsm8kConfig cfg;
  cfg.max_gen_toks = o.max_gen_toks;
  enter(o, EvalStage::kScore);
  Gsm8kResult res;
  if (client) {
    const Generator gen = [&client](const std::vector<int32_t>& ids, const GenerateOptions& g) {
      return client->generate(ids, g.max_new, g.stops);
    };
    res = run_gsm8k(gen, tok, test, train, size_t(count), cfg, client->options().max_length, {}, std::ref(track));
  } else {
    res = run_gsm8k(*model.model, &model.runtime.hooks, tok, test, train, size_t(count), cfg, std::ref(track));
  }
  progress.finish();
  record_gsm8k(r, res);
}

std::filesystem::path mc_dataset_file(const EvalOptions& o, EvalReport& r, const McTaskInfo& task) {
  if (!r.dataset.empty() && r.dataset != task.name) return r.dataset;
  if (task.name != "hellaswag")
    throw Error(ErrorKind::kUsage, "", "--dataset",
                "qloom bundles no " + task.name + " documents: pass --dataset FILE (" + task.formats + ")",
                "lm-eval's data set for it can be saved with datasets' to_json() as such a file");
  r.dataset = task.name;
  note(o, r, "bundled hellaswag subset: the first 200 of the 10042 validation tasks (llama.cpp's text layout); "
             "pass --dataset FILE for the full set");
  return bundled_file("hellaswag/hellaswag_val_first200.txt");
}

// lm-eval's HFLM.max_length: the config's max_position_embeddings, else 2048.
int64_t mc_max_length(const engine::Model& m) {
  const int64_t p = m.config().max_position_embeddings;
  return p > 0 ? p : 2048;
}

// Mean of (a_i - b_i) and sd / sqrt(n) of the differences.
MetricValue paired_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  MetricValue m;
  const size_t n = std::min(a.size(), b.size());
  if (n == 0) return m;
  double sum = 0, ss = 0;
  for (size_t i = 0; i < n; ++i) sum += double(a[i]) - double(b[i]);
  m.value = sum / double(n);
  for (size_t i = 0; i < n; ++i) {
    const double d = double(a[i]) - double(b[i]) - m.value;
    ss += d * d;
  }
  if (n > 1) m.stderr_ = std::sqrt(ss / double(n - 1)) / std::sqrt(double(n));
  return m;
}

// Scores docs[0..count) with the model in `dir`, or through `server` when
// one is given (then `dir` only named the tokenizer, already loaded).
McResult score_mc_model(const EvalOptions& o, EvalReport& r, const McTaskInfo& task, const std::string& dir,
                        const text::Tokenizer& tok, const std::vector<McExample>& docs,
                        const std::vector<std::vector<const McExample*>>& fewshot, int64_t count,
                        const std::string& server = {}) {
  std::unique_ptr<OpenAiClient> client;
  LoadedModel model;
  OptionScorer scorer;
  unsigned parallel = 1;
  if (!server.empty()) {
    client = std::make_unique<OpenAiClient>(server_options(o, server));
    const ServerInfo info = client->probe();
    if (server == o.server) note_server(o, r, info, server);
    scorer = server_scorer(*client);
    parallel = o.concurrency;
  } else {
    model = load_evaluated(o, r, dir);
    scorer = engine_scorer(*model.model, &model.runtime.hooks, mc_max_length(*model.model));
  }
  Progress progress(o.log, o.log_is_tty, r.task, "documents", count);
  UnitTracker track{o, r, progress, "document", count, 0, count};
  enter(o, EvalStage::kScore);
  McResult res = run_multiple_choice(scorer, tok, task, docs, fewshot, size_t(count), std::ref(track), parallel);
  progress.finish();
  return res;
}

void add_source_pairing(const EvalOptions& o, EvalReport& r, const McTaskInfo& task, const text::Tokenizer& tok,
                        const std::vector<McExample>& docs,
                        const std::vector<std::vector<const McExample*>>& fewshot) {
  if (o.log != nullptr) *o.log << "qloom eval: source model " << o.source_dir << " on the same " << r.n << " documents\n";
  EvalOptions so = o;
  so.time_budget = 0;  // the same documents exactly
  enter(o, EvalStage::kLoadSource);
  const McResult src = score_mc_model(so, r, task, o.source_dir, tok, docs, fewshot, r.n, o.source_server);
  const std::vector<uint8_t> sa = src.correct(false), sn = src.correct(true);
  r.paired = true;
  r.source_acc = mean_and_stderr(sa).value;
  const MetricValue da = paired_difference(r.samples.acc_correct, sa);
  r.delta_acc = da.value;
  r.delta_acc_stderr = da.stderr_;
  if (task.acc_norm) {
    r.source_acc_norm = mean_and_stderr(sn).value;
    const MetricValue dn = paired_difference(r.samples.acc_norm_correct, sn);
    r.delta_acc_norm = dn.value;
    r.delta_acc_norm_stderr = dn.stderr_;
  }
}

void run_mc_task(const EvalOptions& o, EvalReport& r, const McTaskInfo& task) {
  if (o.num_fewshot < 0) throw Error(ErrorKind::kUsage, "", "--num_fewshot", "--num_fewshot must be 0 or more");
  if (o.num_fewshot > 0 && o.fewshot_dataset.empty())
    throw Error(ErrorKind::kUsage, "", "--fewshot_dataset",
                "--num_fewshot " + std::to_string(o.num_fewshot) + " needs the few-shot pool",
                "pass --fewshot_dataset FILE (lm-eval draws from the task's train split; mmlu: dev)");
  const std::filesystem::path file = mc_dataset_file(o, r, task);
  const std::vector<McExample> docs = load_mc_examples(task, file);
  std::vector<McExample> pool;
  if (o.num_fewshot > 0) pool = load_mc_examples(task, o.fewshot_dataset);
  if (o.log != nullptr) *o.log << "qloom eval: " << docs.size() << " " << task.name << " documents read from " << file.string() << "\n" << std::flush;
  const text::Tokenizer tok = load_tokenizer(o);
  r.n_total = int64_t(docs.size());
  int64_t count = r.n_total;
  apply_limit(o, r, count, "document");
  r.num_fewshot = o.num_fewshot;
  const auto fewshot = choose_fewshot(task, docs, size_t(count), pool, o.num_fewshot);
  enter(o, EvalStage::kLoadModel);
  const McResult res = score_mc_model(o, r, task, o.model_dir, tok, docs, fewshot, count, o.server);
  r.n = res.n();
  r.samples.acc_correct = res.correct(false);
  r.samples.acc_norm_correct = res.correct(true);
  r.samples.mc_items = res.items;
  const MetricValue acc = mean_and_stderr(r.samples.acc_correct);
  r.acc = acc.value;
  r.acc_stderr = acc.stderr_;
  r.has_acc_norm = task.acc_norm;
  if (task.acc_norm) {
    const MetricValue an = mean_and_stderr(r.samples.acc_norm_correct);
    r.acc_norm = an.value;
    r.acc_norm_stderr = an.stderr_;
  }
  if (!o.source_dir.empty()) add_source_pairing(o, r, task, tok, docs, fewshot);
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
  const McTaskInfo* mc = find_mc_task(o.task);
  if ((!o.server.empty() || !o.source_server.empty()) && (o.task == "ppl" || o.task == "kld"))
    throw Error(ErrorKind::kUsage, "", "--server",
                "the " + o.task + " task needs every position's full distribution, which an OpenAI-compatible "
                                  "server does not return",
                "evaluate ppl / kld in-process (drop --server), or use gsm8k or a multiple-choice task");
  if (!o.source_server.empty() && o.source_dir.empty())
    throw Error(ErrorKind::kUsage, "", "--source_server", "--source_server needs --source (the source's tokenizer)");
  if (o.task != "ppl" && o.task != "kld" && o.task != "gsm8k" && mc == nullptr)
    throw Error(ErrorKind::kUsage, "", "--task", "unknown task '" + o.task + "'",
                "use ppl, kld, gsm8k, hellaswag, arc_easy, arc_challenge, piqa, winogrande or mmlu");
  if (o.limit && *o.limit < 1)
    throw Error(ErrorKind::kUsage, "", "--limit", "--limit must be at least 1");
  if (o.max_gen_toks < 1)
    throw Error(ErrorKind::kUsage, "", "--max_gen_toks", "--max_gen_toks must be at least 1");
  if (mc != nullptr) {
    r.dataset = o.dataset;
    run_mc_task(o, r, *mc);
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return r;
  }
  r.dataset = !o.dataset.empty() ? o.dataset : (o.task == "gsm8k" ? "gsm8k" : "wikitext2");
  if (o.task == "gsm8k")
    run_gsm8k_task(o, r);
  else
    run_text_task(o, r);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

}  // namespace qloom::eval
