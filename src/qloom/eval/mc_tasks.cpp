#include "qloom/eval/mc_tasks.h"

#include <algorithm>
#include <array>

#include <unicode/uchar.h>

#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/text/unicode.h"
#include "qloom/eval/datasets.h"
#include "qloom/eval/py_random.h"
#include "qloom/eval/py_str.h"
#include "qloom/io/text_file.h"

namespace qloom::eval {
namespace {

using nlohmann::json;

const std::vector<McTaskInfo>& tasks() {
  static const std::vector<McTaskInfo> t = {
      {"hellaswag", true, FewshotSampler::kRandom,
       "llama.cpp's hellaswag text file, or HF jsonl {activity_label, ctx_a, ctx_b, endings, label}"},
      {"arc_easy", true, FewshotSampler::kRandom,
       "HF jsonl {question, choices: {text, label}, answerKey} or ARC-V1 jsonl"},
      {"arc_challenge", true, FewshotSampler::kRandom,
       "HF jsonl {question, choices: {text, label}, answerKey} or ARC-V1 jsonl"},
      {"piqa", true, FewshotSampler::kRandom, "HF jsonl {goal, sol1, sol2, label}"},
      {"winogrande", false, FewshotSampler::kRandom,
       "HF jsonl {sentence (one '_'), option1, option2, answer '1'|'2'}"},
      {"mmlu", false, FewshotSampler::kFirstN,
       "HF jsonl {question, subject, choices: [4], answer: 0-3 or A-D}"},
  };
  return t;
}

// re.sub(r"\[.*?\]", "", s): '.' matches anything but '\n'.
std::string drop_bracketed(std::string_view s) {
  std::string out;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t open = s.find('[', pos);
    if (open == std::string_view::npos) break;
    const size_t close = s.find_first_of("]\n", open + 1);
    if (close == std::string_view::npos || s[close] == '\n') {
      out.append(s.substr(pos, open + 1 - pos));  // no match starting here
      pos = open + 1;
      continue;
    }
    out.append(s.substr(pos, open - pos));
    pos = close + 1;
  }
  out.append(s.substr(pos));
  return out;
}

[[noreturn]] void bad_doc(const std::string& file, int64_t line, const std::string& what) {
  throw_invalid(file, "line " + std::to_string(line), what);
}

const json& field(const json& j, const char* key, const std::string& file, int64_t line) {
  if (!j.is_object() || !j.contains(key)) bad_doc(file, line, std::string("missing field '") + key + "'");
  return j[key];
}

std::string str_field(const json& j, const char* key, const std::string& file, int64_t line) {
  const json& v = field(j, key, file, line);
  if (!v.is_string()) bad_doc(file, line, std::string("field '") + key + "' is not a string");
  return v.get<std::string>();
}

std::vector<std::string> str_list(const json& v, const char* key, const std::string& file, int64_t line) {
  if (!v.is_array() || v.empty()) bad_doc(file, line, std::string("field '") + key + "' is not a list of strings");
  std::vector<std::string> out;
  for (const json& x : v) {
    if (!x.is_string()) bad_doc(file, line, std::string("field '") + key + "' is not a list of strings");
    out.push_back(x.get<std::string>());
  }
  return out;
}

// An int label, or a string of digits ("3", as HF hellaswag stores it).
int int_field(const json& j, const char* key, const std::string& file, int64_t line) {
  const json& v = field(j, key, file, line);
  if (v.is_number_integer()) return v.get<int>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (!s.empty() && s.size() < 4 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::stoi(s);
  }
  bad_doc(file, line, std::string("field '") + key + "' is not an integer label");
}

void check_gold(McExample& e, const std::string& file, int64_t line) {
  if (e.gold < 0 || size_t(e.gold) >= e.options())
    bad_doc(file, line, "the gold label " + std::to_string(e.gold) + " is not one of the " +
                            std::to_string(e.options()) + " options");
}

McExample hellaswag_doc(const json& j, const std::string& file, int64_t line) {
  const std::string ctx = str_field(j, "ctx_a", file, line) + " " + python_capitalize(str_field(j, "ctx_b", file, line));
  McExample e;
  e.queries = {hellaswag_preprocess(str_field(j, "activity_label", file, line) + ": " + ctx)};
  for (const std::string& end : str_list(field(j, "endings", file, line), "endings", file, line))
    e.choices.push_back(hellaswag_preprocess(end));
  e.gold = int_field(j, "label", file, line);
  return e;
}

McExample arc_doc(const json& j, const std::string& file, int64_t line) {
  McExample e;
  std::vector<std::string> labels;
  const json& q = field(j, "question", file, line);
  if (q.is_object()) {  // ARC-V1: {stem, choices: [{text, label}]}
    e.queries = {"Question: " + str_field(q, "stem", file, line) + "\nAnswer:"};
    const json& cs = field(q, "choices", file, line);
    if (!cs.is_array() || cs.empty()) bad_doc(file, line, "question.choices is not a list");
    for (const json& c : cs) {
      e.choices.push_back(str_field(c, "text", file, line));
      labels.push_back(str_field(c, "label", file, line));
    }
  } else {
    e.queries = {"Question: " + str_field(j, "question", file, line) + "\nAnswer:"};
    const json& cs = field(j, "choices", file, line);
    e.choices = str_list(field(cs, "text", file, line), "choices.text", file, line);
    labels = str_list(field(cs, "label", file, line), "choices.label", file, line);
  }
  if (labels.size() != e.choices.size()) bad_doc(file, line, "choices.text and choices.label differ in length");
  const std::string key = str_field(j, "answerKey", file, line);
  const auto it = std::find(labels.begin(), labels.end(), key);
  if (it == labels.end()) bad_doc(file, line, "answerKey '" + key + "' is not one of the choice labels");
  e.gold = int(it - labels.begin());
  return e;
}

McExample piqa_doc(const json& j, const std::string& file, int64_t line) {
  McExample e;
  e.queries = {"Question: " + str_field(j, "goal", file, line) + "\nAnswer:"};
  e.choices = {str_field(j, "sol1", file, line), str_field(j, "sol2", file, line)};
  e.gold = int_field(j, "label", file, line);
  return e;
}

McExample winogrande_doc(const json& j, const std::string& file, int64_t line) {
  const std::string s = str_field(j, "sentence", file, line);
  const size_t blank = s.find('_');
  if (blank == std::string::npos) bad_doc(file, line, "the sentence has no '_' blank");
  McExample e;
  for (const char* key : {"option1", "option2"}) e.queries.push_back(s.substr(0, blank) + str_field(j, key, file, line));
  e.choices = {py_strip(std::string_view(s).substr(blank + 1))};
  e.gold = int_field(j, "answer", file, line) - 1;
  return e;
}

McExample mmlu_doc(const json& j, const std::string& file, int64_t line) {
  McExample e;
  const std::vector<std::string> c = str_list(field(j, "choices", file, line), "choices", file, line);
  if (c.size() != 4) bad_doc(file, line, "mmlu needs exactly 4 choices, found " + std::to_string(c.size()));
  std::string q = py_strip(str_field(j, "question", file, line));
  for (size_t i = 0; i < 4; ++i) q += std::string("\n") + char('A' + i) + ". " + c[i];
  e.queries = {q + "\nAnswer:"};
  e.choices = {"A", "B", "C", "D"};
  e.subject = str_field(j, "subject", file, line);
  const json& a = field(j, "answer", file, line);
  if (a.is_string() && a.get<std::string>().size() == 1 && a.get<std::string>()[0] >= 'A' &&
      a.get<std::string>()[0] <= 'D')
    e.gold = a.get<std::string>()[0] - 'A';
  else
    e.gold = int_field(j, "answer", file, line);
  return e;
}

McExample json_doc(const McTaskInfo& t, const json& j, const std::string& file, int64_t line) {
  if (t.name == "hellaswag") return hellaswag_doc(j, file, line);
  if (t.name == "piqa") return piqa_doc(j, file, line);
  if (t.name == "winogrande") return winogrande_doc(j, file, line);
  if (t.name == "mmlu") return mmlu_doc(j, file, line);
  return arc_doc(j, file, line);
}

std::vector<std::string_view> split_lines(const std::string& text) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    size_t e = end;
    if (e > pos && text[e - 1] == '\r') --e;
    lines.emplace_back(text.data() + pos, e - pos);
    pos = end + 1;
  }
  return lines;
}

