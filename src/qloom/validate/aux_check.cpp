// Step 1 — auxiliary files.
#include <algorithm>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "qloom/validate/checks.h"
#include "qloom/validate/md5.h"
#include "qloom/validate/step_util.h"

namespace qloom::validate {

namespace fs = std::filesystem;
using detail::list_items;
using detail::plural;
using oj = nlohmann::ordered_json;

StepResult check_auxiliary_files(const CheckpointPair& pair, const ValidateOptions& opts) {
  StepResult r;
  r.number = 1;
  r.title = kAuxiliaryTitle;
  if (!pair.source()) return detail::skipped(std::move(r), "no source model given", "no_source");

  std::vector<std::string> files;
  for (const auto& f : pair.source()->aux_files())
    if (f != "config.json") files.push_back(f.string());  // config.json is step 3's

  std::vector<std::string> missing, differing_names;
  oj differing = oj::array();
  oj compared = oj::array();
  for (const auto& name : files) {
    const fs::path src = pair.source_dir() / name;
    const fs::path out = pair.quantized_dir() / name;
    std::error_code ec;
    if (!fs::is_regular_file(out, ec)) {  // follows symlinks, like the source listing
      missing.push_back(name);
      continue;
    }
    const uint64_t ssize = fs::file_size(src, ec);
    const uint64_t osize = ec ? 0 : fs::file_size(out, ec);
    oj entry = {{"file", name}, {"size", ssize}};
    if (ec) {
      differing_names.push_back(name + " (unreadable: " + ec.message() + ")");
      differing.push_back({{"file", name}, {"reason", "unreadable"}, {"error", ec.message()}});
      continue;
    }
    if (ssize != osize) {
      differing_names.push_back(name + " (size " + std::to_string(ssize) + " / " +
                                std::to_string(osize) + ")");
      differing.push_back({{"file", name},
                           {"reason", "size_mismatch"},
                           {"source_size", ssize},
                           {"quantized_size", osize}});
      continue;
    }
    std::string smd5, omd5;
    try {
      smd5 = md5_file_hex(src);
      omd5 = md5_file_hex(out);
    } catch (const std::exception& e) {
      differing_names.push_back(name + " (unreadable: " + describe_error(e) + ")");
      differing.push_back({{"file", name}, {"reason", "unreadable"}, {"error", describe_error(e)}});
      continue;
    }
    if (smd5 != omd5) {
      differing_names.push_back(name + " (MD5 " + smd5 + " / " + omd5 + ")");
      differing.push_back({{"file", name},
                           {"reason", "md5_mismatch"},
                           {"source_md5", smd5},
                           {"quantized_md5", omd5}});
      continue;
    }
    entry["md5"] = smd5;
    compared.push_back(std::move(entry));
  }

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
  r.data["mismatched"] = differing;
  list_items(r, "extra (not a failure)", "extra", extra, opts.max_listed);
  if (!pair.quantized()) r.data["extra"] = nullptr;  // not listed: no model dir to list
  r.data["identical"] = compared;

  const size_t identical = compared.size();
  if (missing.empty() && differing_names.empty()) {
    r.status = StepResult::kOk;
    r.summary = files.empty()
                    ? "the source has no auxiliary files besides config.json"
                    : "all " + plural(files.size(), "file", "files") +
                          " present and byte-identical (size and MD5)";
    return r;
  }
  r.status = StepResult::kFail;
  r.summary = std::to_string(missing.size()) + " missing, " +
              std::to_string(differing_names.size()) + " differing, " +
              std::to_string(identical) + " of " + std::to_string(files.size()) + " identical";
  return r;
}

}  // namespace qloom::validate
