// serve::Scheduler on the demo model, without HTTP: cancellation stops a job
// within one step, the KV cache held follows the tokens generated (not
// prompt + max_tokens), the KV budget is checked at admission and respected
// while sequences wait, and a request of many prompts is prefilled in
// bounded chunks while another client's request is answered.
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "qloom/engine/kv_cache.h"
#include "qloom/engine/model.h"
#include "qloom/serve/scheduler.h"
#include "qloom/text/tokenizer.h"

namespace qloom::serve {
namespace {

using namespace std::chrono_literals;

struct Demo {
  std::unique_ptr<engine::Model> model = engine::Model::load(QLOOM_DEMO_MODEL_DIR, [] {
    engine::LoadOptions o;
    o.threads = 1;
    return o;
  }());
  text::Tokenizer tok = text::Tokenizer::load(QLOOM_DEMO_MODEL_DIR);
};

Demo& demo() {
  static Demo d;
  return d;
}

std::unique_ptr<Scheduler> scheduler(SchedulerOptions o = {}) {
  if (o.kv_budget_bytes == 0) o.kv_budget_bytes = size_t(1) << 30;
  o.eos_ids = {2};
  return std::make_unique<Scheduler>(*demo().model, nullptr, demo().tok, o);
}

SeqSpec greedy(const std::string& prompt, int64_t max_tokens) {
  SeqSpec s;
  s.prompt = demo().tok.encode(prompt, true);
  s.max_tokens = max_tokens;
  s.sampling.temperature = 0;
  return s;
}

void wait_idle(const Scheduler& s) {
  for (int i = 0; i < 500 && s.in_flight() > 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(s.in_flight(), 0u);
}

// /proc/self/status's value (kB) for `key`.
size_t proc_status_kb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + ":", 0) == 0) return std::stoul(line.substr(key.size() + 1));
  return 0;
}

TEST(ServeScheduler, CancelledJobStopsWithinOneStep) {
  auto s = scheduler();
  std::vector<SeqSpec> seqs = {greedy("Once upon", 3000), greedy("The dog", 3000)};
  for (SeqSpec& q : seqs) q.ignore_eos = true;
  auto job = s->submit(seqs);
  for (int i = 0; i < 200 && s->tokens_generated() < 4; ++i) job->take(10ms);
  ASSERT_GE(s->tokens_generated(), 4u);
  ASSERT_FALSE(job->done());
  job->cancel();
  const uint64_t at_cancel = s->tokens_generated();
  job->wait();  // returns at once: the job ended with an error
  ASSERT_TRUE(job->error().has_value());
  EXPECT_EQ(job->error()->code(), "cancelled");
  wait_idle(*s);
  std::this_thread::sleep_for(50ms);
  EXPECT_LE(s->tokens_generated(), at_cancel + seqs.size()) << "the round in progress at most";
  EXPECT_EQ(s->kv_stats().reserved, 0u);
  // The scheduler keeps serving.
  auto next = s->submit({greedy("Once", 4)});
  next->wait();
  EXPECT_FALSE(next->error().has_value());
  EXPECT_EQ(next->results()[0].tokens.size(), 4u);
}

// 8 sequences that may generate 65,536 tokens each (the old cache took
// prompt + max_tokens positions up front: 8 x 84 MB zeroed) but stop after
// ~20: the caches hold one growth chunk each, and the process's peak RSS
// grows by far less than the worst case.
TEST(ServeScheduler, KvMemoryFollowsTokensGenerated) {
  auto s = scheduler();
  std::vector<SeqSpec> seqs(8, greedy("Hi", 65536));
  for (SeqSpec& q : seqs) {
    q.min_tokens = 20;  // no EOS or stop string before 20 tokens, then the first space stops it
    q.stop = {" "};
  }
  const size_t worst = s->kv_bytes(seqs[0]) * seqs.size();
  { std::ofstream("/proc/self/clear_refs") << "5"; }  // reset VmHWM to the current RSS
  const size_t hwm0 = proc_status_kb("VmHWM");
  auto job = s->submit(seqs);
  job->wait();
  ASSERT_FALSE(job->error().has_value());
  size_t generated = 0;
  for (const SeqResult& r : job->results()) generated += r.tokens.size() + 2;
  ASSERT_LT(generated, size_t(8 * 64));
  const KvStats kv = s->kv_stats();
  EXPECT_EQ(kv.peak_reserved, worst);
  EXPECT_GT(kv.peak_allocated, 0u);
  EXPECT_LE(kv.peak_allocated, 8 * demo().model->new_cache(0)->bytes_for(engine::KvCacheImpl::kGrowChunk));
  EXPECT_LT(kv.peak_allocated * 500, worst);
  const size_t hwm_growth = (proc_status_kb("VmHWM") - hwm0) * 1024;
  EXPECT_LT(hwm_growth, worst / 8) << "peak RSS grew " << (hwm_growth >> 20) << " MiB; worst case "
                                   << (worst >> 20) << " MiB";
  wait_idle(*s);
  EXPECT_EQ(s->kv_stats().reserved, 0u);
}

