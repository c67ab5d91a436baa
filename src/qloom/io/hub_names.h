// Checks on every name a hub server sends before it becomes part of a path
// in the cache or a URL qloom requests: the commit id (X-Repo-Commit, a
// listing's "sha"), repo file names (a listing's "rfilename"), ETags (blob
// names) and redirect Locations. A server is not trusted to keep its names
// inside the cache: each failure is a HubError(kBadResponse) that names the
// field, quotes what came instead (control bytes escaped, cut at 120 chars),
// and touches nothing on disk.
#pragma once

#include <string>
#include <string_view>

namespace qloom::io {

// The longest repo file name qloom accepts, and the longest single
// component of it (the usual file system limits).
inline constexpr size_t kMaxHubFileNameBytes = 1024;
inline constexpr size_t kMaxHubNameComponentBytes = 255;

// `s` for an error message: bytes outside printable ASCII as \xNN, at most
// 120 characters (then "...").
std::string printable_name(std::string_view s);

// A 40-hex lower-case commit hash. `source` names the field ("X-Repo-Commit",
// "sha"); `where` the URL or repo.
void check_hub_commit(std::string_view commit, const std::string& where, std::string_view source);

// A relative path of '/'-separated components inside the snapshot: not
// empty, not absolute, no empty, "." or ".." component, no backslash, no
// control byte (NUL included), valid UTF-8, within the length limits above.
void check_hub_file_name(std::string_view name, const std::string& where);

// A blob name: 1-255 bytes of [A-Za-z0-9._-], not starting with '.'.
void check_hub_etag(std::string_view etag, const std::string& where, const std::string& file);

// An absolute http:// or https:// URL without spaces or control bytes.
void check_hub_location(std::string_view url, const std::string& where, const std::string& file);

}  // namespace qloom::io
