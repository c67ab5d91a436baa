// Multiple-choice scoring on SmolLM2-135M against lm-eval itself:
//  - the token ids lm-eval's HF backend scores for every fixture request
//    (tests/data/mc/requests_golden.json, made with SmolLM2's tokenizer);
//  - per-option log-likelihoods of the first 40 bundled hellaswag tasks
//    against lm-eval 0.4.13 + transformers float32 on CPU
//    (tests/data/real/hellaswag_lmeval_first40.json).
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qloom/engine/model.h"
#include "qloom/text/tokenizer.h"
#include "qloom/eval/datasets.h"
#include "qloom/eval/mc_tasks.h"
#include "qloom/eval/multiple_choice.h"
#include "real/real_model.h"

namespace qloom::test {
namespace {

nlohmann::json read(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

TEST(RealMc, EncodePairGivesLmEvalsTokenIds) {
  const text::Tokenizer tok = text::Tokenizer::load(real_model_dir());
  const nlohmann::json g = read(std::filesystem::path(QLOOM_TEST_DATA_DIR) / "mc" / "requests_golden.json");
  int compared = 0;
  for (const auto& c : g["cases"])
    for (const auto& d : c["docs"])
      for (const auto& r : d["requests"]) {
        const eval::TokenPair p =
            eval::encode_pair(tok, r["context"].get<std::string>(), r["continuation"].get<std::string>());
        EXPECT_EQ(p.context, r["context_ids"].get<std::vector<int32_t>>()) << r["context"];
        EXPECT_EQ(p.continuation, r["continuation_ids"].get<std::vector<int32_t>>()) << r["continuation"];
        ++compared;
      }
  EXPECT_EQ(compared, 70);
}

// Tolerance: both sides compute in fp32; a summed log-likelihood over ~10-30
// tokens differs by accumulated rounding only. 2e-3 absolute per option; a
// prediction may differ only where lm-eval's own top two are closer than that.
TEST(RealMc, HellaswagLogLikelihoodsMatchLmEval) {
  const nlohmann::json g = read(real_data_dir() / "hellaswag_lmeval_first40.json");
  const eval::McTaskInfo& task = *eval::find_mc_task("hellaswag");
  const auto docs = eval::load_mc_examples(task, eval::bundled_file("hellaswag/hellaswag_val_first200.txt"));
  const size_t n = g["docs"].size();
  ASSERT_EQ(n, 40u);
  engine::LoadOptions lo;
  lo.threads = 2;
  auto model = engine::Model::load(real_model_dir(), lo);
  const text::Tokenizer tok = text::Tokenizer::load(real_model_dir());
  const auto fewshot = eval::choose_fewshot(task, docs, n, {}, 0);
  const eval::McResult r = eval::run_multiple_choice(*model, nullptr, tok, task, docs, fewshot, n, 8192);
  ASSERT_EQ(r.items.size(), n);
  double worst = 0;
  int acc_q = 0, acc_ref = 0;
  for (size_t d = 0; d < n; ++d) {
    const auto& ref = g["docs"][d];
    ASSERT_EQ(r.items[d].gold, ref["gold"].get<int>());
    std::vector<double> lls;
    for (size_t i = 0; i < 4; ++i) {
      const double want = ref["lls"][i].get<double>();
      worst = std::max(worst, std::fabs(r.items[d].options[i].loglik - want));
      EXPECT_NEAR(r.items[d].options[i].loglik, want, 2e-3) << "doc " << d << " option " << i;
      EXPECT_EQ(r.items[d].options[i].greedy, ref["is_greedy"][i].get<bool>()) << "doc " << d << " option " << i;
      lls.push_back(want);
    }
    std::vector<double> sorted = lls;
    std::sort(sorted.rbegin(), sorted.rend());
    const int ref_pred = int(std::max_element(lls.begin(), lls.end()) - lls.begin());
    if (sorted[0] - sorted[1] > 2e-3) EXPECT_EQ(r.items[d].pred, ref_pred) << "doc " << d;
    acc_q += r.items[d].acc();
    acc_ref += ref_pred == r.items[d].gold;
  }
  EXPECT_EQ(acc_q, acc_ref);
  RecordProperty("max_abs_loglik_diff", std::to_string(worst));
}

}  // namespace
}  // namespace qloom::test
