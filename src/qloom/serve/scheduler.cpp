#include "qloom/serve/scheduler.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <limits>
#include <fstream>
#include <span>
#include <sstream>
#include <unordered_map>

#include <unistd.h>

#include "qloom/core/heap.h"
#include "qloom/core/error.h"
#include "qloom/eval/gsm8k.h"
#include "qloom/eval/perplexity.h"

namespace qloom::serve {
namespace {

// Bytes at the end of `text` that may still change: an incomplete UTF-8
// sequence or a U+FFFD the decoder put for one, and the longest tail that
// is a proper prefix of a stop string.
size_t unstable_tail(const std::string& text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  static const std::string kReplacement = "\xEF\xBF\xBD";
  if (text.size() >= 3 && text.compare(text.size() - 3, 3, kReplacement) == 0) hold = 3;
  size_t i = text.size(), cont = 0;
  while (i > 0 && cont < 4 && (uint8_t(text[i - 1]) & 0xC0) == 0x80) --i, ++cont;
  if (i > 0) {
    const auto lead = uint8_t(text[i - 1]);
    const size_t need = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
    if (need > cont) hold = std::max(hold, cont + 1);
  }
  for (const std::string& s : stops)
    for (size_t n = std::min(s.size() - (s.empty() ? 0 : 1), text.size()); n > 0; --n)
      if (text.compare(text.size() - n, n, s, 0, n) == 0) {
        hold = std::max(hold, n);
        break;
      }
  return std::min(hold, text.size());
}

// "12345 bytes", "1.5 MiB", "24.0 GiB".
std::string size_text(size_t bytes) {
  if (bytes < (size_t(1) << 20)) return std::to_string(bytes) + " bytes";
  const bool gib = bytes >= (size_t(1) << 30);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", double(bytes) / double(size_t(1) << (gib ? 30 : 20)), gib ? "GiB" : "MiB");
  return buf;
}

bool has_stop(const std::string& text, const std::vector<std::string>& stops) {
  return std::any_of(stops.begin(), stops.end(),
                     [&](const std::string& s) { return !s.empty() && text.find(s) != std::string::npos; });
}

}  // namespace

size_t default_kv_budget() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream fields(line.substr(13));
      size_t kib = 0;
      if (fields >> kib && kib > 0) return kib * 1024 / 2;
    }
  const long pages = ::sysconf(_SC_AVPHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? size_t(pages) * size_t(page) / 2 : size_t(1) << 30;
}

// ---- Job ----

Job::Job(std::vector<SeqSpec> seqs) : specs_(std::move(seqs)), results_(specs_.size()) {}

std::vector<SeqEvent> Job::take(std::chrono::milliseconds timeout) {
  std::unique_lock lock(m_);
  cv_.wait_for(lock, timeout, [&] { return !events_.empty() || error_.has_value(); });
  std::vector<SeqEvent> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
  events_.clear();
  return out;
}

void Job::wait() {
  std::unique_lock lock(m_);
  cv_.wait(lock, [&] { return finished_ == specs_.size() || error_.has_value(); });
}

bool Job::done() const {
  std::lock_guard lock(m_);
  return finished_ == specs_.size() || error_.has_value();
}

std::optional<ApiError> Job::error() const {
  std::lock_guard lock(m_);
  return error_;
}

