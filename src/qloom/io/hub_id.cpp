#include "qloom/io/hub_id.h"

namespace qloom::io {
namespace {

bool valid_part(std::string_view s) {
  if (s.empty() || s.size() > 96) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  if (s.front() == '.' || s.front() == '-' || s.back() == '.' || s.back() == '-') return false;
  return s.find("--") == std::string_view::npos && s.find("..") == std::string_view::npos;
}

bool valid_revision(std::string_view s) {
  if (s.empty() || s.size() > 255) return false;
  for (char c : s)
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return false;
  return s.find("..") == std::string_view::npos && s.front() != '/';
}

}  // namespace

std::string HubId::display() const {
  std::string s = repo_id();
  if (revision != "main") {
    s += '@';
    s += revision;
  }
  return s;
}

std::optional<HubId> parse_hub_id(std::string_view spec) {
  std::string_view repo = spec, rev = "main";
  if (const size_t at = spec.find('@'); at != std::string_view::npos) {
    repo = spec.substr(0, at);
    rev = spec.substr(at + 1);
    if (!valid_revision(rev)) return std::nullopt;
  }
  const size_t slash = repo.find('/');
  if (slash == std::string_view::npos || repo.find('/', slash + 1) != std::string_view::npos)
    return std::nullopt;
  const std::string_view org = repo.substr(0, slash), name = repo.substr(slash + 1);
  if (!valid_part(org) || !valid_part(name)) return std::nullopt;
  return HubId{std::string(org), std::string(name), std::string(rev)};
}

bool is_commit_hash(std::string_view s) {
  if (s.size() != 40) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace qloom::io
