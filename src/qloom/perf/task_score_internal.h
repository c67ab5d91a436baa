// Internals shared by task_score.cpp and baseline_health.cpp (not for other
// callers): JSON field readers, the score-directory writer, and the hashes
// of a gate's inputs. Same errors and thread-safety as task_score.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/perf/task_score.h"

namespace qloom::perf {

// j[key] as T; Error kInvalidInput naming `file` and `key` when missing or of another type.
template <class T>
T field(const nlohmann::json& j, const std::string& key, const std::string& file) {
  if (!j.contains(key)) throw Error(ErrorKind::kInvalidInput, file, key, "missing");
  const nlohmann::json& v = j[key];
  bool ok = false;
  if constexpr (std::is_same_v<T, std::string>) ok = v.is_string();
  else if constexpr (std::is_same_v<T, bool>) ok = v.is_boolean();
  else if constexpr (std::is_integral_v<T>) ok = v.is_number_integer();
  else ok = v.is_number();
  if (!ok) throw Error(ErrorKind::kInvalidInput, file, key, std::string("has the wrong type (") + v.type_name() + ")");
  return v.get<T>();
}

// A string or null ("" for null).
inline std::string nullable_string(const nlohmann::json& j, const std::string& key, const std::string& file) {
  if (j.contains(key) && j[key].is_null()) return {};
  return field<std::string>(j, key, file);
}

// Writes out_dir atomically (replacing it): samples.json, score.json and,
// when given, eval_report.json. Returns `score` with samples_path set.
TaskScore publish_task_score(const std::filesystem::path& out_dir, const nlohmann::ordered_json& samples,
                             TaskScore score, const nlohmann::json* eval_report);

// The files a metric reads (data set, gsm8k's few-shot pool) and one sha256 over their bytes.
std::vector<std::filesystem::path> dataset_files(const GateMetric& m);
std::string dataset_sha256(const GateMetric& m);
// sha256 over the tokenizer files (io::is_tokenizer_file) of `dir`: names and bytes, sorted by name.
std::string tokenizer_sha256(const std::filesystem::path& dir);
// The directory the run's tokenizer comes from (run_eval's rule).
std::filesystem::path tokenizer_dir_of(const GateSpec& spec, const std::filesystem::path& model_dir);
std::string absolute_dir(const std::filesystem::path& p);
// score and stderr of one side's headline values (see task_score.h).
std::pair<double, double> score_of_samples(const std::string& task, const std::vector<double>& values);

}  // namespace qloom::perf