std::vector<McExample> read_jsonl(const McTaskInfo& t, const std::string& text, const std::string& file) {
  std::vector<McExample> docs;
  for_each_json_line(text, file, [&](const json& j, int64_t line) {
    McExample e = json_doc(t, j, file, line);
    check_gold(e, file, line);
    docs.push_back(std::move(e));
  });
  return docs;
}

// llama.cpp's layout: 6 lines a task (context, gold 0-3, four endings).
std::vector<McExample> read_hellaswag_text(const std::string& text, const std::string& file) {
  const std::vector<std::string_view> lines = split_lines(text);
  if (lines.size() % 6 != 0)
    throw_invalid(file, "", "a hellaswag text file has 6 lines per task; this one has " +
                                std::to_string(lines.size()) + " lines",
                  "pass llama.cpp's hellaswag_val_full.txt layout, or a .jsonl file of HF hellaswag rows");
  std::vector<McExample> docs;
  for (size_t i = 0; i < lines.size(); i += 6) {
    const std::string_view g = lines[i + 1];
    if (g.size() != 1 || g[0] < '0' || g[0] > '3')
      bad_doc(file, int64_t(i + 2), "expected the gold label 0-3, found '" + std::string(g) + "'");
    McExample e;
    e.queries = {std::string(lines[i])};
    for (size_t k = 2; k < 6; ++k) e.choices.emplace_back(lines[i + k]);
    e.gold = g[0] - '0';
    docs.push_back(std::move(e));
  }
  return docs;
}

