// Evaluation data sets: the bundled offline copies under data/datasets/ and
// user files.
//
// Text data sets (ppl / kld):
//   - a file path: the whole file is one document, tokenized once;
//   - "wikitext2": the bundled wikitext-2-raw wiki.test.raw, turned into the
//     string Quark's (and GPTQ's) ppl code tokenizes:
//       testdata = load_dataset("wikitext", "wikitext-2-raw-v1", split="test")
//       tokenizer("\n\n".join(testdata["text"]))
//     (amd/Quark examples/torch/language_modeling/llm_eval/evaluation.py,
//     ppl_eval / eval_model). The HF wikitext builder yields one row per line
//     of the raw file, keeping the line's trailing "\n", and "" for a line
//     that is whitespace only (`if row.strip(): row else ""`). See
//     wikitext_hf_join().
//   - "tinystories": the bundled TinyStories-valid-first1000.txt (one document).
// GSM8K (gsm8k task): "gsm8k" = the bundled openai/grade-school-math
// test.jsonl (questions) and train.jsonl (few-shot pool); a .jsonl path
// replaces the test questions (the few-shot pool stays the bundled train).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/io/text_file.h"

namespace qloom::eval {

// Path of a bundled file under data/datasets/, e.g. "gsm8k/train.jsonl",
// found by io::require_bundled_data("datasets/" + relative) ($QLOOM_DATA_DIR,
// the source tree's data/ compiled in, <exe>/../share/qloom/data). Throws
// kNotFound naming the expected file and every place looked.
std::filesystem::path bundled_file(const std::string& relative);

// Known data set names, for messages: wikitext2, tinystories, gsm8k.
const std::vector<std::string>& known_dataset_names();

// "\n\n".join(rows) where rows are the HF wikitext rows of `raw`: each line
// (split after '\n', which it keeps; "\r\n" and a lone "\r" read as "\n", as
// Python's universal-newline text mode does) becomes a row, or "" when the line
// is only whitespace (ASCII whitespace; the raw files hold no other kind). A
// final line without '\n' is a row too; no empty row follows a final '\n'.
std::string wikitext_hf_join(std::string_view raw);

struct TextDataset {
  std::string name;  // as given: "wikitext2" or the path
  std::string text;  // the one document to tokenize
  std::string file;  // the file read (for a bundled name: where it was found)
};

// `spec`: a known name or a file path. Throws kNotFound (missing file, naming
// it), kInvalidInput for an unknown name that is not a file (listing the
// known names), or for gsm8k (not a text data set).
TextDataset load_text_dataset(const std::string& spec);

struct Gsm8kDoc {
  std::string question;
  std::string answer;  // full solution text ending "#### <number>"
};

// Calls `on_row(value, line_number)` for each line of `text` (a JSON-lines
// file read from `file`) in order, skipping lines of ASCII whitespace only;
// line numbers count from 1. Throws kInvalidInput naming the file and line
// for a line that is not JSON.
void for_each_json_line(const std::string& text, const std::string& file,
                        const std::function<void(const nlohmann::json& row, int64_t line)>& on_row);

// One JSON object per line with string keys "question" and "answer" (blank
// lines skipped). Throws kInvalidInput naming the file and line.
std::vector<Gsm8kDoc> load_gsm8k_jsonl(const std::filesystem::path& path);

// Reads a whole file (io/text_file.h). Throws kNotFound when it does not exist.
using io::read_text_file;

}  // namespace qloom::eval
