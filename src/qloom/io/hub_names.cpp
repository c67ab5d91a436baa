#include "qloom/io/hub_names.h"

#include "qloom/io/hub_error.h"
#include "qloom/io/hub_id.h"
#include "qloom/io/hub_strings.h"
#include "qloom/io/json_read.h"

namespace qloom::io {
namespace {

constexpr const char* kRemedy =
    "the server is not a Hugging Face Hub or is hostile: check HF_ENDPOINT (and any proxy in between)";

[[noreturn]] void bad(const std::string& where, const std::string& item, const std::string& why) {
  throw HubError(HubFailure::kBadResponse, where, item, why, kRemedy);
}

bool is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }

// Why `part` (one '/'-separated component) is unusable, or "".
std::string component_problem(std::string_view part) {
  if (part.empty()) return "has an empty component ('//', or a leading or trailing '/')";
  if (part == "." || part == "..") return cat({"has a '", part, "' component"});
  if (part.size() > kMaxHubNameComponentBytes)
    return cat({"has a component of ", std::to_string(part.size()), " bytes (limit ",
                std::to_string(kMaxHubNameComponentBytes), ")"});
  return {};
}

// Why `name` cannot be a path inside the snapshot, or "".
std::string file_name_problem(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.size() > kMaxHubFileNameBytes)
    return cat({"is ", std::to_string(name.size()), " bytes long (limit ", std::to_string(kMaxHubFileNameBytes), ")"});
  if (name.front() == '/') return "is an absolute path";
  for (unsigned char c : name) {
    if (is_control(c)) return "holds a control byte (NUL, newline, ...)";
    if (c == '\\') return "holds a backslash";
  }
  if (!is_valid_utf8(name)) return "is not valid UTF-8";
  for (size_t start = 0;;) {
    const size_t slash = name.find('/', start);
    const std::string why = component_problem(name.substr(start, slash - start));
    if (!why.empty() || slash == std::string_view::npos) return why;
    start = slash + 1;
  }
}

}  // namespace

std::string printable_name(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    if (out.size() >= 120) return out + "...";
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

void check_hub_commit(std::string_view commit, const std::string& where, std::string_view source) {
  if (is_commit_hash(commit)) return;
  bad(where, std::string(source),
      cat({"the commit id '", printable_name(commit), "' is not a 40-hex-digit commit hash"}));
}

void check_hub_file_name(std::string_view name, const std::string& where) {
  const std::string why = file_name_problem(name);
  if (why.empty()) return;
  bad(where, printable_name(name),
      cat({"the repo file name '", printable_name(name), "' ", why,
           ": it could leave the snapshot directory, so nothing was written"}));
}

void check_hub_etag(std::string_view etag, const std::string& where, const std::string& file) {
  bool ok = !etag.empty() && etag.size() <= 255 && etag.front() != '.';
  for (char c : etag)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                c == '_' || c == '-');
  if (ok) return;
  bad(where, file,
      etag.empty() ? std::string("the answer has no usable ETag")
                   : cat({"the ETag '", printable_name(etag),
                          "' cannot name a blob (1-255 letters, digits, '.', '_', '-', not starting with '.')"}));
}

void check_hub_location(std::string_view url, const std::string& where, const std::string& file) {
  const bool scheme = url.rfind("https://", 0) == 0 || url.rfind("http://", 0) == 0;
  bool clean = true;
  for (unsigned char c : url) clean = clean && !is_control(c) && c != ' ';
  if (scheme && clean && url.size() <= 8192) return;
  bad(where, file,
      cat({"the redirect Location '", printable_name(url),
           "' is not an http(s) URL of at most 8192 bytes without spaces or control bytes"}));
}

}  // namespace qloom::io