void Job::push(SeqEvent e) {
  {
    std::lock_guard lock(m_);
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

void Job::finish(size_t index, SeqResult r, std::string last_delta) {
  {
    std::lock_guard lock(m_);
    SeqEvent e{index, std::move(last_delta), true, r.finish_reason};
    results_[index] = std::move(r);
    ++finished_;
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

void Job::cancel() {
  cancelled_ = true;
  fail(ApiError(499, "the request was cancelled (its client went away)", "invalid_request_error", {}, "cancelled"));
}

void Job::fail(const ApiError& e) {
  {
    std::lock_guard lock(m_);
    if (!error_) error_ = e;
  }
  cv_.notify_all();
}

// ---- Scheduler ----

struct Scheduler::Active {
  Active(std::shared_ptr<Job> j, size_t i) : job(std::move(j)), index(i), spec(&job->specs()[i]), sampler(spec->sampling) {}
  std::shared_ptr<Job> job;
  size_t index = 0;
  const SeqSpec* spec = nullptr;
  Sampler sampler;
  std::unique_ptr<engine::KvCache> cache;
  std::vector<float> logits;  // the next token's row
  int32_t pending = -1;       // sampled, to run through the model in this round's decode pass
  std::vector<int32_t> text_ids;
  SeqResult result;
  std::string text;
  size_t emitted = 0;  // bytes of text already sent
  size_t kv_reserved = 0;  // worst-case KV bytes counted against the budget
  bool finished = false;
  bool released = false;
};

void Scheduler::release(Active& a) {
  if (a.released) return;
  a.released = true;
  kv_reserved_ -= a.kv_reserved;
  const auto it = live_.find(a.job.get());
  if (it != live_.end() && --it->second == 0) {
    live_.erase(it);
    --in_flight_;
  }
}

Scheduler::Scheduler(engine::Model& model, const engine::ForwardHooks* hooks, const text::Tokenizer& tok,
                     SchedulerOptions opt)
    : model_(model), hooks_(hooks), tok_(tok), opt_(std::move(opt)), probe_(model_.new_cache(0)) {
  if (opt_.kv_budget_bytes == 0) opt_.kv_budget_bytes = default_kv_budget();
  opt_.prefill_tokens_per_round = std::max<int64_t>(opt_.prefill_tokens_per_round, 1);
  opt_.max_active_sequences = std::max<size_t>(opt_.max_active_sequences, 1);
  opt_.max_concurrency = std::max<size_t>(opt_.max_concurrency, 1);
  thread_ = std::thread([this] { loop(); });
}

size_t Scheduler::kv_bytes(const SeqSpec& s) const {
  return probe_->bytes_for(int64_t(s.prompt.size()) + std::max<int64_t>(s.max_tokens, 0));
}

KvStats Scheduler::kv_stats() const {
  return KvStats{opt_.kv_budget_bytes, kv_reserved_, kv_allocated_, kv_peak_allocated_, kv_peak_reserved_};
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::stop() {
  {
    std::lock_guard lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<Job> Scheduler::submit(std::vector<SeqSpec> seqs) {
  for (const SeqSpec& s : seqs)
    if (const size_t need = kv_bytes(s); need > opt_.kv_budget_bytes)
      throw ApiError(400,
                     "a sequence of " + std::to_string(s.prompt.size()) + " prompt tokens + max_tokens " +
                         std::to_string(s.max_tokens) + " may need " + size_text(need) +
                         " of KV cache, over this server's KV-cache budget of " + size_text(opt_.kv_budget_bytes) +
                         " (--kv-cache-budget); lower max_tokens or shorten the prompt",
                     "invalid_request_error", "max_tokens", "kv_cache_budget_exceeded");
  auto job = std::make_shared<Job>(std::move(seqs));
  {
    std::lock_guard lock(m_);
    if (stop_) throw ApiError(503, "the server is shutting down", "server_error", {}, "shutting_down");
    if (in_flight_ >= opt_.max_concurrency)
      throw overloaded_error("the server is running its maximum of " + std::to_string(opt_.max_concurrency) +
                             " concurrent requests (--max-concurrency); retry later");
    ++in_flight_;
    incoming_.push_back(job);
  }
  cv_.notify_all();
  return job;
}

TokenLogprob Scheduler::logprob_of(const float* row, int32_t id, int k) const {
  const int64_t vocab = model_.config().vocab_size;
  TokenLogprob t;
  t.id = id;
  t.logprob = -eval::token_nll(row, vocab, id);
  for (int32_t top : top_k_ids(std::span<const float>(row, size_t(vocab)), k))
    t.top.emplace_back(top, top == id ? t.logprob : -eval::token_nll(row, vocab, top));
  return t;
}

// Runs the prompt; false when the sequence is already finished (max_tokens 0).
bool Scheduler::prefill(Active& a) {
  const std::vector<int32_t>& p = a.spec->prompt;
  const int64_t n = int64_t(p.size());
  a.cache = model_.new_cache(n + a.spec->max_tokens);
  if (a.spec->prompt_logprobs && n > 1) {
    // As eval::score_option: all but the last token, one forward, empty cache.
    const std::vector<float> rows = model_.forward(std::span(p.data(), p.size() - 1), *a.cache, false, hooks_);
    const auto vocab = size_t(model_.config().vocab_size);
    for (size_t t = 0; t + 1 < p.size(); ++t)
      a.result.prompt_logprobs.push_back(logprob_of(rows.data() + t * vocab, p[t + 1], a.spec->top_logprobs));
    if (a.spec->max_tokens == 0) return false;
    a.logits = model_.forward(std::span(p.data() + p.size() - 1, 1), *a.cache, true, hooks_);
    return true;
  }
  if (a.spec->max_tokens == 0) return false;
  a.logits = model_.forward(p, *a.cache, true, hooks_);
  return true;
}

void Scheduler::emit(Active& a, bool final) {
  std::string delta;
  if (final) {
    release(a);  // the slot frees before the client sees the end, so it may send its next request at once
    a.result.text = eval::cut_at_stop(a.text, a.spec->stop);
    if (a.result.text.size() > a.emitted) delta = a.result.text.substr(a.emitted);
    a.finished = true;
    a.job->finish(a.index, std::move(a.result), std::move(delta));
    return;
  }
  const size_t safe = a.text.size() - unstable_tail(a.text, a.spec->stop);
  if (safe <= a.emitted) return;
  a.job->push(SeqEvent{a.index, a.text.substr(a.emitted, safe - a.emitted), false, {}});
  a.emitted = safe;
}

// One decode step; false when the sequence finished.
bool Scheduler::step(Active& a) {
  const bool early = int64_t(a.result.tokens.size()) < a.spec->min_tokens;
  if (early)
    for (int32_t id : opt_.eos_ids)
      if (id >= 0 && size_t(id) < a.logits.size()) a.logits[size_t(id)] = -std::numeric_limits<float>::infinity();
  const int32_t next = a.sampler.sample(a.logits);
  if (a.spec->top_logprobs >= 0) a.result.token_logprobs.push_back(logprob_of(a.logits.data(), next, a.spec->top_logprobs));
  a.result.tokens.push_back(next);
  ++tokens_generated_;
  const bool eos = std::find(opt_.eos_ids.begin(), opt_.eos_ids.end(), next) != opt_.eos_ids.end();
  if (eos && !a.spec->ignore_eos) {
    a.result.finish_reason = "stop";
    return false;
  }
  a.text_ids.push_back(next);
  a.text = tok_.decode(a.text_ids, true);
  if (!early && has_stop(a.text, a.spec->stop)) {
    a.result.finish_reason = "stop";
    return false;
  }
  if (int64_t(a.result.tokens.size()) >= a.spec->max_tokens || a.cache->size() >= a.cache->capacity()) {
    a.result.finish_reason = "length";
    return false;
  }
  emit(a, false);
  a.pending = next;
  return true;
}

// Runs every sequence's pending token: one forward_batch pass for all of them
// (in chunks below the GEMM row threshold, where a row's result does not
// depend on the batch), or one forward each when batching is off.
void Scheduler::decode_round(const std::vector<Active*>& ready) {
  constexpr size_t kMaxBatch = 64;
  for (size_t start = 0; start < ready.size(); start += kMaxBatch) {
    const size_t end = std::min(ready.size(), start + kMaxBatch);
    if (!opt_.batch_decode || end - start == 1) {
      for (size_t i = start; i < end; ++i) {
        const int32_t one[1] = {ready[i]->pending};
        ready[i]->logits = model_.forward(one, *ready[i]->cache, true, hooks_);
      }
      continue;
    }
    std::vector<int32_t> tokens;
    std::vector<engine::KvCache*> caches;
    for (size_t i = start; i < end; ++i) {
      tokens.push_back(ready[i]->pending);
      caches.push_back(ready[i]->cache.get());
    }
    const std::vector<float> rows = model_.forward_batch(tokens, caches, hooks_);
    const auto vocab = size_t(model_.config().vocab_size);
    for (size_t i = start; i < end; ++i)
      ready[i]->logits.assign(rows.begin() + std::ptrdiff_t((i - start) * vocab),
                              rows.begin() + std::ptrdiff_t((i - start + 1) * vocab));
  }
}

void Scheduler::start(const std::shared_ptr<Job>& job, size_t index) {
  auto a = std::make_unique<Active>(job, index);
  a->kv_reserved = kv_bytes(*a->spec);
  kv_reserved_ += a->kv_reserved;
  kv_peak_reserved_ = std::max<size_t>(kv_peak_reserved_, kv_reserved_);
  try {
    if (!prefill(*a)) {
      a->result.finish_reason = "length";
      emit(*a, true);
    }
  } catch (const std::exception& e) {
    job->fail(internal_error(std::string("prefill failed: ") + e.what()));
    a->finished = true;
  }
  active_.push_back(std::move(a));
}

// Waiting requests cancelled or failed: their unstarted sequences are released.
void Scheduler::drop_abandoned() {
  auto abandoned = [&](const Waiting& w) {
    if (!w.job->cancelled() && !w.job->done()) return false;
    const auto it = live_.find(w.job.get());
    const size_t unstarted = w.job->specs().size() - w.next;
    if (it != live_.end() && (it->second -= std::min(it->second, unstarted)) == 0) {
      live_.erase(it);
      --in_flight_;
    }
    return true;
  };
  waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(), abandoned), waiting_.end());
}

// Starts w's next sequence if the round's prefill tokens, the KV budget and
// the running-sequence cap allow (the round's first start ignores the
// prefill bound, so a long prompt still runs).
bool Scheduler::try_start(Waiting& w, int64_t& prompt_tokens) {
  const SeqSpec& s = w.job->specs()[w.next];
  if (prompt_tokens > 0 && prompt_tokens + int64_t(s.prompt.size()) > opt_.prefill_tokens_per_round) return false;
  if (kv_reserved_ + kv_bytes(s) > opt_.kv_budget_bytes || active_.size() >= opt_.max_active_sequences) return false;
  prompt_tokens += int64_t(s.prompt.size());
  start(w.job, w.next++);
  return true;
}

// Sequences of `job` running now (started, not yet swept).
size_t Scheduler::running_of(const Job* job) const {
  return size_t(std::count_if(active_.begin(), active_.end(), [&](const auto& a) { return a->job.get() == job; }));
}

// One sequence per waiting request in turn, oldest first, until one does
// not fit (later ones wait too, so a large sequence is not starved). A
// request runs at most max_active_sequences / max_concurrency sequences at
// once, so every admitted request finds a free slot: one with many prompts
// cannot hold every slot while another client waits for all of it.
void Scheduler::start_sequences() {
  drop_abandoned();
  const size_t share = std::max<size_t>(1, opt_.max_active_sequences / opt_.max_concurrency);
  int64_t prompt_tokens = 0;
  for (bool more = true; more;) {
    more = false;
    for (Waiting& w : waiting_) {
      if (w.next == w.job->specs().size() || running_of(w.job.get()) >= share) continue;
      if (!try_start(w, prompt_tokens)) {
        more = false;
        break;
      }
      more = more || w.next < w.job->specs().size();
    }
  }
  waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(),
                                [](const Waiting& w) { return w.next == w.job->specs().size(); }),
                 waiting_.end());
}

void Scheduler::decode_active() {
  std::vector<Active*> ready;
  for (auto& a : active_) {
    if (a->finished || a->job->cancelled() || a->job->done()) continue;
    try {
      if (step(*a))
        ready.push_back(a.get());
      else
        emit(*a, true);
    } catch (const std::exception& e) {
      a->job->fail(internal_error(std::string("decode failed: ") + e.what()));
    }
  }
  try {
    decode_round(ready);
  } catch (const std::exception& e) {
    for (Active* a : ready) a->job->fail(internal_error(std::string("decode failed: ") + e.what()));
  }
}

void Scheduler::account_kv() {
  size_t held = 0;
  for (const auto& a : active_)
    if (a->cache) held += a->cache->allocated_bytes();
  kv_allocated_ = held;
  kv_peak_allocated_ = std::max<size_t>(kv_peak_allocated_, held);
}

void Scheduler::sweep() {
  account_kv();
  auto gone = [](const std::unique_ptr<Active>& a) {
    return a->finished || a->job->cancelled() || a->job->error().has_value();
  };
  bool released = false;
  for (auto& a : active_)
    if (gone(a)) release(*a), released = true;
  active_.erase(std::remove_if(active_.begin(), active_.end(), gone), active_.end());
  // Going idle: the freed KV caches go back to the system (core/heap.h).
  if (released && active_.empty()) return_freed_heap_memory();
}

void Scheduler::loop() {
  for (;;) {
    {
      std::unique_lock lock(m_);
      cv_.wait(lock, [&] { return stop_ || !incoming_.empty() || !active_.empty() || !waiting_.empty(); });
      if (stop_) break;
      for (auto& job : incoming_) {
        live_[job.get()] = job->specs().size();
        waiting_.push_back(Waiting{std::move(job), 0});
      }
      incoming_.clear();
    }
    start_sequences();
    decode_active();
    sweep();
  }
  const ApiError down(503, "the server is shutting down", "server_error", {}, "shutting_down");
  for (auto& a : active_) a->job->fail(down);
  for (auto& w : waiting_) w.job->fail(down);
  for (auto& j : incoming_) j->fail(down);
  active_.clear();
  waiting_.clear();
}

}  // namespace qloom::serve
