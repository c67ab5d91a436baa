#include "qloom/quant/calib_data.h"

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/engine/tokenizer.h"
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

CalibrationData load_calibration_data(const fs::path& model_dir, const CalibrationRequest& req) {
  if (req.num_samples == 0) throw Error(ErrorKind::kUsage, "", "--num_calib_data", "must be at least 1");
  if (req.seq_len == 0) throw Error(ErrorKind::kUsage, "", "--seq_len", "must be at least 1");
  CalibrationData out;
  fs::path file;
  bool lines_are_documents = false;
  const std::string& d = req.dataset;
  std::error_code ec;
  if (d.empty() || d == "default") {
    file = io::require_bundled_data(kDefaultSample, "the default calibration sample");
    lines_are_documents = true;
  } else if (fs::is_regular_file(d, ec)) {
    file = d;
  } else if (d == "c4") {
    // The bundled sample is a slice of c4 (exllamav2's standard calibration text).
    file = io::require_bundled_data(kDefaultSample, "the c4 calibration sample");
    lines_are_documents = true;
  } else if (d.find('/') == std::string::npos && d.find('.') == std::string::npos) {
    // A Quark data set name (pileval, wikitext, ...): a local jsonl copy, or an
    // error naming where it was looked for.
    std::string rel = "calibration/";
    rel += d;
    rel += ".jsonl";
    const char* env = std::getenv("QLOOM_DATA_DIR");
    const fs::path local = fs::path(env != nullptr && *env != '\0' ? env : "$QLOOM_DATA_DIR") / rel;
    if (env != nullptr && *env != '\0' && fs::is_regular_file(local, ec)) {
      file = local;
    } else {
      std::string msg = "calibration data set '";
      msg += d;
      msg += "' is not bundled with qloom and no local copy was found at ";
      msg += local.string();
      throw Error(ErrorKind::kNotFound, local.string(), "--dataset", msg,
                  "put a copy there (one {\"text\": ...} object per line), pass --dataset FILE.jsonl|FILE.txt, "
                  "or omit --dataset (or pass c4) for the bundled c4 sample");
    }
  } else {
    throw Error(ErrorKind::kNotFound, d, "--dataset", "no such calibration data file",
                "pass an existing .jsonl / .txt file, or omit --dataset for the bundled sample");
  }
  out.source = file.string();

  const engine::Tokenizer tok = engine::Tokenizer::load(model_dir);
  std::vector<std::string> docs;
  if (file.extension() == ".jsonl") docs = jsonl_texts(file);
  else if (lines_are_documents) docs = split_lines(io::read_text_file(file));
  else docs.push_back(io::read_text_file(file));

  if (docs.size() == 1) {
    // One long document: consecutive windows of seq_len tokens.
    const std::vector<int32_t> ids = tok.encode(docs[0], true);
    for (size_t pos = 0; pos < ids.size() && out.samples.size() < req.num_samples; pos += req.seq_len) {
      const size_t end = std::min(ids.size(), pos + static_cast<size_t>(req.seq_len));
      out.samples.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(pos), ids.begin() + static_cast<std::ptrdiff_t>(end));
    }
  } else {
    for (const std::string& doc : docs) {
      if (out.samples.size() >= req.num_samples) break;
      std::vector<int32_t> ids = tok.encode(doc, true);
      if (ids.empty()) continue;
      if (ids.size() > req.seq_len) ids.resize(req.seq_len);
      out.samples.push_back(std::move(ids));
    }
  }
  if (out.samples.empty())
    throw Error(ErrorKind::kInvalidInput, out.source, "", "the calibration data set holds no text", "pass another --dataset");
  for (const auto& s : out.samples) out.tokens += s.size();
  if (out.samples.size() < req.num_samples)
    out.notes.push_back("asked for " + std::to_string(req.num_samples) + " calibration samples; the data set gave " +
                        std::to_string(out.samples.size()));
  return out;
}

}  // namespace qloom::quant
