// baseline_health: is the base model good enough on the gate metric for a
// relative accuracy gap against it to mean anything? `qloom perf` asks once
// per session (state.json "baseline_reference"); a base_unhealthy session
// stays terminal unless --recheck-baseline (the caller passes recheck).
//
// The score is cached per runtime fingerprint: sha256 over the canonical JSON
// of fingerprint_inputs() —
//   qloom: version, git commit (git_commit.h), build type, compiler, build
//          flags (build_info.h) and the
//          kernels' ISA (core/convert.h best_isa())
//   model: sha256 of config.json's bytes; per *.safetensors file its size and
//          the sha256 of its header (8-byte length + JSON); the sha256 of a
//          *.safetensors.index.json (the weight bytes are not read: a file
//          rewritten with the same header and size keeps its fingerprint)
//   task, metric, dataset name and the sha256 of the data set's files
//          (gsm8k: also the few-shot pool), the effective limit, seq_len,
//          protocol, max_gen_toks, the tokenizer files' sha256, and server /
//          served_model when scored through a server.
// The model directory's path is not part of it (a moved copy still hits).
// Cache file: cache_dir/<fingerprint>.json, "qloom-perf-baseline-cache/1":
// {format, fingerprint, inputs, task_score, eval_report, samples} — the
// TaskScore with its per-sample file, so a hit rebuilds out_dir (the files
// score_task writes) without running the model. recheck ignores the cache
// and re-runs (then rewrites the cache). A cache file that cannot be read or
// does not validate is reported on `log` and re-evaluated.
//
// Health:
//   higher is better (gsm8k, multiple choice): healthy iff score >= floor
//     (floor in [0, 1], else Error kUsage naming --baseline-floor)
//   perplexity: healthy iff finite and < the model's vocabulary size
//     (config.json vocab_size, or the tokenizer's): better than guessing
//     uniformly; floor = null (not applicable, said in reason)
//   kld: the base model is the reference (KLD 0): healthy, floor = null.
// The base model's TaskScore for accuracy_gate's gate() is
// load_task_score(out_dir).
//
// Errors: what score_task throws; kUsage for a bad floor or empty paths;
// kIo when the cache or out_dir cannot be written; kInvalidInput /
// kNotFound for an unreadable model directory.
// Thread-safety: no shared state; concurrent calls for the same fingerprint
// both evaluate and the last cache write wins (each write is atomic).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "qloom/perf/task_score.h"

namespace qloom::perf {

struct BaselineHealth {
  std::string fingerprint;  // 64 lowercase hex digits
  std::string task, metric;
  double score = 0, stderr_ = 0;
  int64_t n = 0;
  std::optional<double> floor;  // nullopt: not applicable (perplexity, kld)
  bool healthy = false;
  std::string reason;
  bool cached = false;        // the score came from the cache, the model was not run
  std::string evaluated_at;   // when the model was scored (the cached run's time on a hit)
  std::filesystem::path samples_path;  // out_dir/samples.json
};

// What the fingerprint covers (see above), as canonical JSON.
nlohmann::ordered_json fingerprint_inputs(const std::filesystem::path& model_dir, const GateSpec& spec);
// sha256 of fingerprint_inputs(...).dump().
std::string baseline_fingerprint(const std::filesystem::path& model_dir, const GateSpec& spec);

BaselineHealth check_baseline(const std::filesystem::path& model_dir, const GateSpec& spec, double floor,
                              const std::filesystem::path& cache_dir, bool recheck,
                              const std::filesystem::path& out_dir, std::ostream* log);

// JSON keys in this order: fingerprint, task, metric, score, stderr, n,
// floor (null when not applicable), healthy, reason, cached, evaluated_at,
// samples_path. from_json throws kInvalidInput naming `file` and the field.
nlohmann::ordered_json to_json(const BaselineHealth& h);
BaselineHealth baseline_health_from_json(const nlohmann::json& j, const std::string& file);

}  // namespace qloom::perf
