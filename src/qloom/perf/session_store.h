// The session directory of `qloom perf` (seed 004's quant-perf session): the
// orchestrator lock, state.json and progress.json.
//
//   <session>/orchestrator.lock  flock(LOCK_EX | LOCK_NB) held while a
//                                 process orchestrates; a second one is
//                                 refused (kUsage) naming the holder's pid.
//   <session>/state.json          everything the session knows; the one
//                                 source a resume reads. Validated against
//                                 schemas/perf_state.schema.json on every
//                                 save, written with io::write_file_atomic
//                                 (temp + rename), so a kill -9 at any moment
//                                 leaves the previous or the new state.
//   <session>/progress.json       a merge-updated view for `qloom perf
//                                 status`: stage, stage_detail, best_so_far,
//                                 warnings (the last 50), started_at,
//                                 updated_at, elapsed_seconds.
// Not thread-safe: one orchestrator thread owns a SessionStore.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "qloom/perf/utc_time.h"

namespace qloom::perf {

class SessionStore {
 public:
  // Creates `dir` when missing and takes its lock. Throws kUsage when another
  // process holds the lock, kIo when the directory cannot be created.
  explicit SessionStore(std::filesystem::path dir);
  ~SessionStore();
  SessionStore(const SessionStore&) = delete;
  SessionStore& operator=(const SessionStore&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path path(std::string_view relative) const { return dir_ / relative; }

  // state.json: whether one exists; load it (validated; kInvalidInput naming
  // the field otherwise); save it (validated first: a violation is a bug,
  // kInternal).
  bool has_state() const;
  nlohmann::ordered_json& state() { return state_; }
  void load();
  void save();

  // progress.json: merges `update` (object keys replace), sets updated_at and
  // elapsed_seconds (since started_at) and writes it.
  void progress(const nlohmann::ordered_json& update);
  // Appends a warning to progress.json (the last 50 are kept) and to the
  // state's warnings list (all), then saves both.
  void warn(const std::string& message);

 private:
  std::filesystem::path dir_;
  int lock_fd_ = -1;
  nlohmann::ordered_json state_;
  nlohmann::ordered_json progress_;
};

// Reads a session's state.json / progress.json without taking the lock
// (`qloom perf status` / `report` on a running session). Throws kNotFound
// naming the file when it is missing, kInvalidInput when it is malformed.
nlohmann::ordered_json read_session_file(const std::filesystem::path& session_dir, std::string_view name);

}  // namespace qloom::perf
