// libFuzzer target: serve::http::RequestParser on arbitrary bytes, fed in
// random pieces.
//
// The first two bytes seed the split points; the rest is the byte stream of
// one connection (pipelined requests included). It is parsed twice, whole
// and in pieces, and both must give the same requests and the same final
// state and status: the parser's answer may not depend on how TCP split the
// bytes. Any crash, sanitizer report or broken promise (checked below) is a
// finding; the parser never throws.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "qloom/serve/http/request_parser.h"

namespace {

using qloom::serve::http::HttpLimits;
using qloom::serve::http::HttpRequest;
using qloom::serve::http::RequestParser;
using State = RequestParser::State;

void check(bool ok) {
  if (!ok) std::abort();
}

// Small limits, so that inputs of a few KiB reach every bound.
HttpLimits limits() {
  HttpLimits l;
  l.max_header_bytes = 2048;
  l.max_headers = 16;
  l.max_body_bytes = 4096;
  return l;
}

bool known_status(int s) {
  for (int k : {400, 411, 413, 414, 417, 431, 501, 505})
    if (s == k) return true;
  return false;
}

void check_request(const HttpRequest& r, const HttpLimits& l) {
  check(r.body.size() <= l.max_body_bytes);
  check(r.headers.size() <= l.max_headers);
  check(!r.method.empty() && !r.path.empty() && r.path[0] == '/');
  for (const auto& [name, value] : r.headers) {
    check(!name.empty());
    for (char c : name) check(!(c >= 'A' && c <= 'Z'));
  }
}

std::string summary(const HttpRequest& r) {
  std::string s = r.method + ' ' + r.target + ' ' + std::to_string(r.minor_version) + (r.keep_alive ? "k" : "c");
  for (const auto& [n, v] : r.headers) s += '\n' + n + ':' + v;
  return s + "\n\n" + r.body;
}

// Feeds `data` in pieces cut by `next_piece`; returns every request, then the
// final state and status.
template <class Pieces>
std::vector<std::string> run(std::string_view data, Pieces next_piece) {
  const HttpLimits l = limits();
  RequestParser p(l);
  std::vector<std::string> out;
  size_t at = 0;
  while (at < data.size() && p.state() != State::kError) {
    const std::string_view piece = data.substr(at, next_piece(data.size() - at));
    const size_t used = p.feed(piece);
    check(used <= piece.size());
    at += used;
    if (p.state() == State::kComplete) {
      const HttpRequest r = p.take();
      check_request(r, l);
      out.push_back(summary(r));
      check(p.state() == State::kHead && !p.started());
    } else {
      check(used == piece.size() || p.state() == State::kError);
    }
    check(p.buffered_bytes() <= l.max_header_bytes + l.max_body_bytes + 8192);
  }
  if (p.state() == State::kError) {
    check(known_status(p.error().status) && !p.error().message.empty());
    check(p.feed(data.substr(at)) == 0);
  }
  out.push_back("state " + std::to_string(int(p.state())) + " " + std::to_string(p.error().status));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  uint32_t rng = uint32_t(data[0]) << 8 | data[1];
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 2, size - 2);
  const std::vector<std::string> whole = run(bytes, [](size_t left) { return left; });
  const std::vector<std::string> split = run(bytes, [&rng](size_t left) {
    rng = rng * 1103515245u + 12345u;
    const size_t n = 1 + (rng >> 16) % 64;  // pieces of 1..64 bytes
    return n < left ? n : left;
  });
  check(whole == split);
  return 0;
}
