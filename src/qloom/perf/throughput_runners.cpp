// The two workloads of throughput.h: qloom's engine in-process, and an
// OpenAI-compatible server over HTTP.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <span>
#include <thread>

#include "qloom/core/error.h"
#include "qloom/eval/openai_client.h"
#include "qloom/io/hub_http.h"
#include "qloom/io/model_dir.h"
#include "qloom/perf/throughput.h"

namespace qloom::perf {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

constexpr int64_t kServeDecodeBatch = 64;  // serve::Scheduler's pass size (below the GEMM row threshold)
constexpr int kMaxRetries = 3;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

int32_t first_argmax(const std::vector<float>& row) {
  size_t best = 0;
  for (size_t i = 1; i < row.size(); ++i)
    if (row[i] > row[best]) best = i;
  return int32_t(best);
}

std::optional<double> median_or_none(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  return median(std::move(v));
}

RunSample sample_of(double seconds, int64_t out_tokens, int64_t prompt_tokens) {
  if (seconds <= 0 || out_tokens <= 0)
    throw Error(ErrorKind::kInternal, "", "run", "a run produced no output tokens or took no time");
  RunSample r;
  r.seconds = seconds;
  r.output_tokens = out_tokens;
  r.prompt_tokens = prompt_tokens;
  r.tokens_per_s = double(out_tokens) / seconds;
  r.total_tokens_per_s = double(out_tokens + prompt_tokens) / seconds;
  return r;
}

// Prompts of the spec, from the model directory's vocabulary.
std::vector<std::vector<int32_t>> prompts_for(const fs::path& dir, const model::ModelConfig& cfg,
                                              const ThroughputSpec& spec) {
  const text::Tokenizer tok = text::Tokenizer::load(dir);
  return random_prompts(prompt_token_pool(tok, cfg), num_prompts(spec), spec.isl, spec.seed);
}

// ---- in-process ----

class EngineWorkload final : public Workload {
 public:
  EngineWorkload(const fs::path& dir, const ThroughputSpec& spec, const RunnerSettings& settings,
                 std::shared_ptr<exporter::LoadedModel> lm);
  RunSample run() override;
  bool in_process() const override { return true; }
  bool rows_independent() const override { return lm_->runtime.rows_independent; }
  std::string runtime() const override { return exporter::runtime_name(lm_->runtime.runtime); }
  std::string backend() const override { return "qloom"; }
  std::string note() const override;

 private:
  struct Slot {
    int64_t prompt = -1;  // -1: free
    int64_t produced = 0;
    int32_t pending = 0;
    std::vector<float> logits;
    Clock::time_point sent, first;
  };
  void admit(std::vector<Slot>& slots, int64_t& next, int64_t& prompt_tokens);
  void decode(std::vector<Slot>& slots, const std::vector<size_t>& ready);

