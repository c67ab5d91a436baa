#include "qloom/eval/datasets.h"

#include <algorithm>

#include <system_error>

#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/io/data_files.h"

namespace qloom::eval {
namespace fs = std::filesystem;

namespace {

std::string join_names() {
  std::string s;
  for (const std::string& n : known_dataset_names()) {
    if (!s.empty()) s += ", ";
    s += n;
  }
  return s;
}

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

}  // namespace

fs::path bundled_file(const std::string& relative) {
  return io::require_bundled_data("datasets/" + relative, "data/datasets/" + relative);
}

const std::vector<std::string>& known_dataset_names() {
  static const std::vector<std::string> names = {"wikitext2", "tinystories", "gsm8k"};
  return names;
}

std::string wikitext_hf_join(std::string_view raw) {
  std::string out;
  out.reserve(raw.size() + raw.size() / 8);
  bool first = true;
  size_t i = 0;
  while (i < raw.size()) {
    // One line, with its terminator normalised to "\n" (universal newlines).
    std::string line;
    while (i < raw.size()) {
      const char c = raw[i++];
      if (c == '\n') {
        line += '\n';
        break;
      }
      if (c == '\r') {
        if (i < raw.size() && raw[i] == '\n') ++i;
        line += '\n';
        break;
      }
      line += c;
    }
    bool blank = true;
    for (char c : line)
      if (!is_ascii_space(c)) {
        blank = false;
        break;
      }
    if (!first) out += "\n\n";
    first = false;
    if (!blank) out += line;
  }
  return out;
}

TextDataset load_text_dataset(const std::string& spec) {
  TextDataset ds;
  ds.name = spec;
  if (spec == "wikitext2") {
    ds.file = bundled_file("wikitext-2-raw/wiki.test.raw").string();
    ds.text = wikitext_hf_join(read_text_file(ds.file));
    return ds;
  }
  if (spec == "tinystories") {
    ds.file = bundled_file("tinystories/TinyStories-valid-first1000.txt").string();
    ds.text = read_text_file(ds.file);
    return ds;
  }
  if (spec == "gsm8k")
    throw Error(ErrorKind::kUsage, "", "--dataset", "gsm8k is not a text data set",
                "use it with --task gsm8k; ppl/kld take wikitext2, tinystories or a text file");
  std::error_code ec;
  if (!fs::exists(spec, ec)) {
    if (spec.find('/') == std::string::npos && spec.find('.') == std::string::npos)
      throw Error(ErrorKind::kUsage, "", "--dataset", "unknown data set name '" + spec + "'",
                  "known data sets: " + join_names() + "; or pass a path to a text file");
    throw_not_found(spec, "", "data set file does not exist",
                    "pass an existing text file, or one of: " + join_names());
  }
  if (fs::is_directory(spec, ec))
    throw_invalid(spec, "", "data set path is a directory", "pass a text file");
  ds.text = read_text_file(spec);
  ds.file = spec;
  return ds;
}

void for_each_json_line(const std::string& text, const std::string& file,
                        const std::function<void(const nlohmann::json& row, int64_t line)>& on_row) {
  size_t pos = 0;
  int64_t line_no = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (std::all_of(line.begin(), line.end(), is_ascii_space)) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw_invalid(file, "line " + std::to_string(line_no), std::string("not a JSON object: ") + e.what());
    }
    on_row(j, line_no);
  }
}

std::vector<Gsm8kDoc> load_gsm8k_jsonl(const fs::path& path) {
  std::vector<Gsm8kDoc> docs;
  for_each_json_line(read_text_file(path), path.string(), [&](const nlohmann::json& j, int64_t line) {
    if (!j.is_object() || !j.contains("question") || !j.contains("answer") || !j["question"].is_string() ||
        !j["answer"].is_string())
      throw_invalid(path.string(), "line " + std::to_string(line),
                    "expected an object with string keys question and answer");
    docs.push_back({j["question"].get<std::string>(), j["answer"].get<std::string>()});
  });
  if (docs.empty()) throw_invalid(path.string(), "", "no questions in the file");
  return docs;
}

}  // namespace qloom::eval
