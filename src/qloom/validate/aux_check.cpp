// Step 1 — auxiliary files.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include <fstream>
#include <sstream>

#include "qloom/validate/checks.h"
#include "qloom/validate/drift.h"
#include "qloom/validate/md5.h"
#include "qloom/validate/step_util.h"

namespace qloom::validate {

namespace fs = std::filesystem;
using detail::list_items;
using detail::plural;
using oj = nlohmann::ordered_json;

namespace {

// The file parsed as JSON; nullopt when it cannot be read or is not JSON.
std::optional<nlohmann::json> read_json(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// Both directories hold a tokenizer.json and the two are equal as JSON.
bool same_tokenizer_json(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (!fs::is_regular_file(a / "tokenizer.json", ec) || !fs::is_regular_file(b / "tokenizer.json", ec))
    return false;
  const auto ja = read_json(a / "tokenizer.json"), jb = read_json(b / "tokenizer.json");
  return ja && jb && *ja == *jb;
}

// A differing .json file compared semantically (drift.h); nullopt for other
// files and for files that do not parse.
std::optional<Comparison> json_comparison(const std::string& name, const fs::path& src,
                                          const fs::path& out, bool same_tok) {
  if (!name.ends_with(".json")) return std::nullopt;
  const auto a = read_json(src), b = read_json(out);
  if (!a || !b) return std::nullopt;
  return compare_json_files(name, *a, *b, same_tok);
}

oj real_differences_json(const std::vector<RealDifference>& real, size_t cap) {
  oj a = oj::array();
  for (size_t i = 0; i < real.size() && i < cap; ++i) {
    oj d = {{"key", real[i].path}};
    d["source"] = real[i].source ? oj(*real[i].source) : oj();
    d["quantized"] = real[i].quantized ? oj(*real[i].quantized) : oj();
    a.push_back(std::move(d));
  }
  return a;
}

std::string difference_line(const RealDifference& d) {
  const auto side = [](const std::optional<nlohmann::json>& v) {
    return v ? detail::json_brief(*v) : std::string("(absent)");
  };
  return d.path + ": " + side(d.source) + " / " + side(d.quantized);
}

struct AuxTally {
  std::vector<std::string> missing, differing_names;
  oj differing = oj::array();
  oj compared = oj::array();
  std::vector<std::pair<std::string, Comparison>> drift;  // benign, by file
};

void unreadable(AuxTally& t, const std::string& name, const std::string& error) {
  t.differing_names.push_back(name + " (unreadable: " + error + ")");
  t.differing.push_back({{"file", name}, {"reason", "unreadable"}, {"error", error}});
}

// One source file against its copy: identical, benign drift (a .json file
// whose differences drift.h explains), or differing.
void compare_file(const std::string& name, const fs::path& src, const fs::path& out,
                  bool same_tok, size_t max_listed, AuxTally& t) {
  std::error_code ec;
  if (!fs::is_regular_file(out, ec)) {  // follows symlinks, like the source listing
    t.missing.push_back(name);
    return;
  }
  const uint64_t ssize = fs::file_size(src, ec);
  const uint64_t osize = ec ? 0 : fs::file_size(out, ec);
  if (ec) return unreadable(t, name, ec.message());
  std::string smd5, omd5;
  try {
    smd5 = md5_file_hex(src);
    omd5 = md5_file_hex(out);
  } catch (const std::exception& e) {
    return unreadable(t, name, describe_error(e));
  }
  if (ssize == osize && smd5 == omd5) {
    t.compared.push_back({{"file", name}, {"size", ssize}, {"md5", smd5}});
    return;
  }
  auto cmp = json_comparison(name, src, out, same_tok);
  if (cmp && cmp->real.empty()) {
    t.drift.emplace_back(name, std::move(*cmp));
    return;
  }
  oj entry = {{"file", name}};
  std::string line;
  if (ssize != osize) {
    line = name + " (size " + std::to_string(ssize) + " / " + std::to_string(osize);
    entry["reason"] = "size_mismatch";
    entry["source_size"] = ssize;
    entry["quantized_size"] = osize;
  } else {
    line = name + " (MD5 " + smd5 + " / " + omd5;
    entry["reason"] = "md5_mismatch";
    entry["source_md5"] = smd5;
    entry["quantized_md5"] = omd5;
  }
  if (cmp) {
    line += "; " + difference_line(cmp->real.front());
    if (cmp->real.size() > 1) line += " … and " + std::to_string(cmp->real.size() - 1) + " more";
    entry["differences"] = real_differences_json(cmp->real, 10 * max_listed);
    entry["benign_drift"] = oj::array();
    for (const auto& d : cmp->drift) entry["benign_drift"].push_back(drift_json(d));
  }
  t.differing_names.push_back(line + ")");
  t.differing.push_back(std::move(entry));
}

}  // namespace

StepResult check_auxiliary_files(const CheckpointPair& pair, const ValidateOptions& opts) {
  StepResult r;
  r.number = 1;
  r.title = kAuxiliaryTitle;
  if (!pair.source()) return detail::skipped(std::move(r), "no source model given", "no_source");

  std::vector<std::string> files;
  for (const auto& f : pair.source()->aux_files())
    if (f != "config.json") files.push_back(f.string());  // config.json is step 3's

  AuxTally t;
  const bool same_tok = same_tokenizer_json(pair.source_dir(), pair.quantized_dir());
  for (const auto& name : files)
    compare_file(name, pair.source_dir() / name, pair.quantized_dir() / name, same_tok,
                 opts.max_listed, t);
  auto& missing = t.missing;
  auto& differing_names = t.differing_names;

  // Extra: top-level non-weight files only the quantized side has (not a
  // failure: an exporter may add a README or a recipe).
  std::vector<std::string> extra;
  if (pair.quantized()) {
    const std::set<std::string> known(files.begin(), files.end());
    for (const auto& f : pair.quantized()->aux_files())
      if (f != "config.json" && !known.count(f.string())) extra.push_back(f.string());
  }

  r.details.push_back("missing: " + std::to_string(missing.size()) +
                      ", mismatched: " + std::to_string(differing_names.size()) +
                      ", extra: " + std::to_string(extra.size()));
  r.data["source_file_count"] = files.size();
  list_items(r, "missing", "missing", missing, opts.max_listed);
  list_items(r, "mismatched", "mismatched_files", differing_names, opts.max_listed);
  r.data["mismatched"] = t.differing;
  list_items(r, "extra (not a failure)", "extra", extra, opts.max_listed);
  if (!pair.quantized()) r.data["extra"] = nullptr;  // not listed: no model dir to list
  r.data["identical"] = t.compared;
  std::vector<std::string> drift_files;
  oj benign = oj::array();
  for (const auto& [name, cmp] : t.drift) {
    drift_files.push_back(name);
    benign.push_back({{"file", name}, {"changes", detail::add_drift(r, cmp.drift, opts.max_listed, name)}});
  }
  r.data["benign_drift"] = std::move(benign);
  r.data["benign_drift_files"] = drift_files;

  const size_t identical = t.compared.size();
  if (missing.empty() && differing_names.empty()) {
    r.status = StepResult::kOk;
    r.summary = files.empty()
                    ? "the source has no auxiliary files besides config.json"
                : drift_files.empty()
                    ? "all " + plural(files.size(), "file", "files") +
                          " present and byte-identical (size and MD5)"
                    : "all " + plural(files.size(), "file", "files") + " present; " +
                          std::to_string(identical) + " byte-identical, benign drift in " +
                          detail::join(drift_files, ", ");
    return r;
  }
  r.status = StepResult::kFail;
  r.summary = std::to_string(missing.size()) + " missing, " +
              std::to_string(differing_names.size()) + " differing, " +
              std::to_string(identical) + " of " + std::to_string(files.size()) + " identical";
  if (!drift_files.empty()) r.summary += ", benign drift in " + detail::join(drift_files, ", ");
  return r;
}

}  // namespace qloom::validate
