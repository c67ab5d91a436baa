// Multiple-choice task formats against lm-eval itself: the requests (context,
// continuation), gold labels and token ids in tests/data/mc/requests_golden.json
// were built by lm-eval 0.4.13 from its own task YAMLs over the fixture files
// (scripts/goldens/mc_requests.py), tokenized with SmolLM2's tokenizer.
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/text/tokenizer.h"
#include "qloom/eval/mc_tasks.h"
#include "qloom/eval/multiple_choice.h"
#include "qloom/eval/py_str.h"

namespace qloom::eval {
namespace {

const std::string kMc = std::string(QLOOM_TEST_DATA_DIR) + "/mc/";

nlohmann::json golden() {
  std::ifstream f(kMc + "requests_golden.json");
  return nlohmann::json::parse(f);
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string p = ::testing::TempDir() + name;
  std::ofstream(p) << text;
  return p;
}

TEST(McGolden, RequestsAndGoldLabelsMatchLmEval) {
  const nlohmann::json g = golden();
  ASSERT_EQ(g["lm_eval_version"], "0.4.13");
  int compared = 0;
  for (const auto& c : g["cases"]) {
    SCOPED_TRACE(c["case"].get<std::string>());
    const McTaskInfo* task = find_mc_task(c["task"].get<std::string>());
    ASSERT_NE(task, nullptr);
    const auto docs = load_mc_examples(*task, kMc + c["fixture"].get<std::string>());
    std::vector<McExample> pool;
    if (!c["fewshot_file"].is_null()) pool = load_mc_examples(*task, kMc + c["fewshot_file"].get<std::string>());
    const auto fs = choose_fewshot(*task, docs, docs.size(), pool, c["num_fewshot"].get<int>());
    ASSERT_EQ(docs.size(), c["docs"].size());
    for (size_t d = 0; d < docs.size(); ++d) {
      const auto& gd = c["docs"][d];
      EXPECT_EQ(docs[d].gold, gd["gold"].get<int>()) << "doc " << d;
      const auto reqs = mc_requests(*task, docs[d], fs[d]);
      ASSERT_EQ(reqs.size(), gd["requests"].size());
      for (size_t i = 0; i < reqs.size(); ++i) {
        EXPECT_EQ(reqs[i].context, gd["requests"][i]["context"].get<std::string>()) << "doc " << d << " option " << i;
        EXPECT_EQ(reqs[i].continuation, gd["requests"][i]["continuation"].get<std::string>());
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 70);
}

TEST(McEncodePair, TrailingSpaceMovesToTheContinuation) {
  const text::Tokenizer tok = text::Tokenizer::load(std::string(QLOOM_TEST_DATA_DIR) + "/tokenizers/smollm2");
  const TokenPair a = encode_pair(tok, "Answer: ", "yes");
  const TokenPair b = encode_pair(tok, "Answer:", " yes");
  EXPECT_EQ(a.context, b.context);
  EXPECT_EQ(a.continuation, b.continuation);
  EXPECT_THROW(encode_pair(tok, "", " yes"), Error);
}

TEST(McHellaswag, PreprocessAsLmEvalUtils) {
  // strip() runs first, so the space left where "[header]" was stays.
  EXPECT_EQ(hellaswag_preprocess("  [header] How to  clean [title] Heat it.  "), " How to clean. Heat it.");
  EXPECT_EQ(hellaswag_preprocess("a [x] b [y"), "a b [y");       // an unclosed bracket stays
  EXPECT_EQ(hellaswag_preprocess("a   b"), "a  b");              // replace("  ", " ") is one pass
  EXPECT_EQ(hellaswag_preprocess("[a\nb] c"), "[a\nb] c");       // '.' does not cross a newline
  EXPECT_EQ(python_capitalize("the NBA"), "The nba");
  EXPECT_EQ(python_capitalize("ÉTÉ is"), "Été is");
  EXPECT_EQ(python_capitalize(""), "");
  EXPECT_EQ(py_strip("\u00a0 x \x1c"), "x");
  EXPECT_EQ(py_rstrip(" x \t\n"), " x");
}

TEST(McHellaswag, ReadsLlamaCppTextLayout) {
  const std::string p = write_temp("hs.txt", "Act: ctx here\n2\nend a\nend b\nend c\nend d\n"
                                             "Act2: more\n0\nw\nx\ny\nz\n");
  const auto docs = load_mc_examples(*find_mc_task("hellaswag"), p);
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0].queries[0], "Act: ctx here");
  EXPECT_EQ(docs[0].gold, 2);
  EXPECT_EQ(docs[1].choices[3], "z");
  const auto reqs = mc_requests(*find_mc_task("hellaswag"), docs[0], {});
  EXPECT_EQ(reqs[1].context, "Act: ctx here");
  EXPECT_EQ(reqs[1].continuation, " end b");
}

void expect_invalid(const std::string& task, const std::string& file_text, const std::string& needle,
                    const char* ext = ".jsonl") {
  const std::string p = write_temp("bad" + task + ext, file_text);
  try {
    load_mc_examples(*find_mc_task(task), p);
    FAIL() << "no error for " << file_text;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(McLoaders, MalformedFilesNameTheLineAndField) {
  expect_invalid("hellaswag", "a\n1\nb\n", "6 lines per task", ".txt");
  expect_invalid("hellaswag", "a\n7\nb\nc\nd\ne\n", "gold label 0-3", ".txt");
  expect_invalid("arc_easy", "{\"question\": \"q\", \"choices\": {\"text\": [\"a\"], \"label\": [\"A\"]}, \"answerKey\": \"B\"}\n",
                 "answerKey 'B'");
  expect_invalid("piqa", "\n{\"goal\": \"g\", \"sol1\": \"a\"}\n", "line 2");
  expect_invalid("piqa", "{\"goal\": \"g\", \"sol1\": \"a\", \"sol2\": \"b\", \"label\": 2}\n", "not one of the 2 options");
  expect_invalid("winogrande", "{\"sentence\": \"no blank\", \"option1\": \"a\", \"option2\": \"b\", \"answer\": \"1\"}\n",
                 "no '_' blank");
  expect_invalid("mmlu", "{\"question\": \"q\", \"subject\": \"s\", \"choices\": [\"a\"], \"answer\": 0}\n",
                 "exactly 4 choices");
  expect_invalid("hellaswag", "{not json\n", "not a JSON object");
  expect_invalid("hellaswag", "\n\n", "no hellaswag documents");
}

TEST(McFewshot, FirstNTakesTheSubjectsDocsInOrder) {
  const McTaskInfo& mmlu = *find_mc_task("mmlu");
  const auto docs = load_mc_examples(mmlu, kMc + "mmlu_geo.jsonl");
  const auto pool = load_mc_examples(mmlu, kMc + "mmlu_geo_dev.jsonl");
  const auto fs = choose_fewshot(mmlu, docs, docs.size(), pool, 2);
  ASSERT_EQ(fs.size(), docs.size());
  for (const auto& f : fs) {
    ASSERT_EQ(f.size(), 2u);
    EXPECT_EQ(f[0], &pool[0]);
    EXPECT_EQ(f[1], &pool[1]);
  }
  EXPECT_THROW(choose_fewshot(mmlu, docs, docs.size(), pool, 4), Error);
  const auto anatomy = load_mc_examples(mmlu, kMc + "mmlu_anatomy.jsonl");
  EXPECT_THROW(choose_fewshot(mmlu, anatomy, 1, pool, 1), Error);  // no anatomy docs in the pool
}

}  // namespace
}  // namespace qloom::eval
