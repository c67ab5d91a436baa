// Multiple-choice log-likelihood tasks as lm-eval (0.4.13) defines them:
// where the documents come from (local files: qloom bundles only a test
// subset), how one document becomes its prompt and its choices, and how the
// plain-text few-shot context is laid out. Scoring is multiple_choice.h.
//
// Task formats (lm_eval/tasks/<task>/*.yaml; target_delimiter " ",
// fewshot_delimiter "\n\n" everywhere):
//   hellaswag      query = preprocess(activity_label + ": " + ctx_a + " " +
//                  capitalize(ctx_b)), choices = preprocess(endings[i]),
//                  gold = label (lm_eval/tasks/hellaswag/utils.py). The
//                  llama.cpp text file (6 lines a task: "label: ctx", gold,
//                  4 endings) is read as is: its texts are already
//                  preprocessed, but its ctx_b is not capitalized, so scores
//                  on it differ slightly from lm-eval's own hellaswag.
//   arc_easy/arc_challenge  "Question: {question}\nAnswer:", choices =
//                  choices.text, gold = choices.label.index(answerKey).
//   piqa           "Question: {goal}\nAnswer:", choices [sol1, sol2], gold = label.
//   winogrande     several inputs: query_i = sentence[:blank] + option_i,
//                  one continuation sentence[blank+1:].strip(), gold =
//                  answer - 1; acc only.
//   mmlu           description "The following are multiple choice questions
//                  (with answers) about {subject with '_' -> ' '}.\n\n",
//                  "{question.strip()}\nA. {c0}\nB. {c1}\nC. {c2}\nD. {c3}\nAnswer:",
//                  choices "A".."D", gold = answer; acc only; few-shot
//                  first_n from the same subject's dev docs.
// Plain-text context (lm-eval fewshot_context without a chat template):
//   description + for each few-shot doc: query + " " + gold choice + "\n\n"
//   + the doc's query; each request's continuation is " " + choice. Few-shot
//   docs: the first n (first_n) or Python random.Random(1234).sample(pool, n)
//   drawn per document in order, from one generator for the whole run.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace qloom::eval {

struct McExample {
  // doc_to_text: one query, or one per option (winogrande).
  std::vector<std::string> queries;
  // The options scored as continuations (without the target delimiter): one
  // per option, or a single shared one (winogrande).
  std::vector<std::string> choices;
  int gold = 0;
  std::string subject;  // mmlu: picks the description and the few-shot pool
  size_t options() const { return queries.size() > 1 ? queries.size() : choices.size(); }
};

enum class FewshotSampler { kRandom, kFirstN };

struct McTaskInfo {
  std::string name;
  bool acc_norm = true;      // lm-eval reports acc_norm for the task
  FewshotSampler sampler = FewshotSampler::kRandom;
  std::string formats;       // the file layouts it reads, for messages
};

// The tasks qloom scores: hellaswag, arc_easy, arc_challenge, piqa,
// winogrande, mmlu. nullptr for any other name.
const McTaskInfo* find_mc_task(std::string_view name);
const std::vector<std::string>& mc_task_names();

// The documents of `file`, in file order. hellaswag reads llama.cpp's text
// layout (a file not ending .jsonl/.json) or HF jsonl; every task reads
// one JSON object per line with the HF datasets field names (ARC also in the
// original ARC-V1 layout {question: {stem, choices: [{text, label}]},
// answerKey}). Throws kNotFound for a missing file, kInvalidInput naming the
// file, line and field for anything malformed.
std::vector<McExample> load_mc_examples(const McTaskInfo& task, const std::filesystem::path& file);

// lm-eval's hellaswag text helpers (utils.py preprocess; Python's
// str.capitalize), exposed for tests.
std::string hellaswag_preprocess(std::string_view text);
std::string python_capitalize(std::string_view text);

struct McRequestText {
  std::string context;       // the whole prompt before the continuation
  std::string continuation;  // " " + the option
};

// One request per option, as lm-eval's construct_requests builds them.
std::vector<McRequestText> mc_requests(const McTaskInfo& task, const McExample& doc,
                                       const std::vector<const McExample*>& fewshot);

// The few-shot documents for docs[0..n) in order (each entry points into
// `pool`). num_fewshot 0: empty lists. Throws kInvalidInput when the pool
// (for mmlu: the doc's subject in it) has fewer than num_fewshot docs.
std::vector<std::vector<const McExample*>> choose_fewshot(const McTaskInfo& task,
                                                          const std::vector<McExample>& docs,
                                                          size_t n,
                                                          const std::vector<McExample>& pool,
                                                          int num_fewshot, uint64_t seed = 1234);

}  // namespace qloom::eval
