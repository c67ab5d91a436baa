// HubId: a Hugging Face Hub model id as users type it, `org/name[@revision]`.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace qloom::io {

struct HubId {
  std::string org;
  std::string name;
  std::string revision = "main";  // branch, tag or commit hash

  std::string repo_id() const { return org + "/" + name; }   // "org/name"
  std::string display() const;                              // "org/name@rev" ("@main" omitted)
};

// Parses `spec` as `org/name` or `org/name@revision`. The org and name follow
// the hub's rules for repo ids: 1..96 characters of [A-Za-z0-9._-], not
// starting or ending with '.' or '-', no "--" or "..". The revision, when
// given, is non-empty and has no whitespace or control characters. Returns
// nullopt for anything else (absolute or ./ paths, more than one '/', ...).
std::optional<HubId> parse_hub_id(std::string_view spec);

// True when `s` is a full 40-hex-digit commit hash.
bool is_commit_hash(std::string_view s);

}  // namespace qloom::io