TEST(ServeScheduler, KvBudgetIsCheckedAtAdmissionAndKeptWhileWaiting) {
  const SeqSpec one = greedy("Once upon a time", 40);
  const size_t per_seq = demo().model->new_cache(0)->bytes_for(int64_t(one.prompt.size()) + 40);
  SchedulerOptions o;
  o.kv_budget_bytes = per_seq * 5 / 2;  // two sequences at once
  auto s = scheduler(o);
  EXPECT_EQ(s->kv_stats().budget, o.kv_budget_bytes);
  try {
    s->submit({greedy("Once upon a time", 200)});
    ADD_FAILURE() << "a sequence over the whole budget was admitted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.code(), "kv_cache_budget_exceeded");
    EXPECT_EQ(e.param(), "max_tokens");
    EXPECT_NE(std::string(e.what()).find("--kv-cache-budget"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(o.kv_budget_bytes) + " bytes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s->in_flight(), 0u);
  auto job = s->submit(std::vector<SeqSpec>(6, one));
  job->wait();
  ASSERT_FALSE(job->error().has_value());
  for (const SeqResult& r : job->results()) EXPECT_EQ(r.tokens, job->results()[0].tokens);
  EXPECT_EQ(s->kv_stats().peak_reserved, 2 * per_seq);
  wait_idle(*s);
}

// 200 prompts (under max_active_sequences, so only the prefill bound holds
// them back) prefilled at most 64 tokens per round: a one-prompt request sent
// just after is answered while the big one is still being prefilled.
TEST(ServeScheduler, ManyPromptsArePrefilledInChunksBetweenOtherClients) {
  SchedulerOptions o;
  o.prefill_tokens_per_round = 64;
  o.max_active_sequences = 200 * o.max_concurrency;  // a request's share of the slots: all 200
  auto s = scheduler(o);
  std::vector<SeqSpec> many(200, greedy("Once upon a time there was a little girl named Lily who liked to play", 1));
  ASSERT_GT(many[0].prompt.size(), 10u);
  auto big = s->submit(many);
  auto small = s->submit({greedy("The cat", 2)});
  small->wait();
  EXPECT_FALSE(big->done()) << "the big request was prefilled in one round before the small one";
  ASSERT_FALSE(small->error().has_value());
  EXPECT_EQ(small->results()[0].tokens.size(), 2u);
  big->wait();
  ASSERT_FALSE(big->error().has_value());
  for (const SeqResult& r : big->results()) EXPECT_EQ(r.tokens, big->results()[0].tokens);
  wait_idle(*s);
}

// A request with as many prompts as there are running slots, all generating
// equally long: it may hold only its share (max_active_sequences /
// max_concurrency), so a one-prompt request sent just after starts at once
// instead of waiting for every one of them to finish.
TEST(ServeScheduler, OneRequestHoldsOnlyItsShareOfTheSlots) {
  SchedulerOptions o;
  o.max_concurrency = 2;
  o.max_active_sequences = 8;
  auto s = scheduler(o);
  std::vector<SeqSpec> many(8, greedy("Once upon a time", 400));
  for (SeqSpec& m : many) m.ignore_eos = true;
  auto big = s->submit(many);
  auto small = s->submit({greedy("The cat", 2)});
  small->wait();
  ASSERT_FALSE(small->error().has_value());
  EXPECT_FALSE(big->done()) << "the small request waited for the whole big one";
  big->wait();
  ASSERT_FALSE(big->error().has_value());
  wait_idle(*s);
}

TEST(ServeScheduler, DefaultKvBudgetIsHalfTheAvailableMemory) {
  const size_t budget = default_kv_budget();
  EXPECT_GT(budget, size_t(1) << 20);
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("MemAvailable:", 0) == 0) {
      const size_t avail = std::stoul(line.substr(13)) * 1024;
      EXPECT_GT(budget, avail / 4);  // memory moves a little between the two reads
      EXPECT_LT(budget, avail);
    }
}

}  // namespace
}  // namespace qloom::serve
