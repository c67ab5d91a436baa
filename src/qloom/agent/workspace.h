// The agent's workspace (seed 000 §9): the only directory `qloom run` writes
// besides the quantized model. Every file is written atomically (temp +
// rename), JSON artifacts are validated against their schema before they are
// written and when they are read, and the file names are the seed's.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace qloom::agent {

// Phases in order (seed 000 §3), as last_phase.txt spells them.
inline constexpr std::string_view kPhaseNames[] = {"pre",  "intake", "plan",     "manifest",
                                                   "exec", "export", "validate", "eval"};

class Workspace {
 public:
  explicit Workspace(std::filesystem::path dir);
  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path path(std::string_view name) const { return dir_ / std::string(name); }

  // Creates the directory (and parents) if needed and proves it writable by
  // writing and removing a probe file. Throws Error(kIo) naming the dir.
  void ensure_writable() const;

  // last_phase.txt: one token, written before the phase starts.
  void set_phase(std::string_view phase) const;
  std::string last_phase() const;  // "" when absent

  bool exists(std::string_view name) const;
  void remove(std::string_view name) const;  // no error when absent
  // Renames `name` to `new_name` (replacing it) when it exists.
  void rename(std::string_view name, std::string_view new_name) const;
  void write_text(std::string_view name, std::string_view text) const;
  std::optional<std::string> read_text(std::string_view name) const;

  // Validates against schemas/<schema>.schema.json, then writes dump(2).
  void write_json(std::string_view name, const nlohmann::ordered_json& j, std::string_view schema) const;
  // Parses and validates; Error(kNotFound) when absent, kInvalidInput when
  // not JSON or not schema-valid (naming the file).
  nlohmann::ordered_json read_json(std::string_view name, std::string_view schema) const;

  // blocked.md: "outcome_id: <id>\n<reason>\n" (seed 000 §7).
  void write_blocked(std::string_view outcome_id, const std::string& reason) const;

  // requantize_attempts.txt (the runner's counter): 0 when absent.
  int requantize_attempts() const;
  void set_requantize_attempts(int n) const;

 private:
  std::filesystem::path dir_;
};

}  // namespace qloom::agent