  std::shared_ptr<exporter::LoadedModel> lm_;
  std::vector<std::unique_ptr<engine::KvCache>> caches_;
};

EngineWorkload::EngineWorkload(const fs::path& dir, const ThroughputSpec& spec, const RunnerSettings& settings,
                               std::shared_ptr<exporter::LoadedModel> lm)
    : lm_(std::move(lm)) {
  const model::ModelConfig& cfg = lm_->model->config();
  check_spec(spec, cfg.max_position_embeddings);
  model_dir_ = fs::absolute(dir).lexically_normal().string();
  spec_ = spec;
  settings_.threads = lm_->model->pool().size();
  const int64_t want = settings.decode_batch > 0 ? settings.decode_batch : kServeDecodeBatch;
  settings_.decode_batch = rows_independent() ? std::min(want, spec.concurrency) : 1;
  prompts_ = prompts_for(dir, cfg, spec);
  for (int64_t i = 0; i < spec.concurrency; ++i) caches_.push_back(lm_->model->new_cache(spec.isl + spec.osl));
}

std::string EngineWorkload::note() const {
  const bool native = lm_->runtime.runtime == exporter::Runtime::kNative;
  std::string n = "in-process qloom engine, runtime " + runtime() + " (" + lm_->runtime.description + "): " +
                  (native ? "quantized linears on the native int8 / fp8 / 4-bit kernels, unquantized ones with "
                            "bf16 compute, as served; "
                          : "a Quark checkpoint's weights are dequantized to fp32 and its activation / KV-cache "
                            "quantization simulated, so a quantized model shows no low-precision speed-up here; ") +
                  std::to_string(settings_.threads) + " threads, decode passes of up to " +
                  std::to_string(settings_.decode_batch) + " sequences";
  if (!rows_independent()) n += " (one at a time: the checkpoint's dynamic per-tensor scales mix rows)";
  return n;
}

void EngineWorkload::admit(std::vector<Slot>& slots, int64_t& next, int64_t& prompt_tokens) {
  const Clock::time_point now = Clock::now();
  for (size_t i = 0; i < slots.size() && next < int64_t(prompts_.size()); ++i) {
    Slot& s = slots[i];
    if (s.prompt >= 0) continue;
    s.prompt = next++;
    s.produced = 0;
    s.sent = now;
    caches_[i]->clear();
    const std::vector<int32_t>& p = prompts_[size_t(s.prompt)];
    s.logits = lm_->model->forward(p, *caches_[i], true, &lm_->runtime.hooks);
    prompt_tokens += int64_t(p.size());
  }
}

void EngineWorkload::decode(std::vector<Slot>& slots, const std::vector<size_t>& ready) {
  const auto batch = size_t(settings_.decode_batch);
  const auto vocab = size_t(lm_->model->config().vocab_size);
  for (size_t start = 0; start < ready.size(); start += batch) {
    const size_t end = std::min(ready.size(), start + batch);
    if (end - start == 1) {
      Slot& s = slots[ready[start]];
      const int32_t one[1] = {s.pending};
      s.logits = lm_->model->forward(one, *caches_[ready[start]], true, &lm_->runtime.hooks);
      continue;
    }
    std::vector<int32_t> tokens;
    std::vector<engine::KvCache*> caches;
    for (size_t k = start; k < end; ++k) {
      tokens.push_back(slots[ready[k]].pending);
      caches.push_back(caches_[ready[k]].get());
    }
    const std::vector<float> rows = lm_->model->forward_batch(tokens, caches, &lm_->runtime.hooks);
    for (size_t k = start; k < end; ++k)
      slots[ready[k]].logits.assign(rows.begin() + std::ptrdiff_t((k - start) * vocab),
                                    rows.begin() + std::ptrdiff_t((k - start + 1) * vocab));
  }
}

RunSample EngineWorkload::run() {
  std::vector<Slot> slots(size_t(spec_.concurrency));
  std::vector<double> ttft, tpot;
  int64_t next = 0, done = 0, out_tokens = 0, prompt_tokens = 0;
  const auto n = int64_t(prompts_.size());
  const Clock::time_point t0 = Clock::now();
  while (done < n) {
    admit(slots, next, prompt_tokens);
    std::vector<size_t> ready;
    for (size_t i = 0; i < slots.size(); ++i) {
      Slot& s = slots[i];
      if (s.prompt < 0) continue;
      s.pending = first_argmax(s.logits);  // greedy; EOS is just another token
      ++out_tokens;
      const Clock::time_point now = Clock::now();
      if (++s.produced == 1) s.first = now;
      if (s.produced < spec_.osl) {
        ready.push_back(i);
        continue;
      }
      ttft.push_back(ms_between(s.sent, s.first));
      if (spec_.osl > 1) tpot.push_back(ms_between(s.first, now) / double(spec_.osl - 1));
      s.prompt = -1;
      ++done;
    }
    decode(slots, ready);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  RunSample r = sample_of(seconds, out_tokens, prompt_tokens);
  r.ttft_ms_median = median_or_none(std::move(ttft));
  r.tpot_ms_median = median_or_none(std::move(tpot));
  return r;
}

// ---- server ----

std::string base_url(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  if (url.size() >= 3 && url.ends_with("/v1")) url.resize(url.size() - 3);
  return url;
}

class ServerWorkload final : public Workload {
 public:
  ServerWorkload(const fs::path& dir, const ThroughputSpec& spec);
  RunSample run() override;
  bool in_process() const override { return false; }
  bool rows_independent() const override { return true; }
  std::string runtime() const override { return "server"; }
  std::string backend() const override { return info_.backend; }
  std::string note() const override;

 private:
  struct Answer {
    int64_t completion_tokens = 0, prompt_tokens = 0;
    double ms = 0;
  };
  Answer request(io::HttpClient& http, size_t index) const;

  std::string base_;
  eval::ServerInfo info_;
};

ServerWorkload::ServerWorkload(const fs::path& dir, const ThroughputSpec& spec) {
  const model::ModelConfig cfg =
      model::ModelConfig::parse(io::ModelDir::open(dir).config(), (dir / "config.json").string());
  check_spec(spec, 0);  // the server enforces its own context (HTTP 400, quoted in the error)
  model_dir_ = fs::absolute(dir).lexically_normal().string();
  spec_ = spec;
  settings_.threads = 0;  // the server's own
  settings_.decode_batch = 0;
  base_ = base_url(spec.server);
  eval::ServerOptions so;
  so.url = spec.server;
  so.api_key = spec.api_key;
  so.model = spec.served_model;
  info_ = eval::OpenAiClient(so).probe();
  prompts_ = prompts_for(dir, cfg, spec);
}

std::string ServerWorkload::note() const {
  std::string n = "server " + base_ + " (backend " + info_.backend + ", model " + info_.model +
                  "): /v1/completions with token-id prompts, ignore_eos and min_tokens = OSL";
  if (info_.backend == "qloom")
    n += "; qloom serve runs the runtime it was started with (--runtime native by default: quantized linears on "
         "the native kernels)";
  return n;
}

ServerWorkload::Answer ServerWorkload::request(io::HttpClient& http, size_t index) const {
  const std::string url = base_ + "/v1/completions";
  const Json body = {{"model", info_.model},   {"prompt", prompts_[index]}, {"max_tokens", spec_.osl},
                     {"min_tokens", spec_.osl}, {"ignore_eos", true},        {"temperature", 0},
                     {"stream", false}};
  const std::string text = body.dump();
  const Clock::time_point t0 = Clock::now();
  io::HttpResult r;
  for (int attempt = 0;; ++attempt) {
    r = http.post_json(url, text, 3600);
    const bool retry = !r.transport_ok || r.status == 429 || r.status >= 500;
    if (!retry || attempt >= kMaxRetries) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500 << attempt));
  }
  if (!r.transport_ok)
    throw_not_found(url, "--server", "the server did not answer: " + r.error, "check that it is up");
  if (r.status != 200)
    throw_invalid(url, "--server",
                  "the server answered HTTP " + std::to_string(r.status) + ": " + r.body.substr(0, 300),
                  "check --isl / --osl against the server's context and --bench-concurrency against its limit");
  Answer a;
  a.ms = ms_between(t0, Clock::now());
  const Json j = Json::parse(r.body, nullptr, false);
  const Json* usage = j.is_object() && j.contains("usage") ? &j["usage"] : nullptr;
  if (!usage || !usage->is_object() || !usage->contains("completion_tokens") ||
      !(*usage)["completion_tokens"].is_number_integer())
    throw_invalid(url, "usage.completion_tokens", "the server's answer has no usage.completion_tokens",
                  "use an OpenAI-compatible server that reports usage (vLLM, SGLang, qloom serve)");
  a.completion_tokens = (*usage)["completion_tokens"].get<int64_t>();
  a.prompt_tokens = usage->contains("prompt_tokens") && (*usage)["prompt_tokens"].is_number_integer()
                        ? (*usage)["prompt_tokens"].get<int64_t>()
                        : int64_t(prompts_[index].size());
  if (a.completion_tokens < spec_.osl)
    throw_invalid(url, "usage.completion_tokens",
                  "the server generated " + std::to_string(a.completion_tokens) + " of the " +
                      std::to_string(spec_.osl) + " output tokens asked for (prompt " + std::to_string(index) +
                      "): it stopped early, so its throughput would not follow the protocol",
                  "use a server that honours ignore_eos / min_tokens (vLLM, SGLang, qloom serve)");
  return a;
}