bool is_jsonl_name(const std::filesystem::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".jsonl" || ext == ".json";
}

}  // namespace

const McTaskInfo* find_mc_task(std::string_view name) {
  for (const McTaskInfo& t : tasks())
    if (t.name == name) return &t;
  return nullptr;
}

const std::vector<std::string>& mc_task_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const McTaskInfo& t : tasks()) n.push_back(t.name);
    return n;
  }();
  return names;
}

std::string hellaswag_preprocess(std::string_view text) {
  std::string s = py_strip(text);
  s = py_replace(s, " [title]", ". ");
  s = drop_bracketed(s);
  return py_replace(s, "  ", " ");
}

std::string python_capitalize(std::string_view text) {
  if (text.empty()) return {};
  size_t i = 0;
  const char32_t first = text::next_codepoint(text, i);
  std::string out;
  text::append_utf8(out, static_cast<char32_t>(u_totitle(static_cast<UChar32>(first))));
  return out + text::unicode_lowercase(text.substr(i));
}

std::vector<McExample> load_mc_examples(const McTaskInfo& task, const std::filesystem::path& file) {
  const std::string text = io::read_text_file(file);
  std::vector<McExample> docs = (task.name == "hellaswag" && !is_jsonl_name(file))
                                    ? read_hellaswag_text(text, file.string())
                                    : read_jsonl(task, text, file.string());
  if (docs.empty()) throw_invalid(file.string(), "", "no " + task.name + " documents in the file");
  return docs;
}

std::vector<McRequestText> mc_requests(const McTaskInfo& task, const McExample& doc,
                                       const std::vector<const McExample*>& fewshot) {
  std::string prefix;
  if (task.name == "mmlu")
    prefix = "The following are multiple choice questions (with answers) about " +
             py_replace(doc.subject, "_", " ") + ".\n\n";
  for (const McExample* fs : fewshot) {
    const bool multi = fs->queries.size() > 1;
    prefix += multi ? fs->queries[size_t(fs->gold)] : fs->queries[0];
    prefix += ' ';
    prefix += multi ? fs->choices[0] : fs->choices[size_t(fs->gold)];
    prefix += "\n\n";
  }
  std::vector<McRequestText> out;
  for (size_t i = 0; i < doc.options(); ++i) {
    const std::string& q = doc.queries.size() > 1 ? doc.queries[i] : doc.queries[0];
    const std::string& c = doc.choices.size() > 1 ? doc.choices[i] : doc.choices[0];
    out.push_back({prefix + q, " " + c});
  }
  return out;
}

std::vector<std::vector<const McExample*>> choose_fewshot(const McTaskInfo& task,
                                                          const std::vector<McExample>& docs, size_t n,
                                                          const std::vector<McExample>& pool,
                                                          int num_fewshot, uint64_t seed) {
  n = std::min(n, docs.size());
  std::vector<std::vector<const McExample*>> out(n);
  if (num_fewshot <= 0) return out;
  const auto k = size_t(num_fewshot);
  PyRandom rnd(seed);
  for (size_t d = 0; d < n; ++d) {
    std::vector<const McExample*> candidates;
    for (const McExample& p : pool)
      if (task.name != "mmlu" || p.subject == docs[d].subject) candidates.push_back(&p);
    if (candidates.size() < k)
      throw_invalid("", "--num_fewshot",
                    "the few-shot pool has " + std::to_string(candidates.size()) + " documents" +
                        (task.name == "mmlu" ? " of subject '" + docs[d].subject + "'" : std::string()) +
                        ", fewer than --num_fewshot " + std::to_string(k),
                    "pass a larger --fewshot_dataset or a smaller --num_fewshot");
    if (task.sampler == FewshotSampler::kFirstN) {
      out[d].assign(candidates.begin(), candidates.begin() + std::ptrdiff_t(k));
    } else {
      for (uint64_t idx : rnd.sample(candidates.size(), k)) out[d].push_back(candidates[size_t(idx)]);
    }
  }
  return out;
}

}  // namespace qloom::eval
