#include "qloom/quant/calib_data.h"

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/text/tokenizer.h"
#include "qloom/io/data_files.h"
#include "qloom/io/text_file.h"

namespace qloom::quant {
namespace fs = std::filesystem;
namespace {

constexpr const char* kDefaultSample = "datasets/calibration/c4.utf8";

bool blank(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> docs;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!blank(line)) docs.push_back(std::move(line));
    pos = nl + 1;
  }
  return docs;
}

std::vector<std::string> jsonl_texts(const fs::path& p) {
  std::vector<std::string> docs;
  std::ifstream in(p);
  if (!in) throw Error(ErrorKind::kNotFound, p.string(), "", "cannot open the calibration data set", "check --dataset");
  std::string line;
  uint64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (blank(line)) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("text") || !j["text"].is_string())
      throw Error(ErrorKind::kInvalidInput, p.string(), "line " + std::to_string(lineno),
                  "expected a JSON object with a string field \"text\"", "one {\"text\": ...} object per line");
    docs.push_back(j["text"].get<std::string>());
  }
  return docs;
}

}  // namespace

namespace {

// The file of a Quark data set name (pileval, wikitext, ...): a local jsonl
// copy, or an error naming every place looked.
fs::path named_set_file(const std::string& name) {
  const std::string rel = "datasets/calibration/" + name + ".jsonl";
  if (auto p = io::find_bundled_data(rel)) return *p;
  std::vector<fs::path> tried = io::bundled_data_candidates(rel);
  const char* env = std::getenv("QLOOM_DATA_DIR");
  const fs::path legacy = fs::path(env != nullptr && *env != '\0' ? env : "$QLOOM_DATA_DIR") / "calibration" /
                          (name + ".jsonl");
  std::error_code ec;
  if (env != nullptr && *env != '\0' && fs::is_regular_file(legacy, ec)) return legacy;
  tried.push_back(legacy);
  std::string list;
  for (const auto& t : tried) {
    if (!list.empty()) list += ", ";
    list += t.string();
  }
  throw Error(ErrorKind::kNotFound, legacy.string(), "--dataset",
              "calibration data set '" + name + "' is not bundled with qloom and no local copy was found (looked in: " +
                  list + ")",
              "put a copy at one of those paths (one {\"text\": ...} object per line), pass --dataset "
              "FILE.jsonl|FILE.txt, or omit --dataset (or pass c4) for the bundled c4 sample");
}

fs::path dataset_file(const std::string& d) {
  std::error_code ec;
  if (d.empty() || d == "default" || d == "c4")
    return io::require_bundled_data(kDefaultSample, "the bundled c4 calibration sample");
  if (fs::is_regular_file(d, ec)) return d;
  if (d.find('/') == std::string::npos && d.find('.') == std::string::npos) return named_set_file(d);
  throw Error(ErrorKind::kNotFound, d, "--dataset", "no such calibration data file",
              "pass an existing .jsonl / .txt file, or omit --dataset for the bundled sample");
}

}  // namespace

std::vector<std::string> calibration_documents(const fs::path& file) {
  if (file.extension() == ".jsonl") return jsonl_texts(file);
  return split_lines(io::read_text_file(file));
}

CalibrationData load_calibration_data(const fs::path& model_dir, const CalibrationRequest& req) {
  if (req.num_samples == 0) throw Error(ErrorKind::kUsage, "", "--num_calib_data", "must be at least 1");
  if (req.seq_len == 0) throw Error(ErrorKind::kUsage, "", "--seq_len", "must be at least 1");
  CalibrationData out;
  const fs::path file = dataset_file(req.dataset);
  out.source = file.string();
  const text::Tokenizer tok = text::Tokenizer::load(model_dir);
  for (const std::string& doc : calibration_documents(file)) {
    if (out.samples.size() >= req.num_samples) break;
    std::vector<int32_t> ids = tok.encode(doc, true);
    if (ids.empty()) continue;
    if (ids.size() > req.seq_len) ids.resize(req.seq_len);
    out.samples.push_back(std::move(ids));
  }
  if (out.samples.empty())
    throw Error(ErrorKind::kInvalidInput, out.source, "", "the calibration data set holds no text", "pass another --dataset");
  for (const auto& s : out.samples) out.tokens += s.size();
  if (out.samples.size() < req.num_samples)
    out.notes.push_back("asked for " + std::to_string(req.num_samples) + " calibration samples; the data set has " +
                        std::to_string(out.samples.size()) + " non-blank documents (a sample is one document)");
  return out;
}

}  // namespace qloom::quant
