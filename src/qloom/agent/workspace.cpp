#include "qloom/agent/workspace.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include "qloom/core/strings.h"
#include "qloom/agent/artifact_schema.h"
#include "qloom/core/error.h"
#include "qloom/io/atomic_dir.h"

namespace qloom::agent {
namespace fs = std::filesystem;

namespace {
}  // namespace

Workspace::Workspace(fs::path dir) : dir_(std::move(dir)) {}

void Workspace::ensure_writable() const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec)
    throw Error(ErrorKind::kIo, dir_.string(), "", "cannot create the workspace: " + ec.message(),
                "pass a --workspace directory you can write to");
  if (!fs::is_directory(dir_, ec))
    throw Error(ErrorKind::kIo, dir_.string(), "", "the workspace exists and is not a directory",
                "pass a --workspace directory");
  const fs::path probe = dir_ / ".qloom-write-probe";
  {
    std::ofstream out(probe, std::ios::binary | std::ios::trunc);
    if (!out || !(out << "probe") || !(out.flush()))
      throw Error(ErrorKind::kIo, dir_.string(), "",
                  std::string("the workspace is not writable: ") + std::strerror(errno),
                  "fix its permissions or pass another --workspace");
  }
  fs::remove(probe, ec);
}

void Workspace::set_phase(std::string_view phase) const { write_text("last_phase.txt", std::string(phase) + "\n"); }

std::string Workspace::last_phase() const {
  auto t = read_text("last_phase.txt");
  return t ? trim(*t) : std::string();
}

bool Workspace::exists(std::string_view name) const {
  std::error_code ec;
  return fs::exists(path(name), ec);
}

void Workspace::remove(std::string_view name) const {
  std::error_code ec;
  fs::remove(path(name), ec);
  if (ec) throw Error(ErrorKind::kIo, path(name).string(), "", "cannot remove: " + ec.message(), "check permissions");
}

void Workspace::rename(std::string_view name, std::string_view new_name) const {
  if (!exists(name)) return;
  std::error_code ec;
  fs::rename(path(name), path(new_name), ec);
  if (ec)
    throw Error(ErrorKind::kIo, path(name).string(), "", "cannot rename to " + std::string(new_name) + ": " + ec.message(),
                "check permissions");
}

void Workspace::write_text(std::string_view name, std::string_view text) const {
  io::write_file_atomic(path(name), text);
}

std::optional<std::string> Workspace::read_text(std::string_view name) const {
  std::ifstream in(path(name), std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Workspace::write_json(std::string_view name, const nlohmann::ordered_json& j, std::string_view schema) const {
  require_valid_artifact(schema, nlohmann::json(j), path(name));
  write_text(name, j.dump(2) + "\n");
}

nlohmann::ordered_json Workspace::read_json(std::string_view name, std::string_view schema) const {
  auto text = read_text(name);
  if (!text) throw_not_found(path(name).string(), "", "the artifact is missing", "re-run the phase that writes it");
  auto j = nlohmann::ordered_json::parse(*text, nullptr, false);
  if (j.is_discarded()) throw_invalid(path(name).string(), "", "not valid JSON", "re-run the phase that writes it");
  require_valid_artifact(schema, nlohmann::json(j), path(name));
  return j;
}

void Workspace::write_blocked(std::string_view outcome_id, const std::string& reason) const {
  std::string r = reason;
  for (char& c : r)
    if (c == '\r') c = ' ';
  write_text("blocked.md", "outcome_id: " + std::string(outcome_id) + "\n" + r + "\n");
}

int Workspace::requantize_attempts() const {
  auto t = read_text("requantize_attempts.txt");
  if (!t) return 0;
  try {
    return std::stoi(trim(*t));
  } catch (const std::exception&) {
    throw_invalid(path("requantize_attempts.txt").string(), "", "not an integer: '" + trim(*t) + "'",
                  "remove the file (the runner recreates it)");
  }
}

void Workspace::set_requantize_attempts(int n) const { write_text("requantize_attempts.txt", std::to_string(n) + "\n"); }

}  // namespace qloom::agent