RunSample ServerWorkload::run() {
  const size_t n = prompts_.size();
  std::vector<Answer> answers(n);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_m;
  auto worker = [&] {
    try {
      io::HttpClient http(spec_.api_key, io::HttpClient::host_of(base_));
      for (size_t i = next++; i < n && !failed; i = next++) answers[i] = request(http, i);
    } catch (...) {
      std::lock_guard lock(error_m);
      if (!error) error = std::current_exception();
      failed = true;
    }
  };
  const Clock::time_point t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int64_t t = 0; t < std::min<int64_t>(spec_.concurrency, int64_t(n)); ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (error) std::rethrow_exception(error);
  int64_t out = 0, in = 0;
  std::vector<double> latency;
  for (const Answer& a : answers) {
    out += a.completion_tokens;
    in += a.prompt_tokens;
    latency.push_back(a.ms);
  }
  RunSample r = sample_of(seconds, out, in);
  r.latency_ms_median = median_or_none(std::move(latency));
  return r;
}

}  // namespace

static std::shared_ptr<exporter::LoadedModel> load_engine(const fs::path& model_dir, unsigned threads,
                                                   const std::string& runtime) {
  engine::LoadOptions o;
  o.threads = threads;
  const exporter::Runtime rt = exporter::parse_runtime(runtime);
  if (rt == exporter::Runtime::kNative) o.compute = engine::LoadOptions::Compute::kBF16;
  return std::make_shared<exporter::LoadedModel>(exporter::load_for_eval(model_dir, o, rt));
}

std::shared_ptr<exporter::LoadedModel> EngineCache::get(const fs::path& model_dir, unsigned threads,
                                                        const std::string& runtime) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());  // as ThreadPool(0)
  const auto key = std::make_tuple(fs::absolute(model_dir).lexically_normal().string(), threads, runtime);
  auto it = models_.find(key);
  if (it != models_.end()) return it->second;
  auto lm = load_engine(model_dir, threads, runtime);
  models_.emplace(key, lm);
  return lm;
}

std::unique_ptr<Workload> open_workload(const fs::path& model_dir, const ThroughputSpec& spec,
                                        const RunnerSettings& settings, EngineCache* cache) {
  check_spec(spec, 0);  // the cheap checks before any loading; the context is checked once known
  if (!spec.server.empty()) return std::make_unique<ServerWorkload>(model_dir, spec);
  const unsigned threads = settings.threads > 0 ? settings.threads : spec.threads;
  std::shared_ptr<exporter::LoadedModel> lm;
  if (cache) {
    lm = cache->get(model_dir, threads, spec.runtime);
  } else {
    lm = load_engine(model_dir, threads, spec.runtime);
  }
  return std::make_unique<EngineWorkload>(model_dir, spec, settings, std::move(lm));
}

}  // namespace qloom::perf
