#include "qloom/serve/http/request_parser.h"

#include <algorithm>
#include <cctype>
#include <optional>

namespace qloom::serve::http {
namespace {

constexpr size_t kMaxChunkLine = 4096;  // chunk size + extensions
constexpr size_t kChunkEndBytes = 2;    // the CRLF after a chunk's data

bool is_tchar(unsigned char c) {
  return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(char(c)) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return is_tchar(static_cast<unsigned char>(c)); });
}

bool is_field_value(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u == '\t' || (u >= 0x20 && u != 0x7f);
  });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The comma-separated elements of every field of that name, trimmed.
std::vector<std::string_view> list_elements(const HttpRequest& r, std::string_view name) {
  std::vector<std::string_view> out;
  for (const auto& [n, v] : r.headers) {
    if (n != name) continue;
    std::string_view rest = v;
    while (true) {
      const size_t comma = rest.find(',');
      out.push_back(trim(rest.substr(0, comma)));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return out;
}

bool has_header(const HttpRequest& r, std::string_view name) {
  return std::any_of(r.headers.begin(), r.headers.end(), [&](const auto& h) { return h.first == name; });
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

const std::string& HttpRequest::header(std::string_view lower_name) const {
  static const std::string kEmpty;
  for (const auto& [n, v] : headers)
    if (n == lower_name) return v;
  return kEmpty;
}

RequestParser::RequestParser(HttpLimits limits) : limits_(limits) {}

void RequestParser::fail(int status, std::string message) {
  state_ = State::kError;
  error_ = {status, std::move(message)};
}

size_t RequestParser::feed(std::string_view data) {
  size_t pos = 0;
  while (pos < data.size() && (state_ == State::kHead || state_ == State::kBody))
    pos += state_ == State::kHead ? feed_head(data.substr(pos)) : feed_body(data.substr(pos));
  return pos;
}

bool RequestParser::take_line(std::string_view d, size_t& pos, size_t& used, size_t limit, int over_status) {
  const size_t nl = d.find('\n', pos);
  const size_t end = nl == std::string_view::npos ? d.size() : nl + 1;
  if (used + (end - pos) > limit) {
    fail(over_status, over_status == 414   ? "the request line is longer than the server accepts (--max-header-bytes)"
                      : over_status == 431 ? "the request's header fields are larger than the server accepts "
                                             "(--max-header-bytes)"
                                           : "a chunk-size line is malformed or too long");
    return false;
  }
  used += end - pos;
  line_.append(d.data() + pos, end - pos - (nl == std::string_view::npos ? 0 : 1));
  pos = end;
  if (nl == std::string_view::npos) return false;
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  return true;
}

size_t RequestParser::feed_head(std::string_view d) {
  size_t pos = 0;
  while (pos < d.size() && state_ == State::kHead) {
    if (!take_line(d, pos, head_bytes_, limits_.max_header_bytes, seen_request_line_ ? 431 : 414)) break;
    head_line();
    line_.clear();
  }
  return pos;
}

void RequestParser::head_line() {
  if (!seen_request_line_) {
    if (!line_.empty()) request_line();  // empty lines before the request line are skipped
  } else if (line_.empty()) {
    head_complete();
  } else {
    header_field();
  }
}

void RequestParser::request_line() {
  seen_request_line_ = true;
  const size_t sp1 = line_.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? sp1 : line_.find(' ', sp1 + 1);
  if (sp2 == std::string::npos || line_.find(' ', sp2 + 1) != std::string::npos)
    return fail(400, "malformed request line (expected 'METHOD /path HTTP/1.1')");
  const std::string_view l = line_;
  const std::string_view method = l.substr(0, sp1), version = l.substr(sp2 + 1);
  std::string_view target = l.substr(sp1 + 1, sp2 - sp1 - 1);
  if (!is_token(method)) return fail(400, "malformed request method");
  for (std::string_view scheme : {"http://", "https://"})  // absolute-form: the path is what counts
    if (target.size() > scheme.size() && lower(target.substr(0, scheme.size())) == scheme) {
      const size_t slash = target.find('/', scheme.size());
      target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
    }
  if (target.empty() || target[0] != '/' ||
      !std::all_of(target.begin(), target.end(), [](char c) { return c > 0x20 && c < 0x7f; }))
    return fail(400, "malformed request target (expected an absolute path such as /v1/completions)");
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !std::isdigit(static_cast<unsigned char>(version[5])) ||
      version[6] != '.' || !std::isdigit(static_cast<unsigned char>(version[7])))
    return fail(400, "malformed HTTP version");
  if (version[5] != '1' || (version[7] != '0' && version[7] != '1'))
    return fail(505, "HTTP version " + std::string(version.substr(5)) + " is not supported (HTTP/1.1 is)");
  req_.method = std::string(method);
  req_.target = std::string(target);
  req_.minor_version = version[7] - '0';
  const size_t q = target.find('?');
  req_.path = std::string(target.substr(0, q));
  req_.query = q == std::string_view::npos ? std::string() : std::string(target.substr(q + 1));
}

void RequestParser::header_field() {
  if (line_[0] == ' ' || line_[0] == '\t') return fail(400, "obsolete line folding in a header field");
  const size_t colon = line_.find(':');
  const std::string_view l = line_;
  if (colon == std::string::npos || !is_token(l.substr(0, colon)))
    return fail(400, "malformed header field (expected 'Name: value')");
  const std::string_view value = trim(l.substr(colon + 1));
  if (!is_field_value(value)) return fail(400, "a header field's value holds control characters");
  if (++fields_ > limits_.max_headers)
    return fail(431, "the request has more than " + std::to_string(limits_.max_headers) + " header fields");
  if (body_ == Body::kTrailers) return;  // trailer fields are checked and counted, not kept
  req_.headers.emplace_back(lower(l.substr(0, colon)), std::string(value));
}

void RequestParser::head_complete() {
  framing();
  if (state_ == State::kError) return;
  const std::vector<std::string_view> conn = list_elements(req_, "connection");
  auto has = [&](std::string_view t) {
    return std::any_of(conn.begin(), conn.end(), [&](std::string_view c) { return lower(c) == t; });
  };
  req_.keep_alive = req_.minor_version == 1 ? !has("close") : has("keep-alive") && !has("close");
  if (has_header(req_, "expect")) {
    if (lower(req_.header("expect")) != "100-continue")
      return fail(417, "only 'Expect: 100-continue' is supported");
    expect_continue_ = req_.minor_version == 1;
  }
  const bool empty = body_ == Body::kNone || (body_ == Body::kLength && remaining_ == 0);
  state_ = empty ? State::kComplete : State::kBody;
}

void RequestParser::framing() {
  const std::vector<std::string_view> te = list_elements(req_, "transfer-encoding");
  const bool has_te = has_header(req_, "transfer-encoding"), has_cl = has_header(req_, "content-length");
  if (has_te && has_cl) return fail(400, "both Content-Length and Transfer-Encoding are present");
  if (has_te) {
    if (req_.minor_version == 0) return fail(400, "Transfer-Encoding is not allowed in HTTP/1.0");
    for (std::string_view t : te)
      if (lower(t) != "chunked") return fail(t.empty() ? 400 : 501, "only 'Transfer-Encoding: chunked' is supported");
    if (te.size() != 1) return fail(400, "the chunked coding is applied more than once");
    body_ = Body::kChunkSize;
    return;
  }
  if (has_cl) {
    std::optional<uint64_t> length;
    for (std::string_view v : list_elements(req_, "content-length")) {
      if (v.empty() || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return fail(400, "Content-Length must be a non-negative decimal number");
      const std::string_view digits = v.substr(std::min(v.find_first_not_of('0'), v.size()));
      const uint64_t n = digits.size() > 19 ? UINT64_MAX : std::stoull(std::string(digits.empty() ? "0" : digits));
      if (length && *length != n) return fail(400, "Content-Length values disagree");
      length = n;
    }
    if (*length > limits_.max_body_bytes)
      return fail(413, "the request body is larger than this server accepts (" +
                           std::to_string(limits_.max_body_bytes) + " bytes, --max-body-bytes)");
    body_ = Body::kLength;
    remaining_ = *length;
    return;
  }
  body_ = Body::kNone;
  if (req_.method == "POST" || req_.method == "PUT" || req_.method == "PATCH")
    fail(411, "a " + req_.method + " request needs a Content-Length (or Transfer-Encoding: chunked)");
}

size_t RequestParser::feed_body(std::string_view d) {
  if (body_ != Body::kLength) return feed_chunked(d);
  const size_t n = size_t(std::min<uint64_t>(remaining_, d.size()));
  req_.body.append(d.data(), n);
  remaining_ -= n;
  if (remaining_ == 0) state_ = State::kComplete;
  return n;
}

size_t RequestParser::feed_chunked(std::string_view d) {
  size_t pos = 0;
  while (pos < d.size() && state_ == State::kBody) {
    if (body_ == Body::kChunkData) {
      const size_t n = size_t(std::min<uint64_t>(remaining_, d.size() - pos));
      req_.body.append(d.data() + pos, n);
      pos += n;
      remaining_ -= n;
      if (remaining_ == 0) body_ = Body::kChunkDataEnd;
      continue;
    }
    const bool trailers = body_ == Body::kTrailers;
    const size_t limit = trailers ? limits_.max_header_bytes : body_ == Body::kChunkSize ? kMaxChunkLine : kChunkEndBytes;
    if (!take_line(d, pos, trailers ? head_bytes_ : chunk_line_bytes_, limit, trailers ? 431 : 400)) break;
    chunk_line_bytes_ = 0;
    if (trailers)
      trailer_line();
    else if (body_ == Body::kChunkSize)
      chunk_size_line();
    else if (!line_.empty())
      fail(400, "a chunk's data is not followed by CRLF");
    else
      body_ = Body::kChunkSize;
    line_.clear();
  }
  return pos;
}

void RequestParser::chunk_size_line() {
  const std::string_view l = line_;
  size_t i = 0;
  uint64_t size = 0;
  for (; i < l.size() && hex_value(l[i]) >= 0; ++i) {
    if (size > (UINT64_MAX >> 4)) return fail(413, "a chunk is larger than this server accepts");
    size = size * 16 + uint64_t(hex_value(l[i]));
  }
  const std::string_view rest = trim(l.substr(i));
  if (i == 0 || (!rest.empty() && rest[0] != ';')) return fail(400, "malformed chunk-size line");
  if (size > limits_.max_body_bytes - req_.body.size())
    return fail(413, "the request body is larger than this server accepts (" + std::to_string(limits_.max_body_bytes) +
                         " bytes, --max-body-bytes)");
  remaining_ = size;
  body_ = size == 0 ? Body::kTrailers : Body::kChunkData;
}

void RequestParser::trailer_line() {
  if (line_.empty()) {
    state_ = State::kComplete;
    return;
  }
  header_field();
}

HttpRequest RequestParser::take() {
  HttpRequest r = std::move(req_);
  *this = RequestParser(limits_);
  return r;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return status < 400 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
  }
}

}  // namespace qloom::serve::http
