// serve::http::RequestParser — a bounded, incremental HTTP/1.1 request
// parser (RFC 9112) for `qloom serve`'s own transport. Bytes arrive in any
// split (one at a time, or several pipelined requests at once); feed()
// consumes what belongs to the current request and stops at its end, so the
// rest is the next request's. Nothing is read past a limit: each failure is
// a status and a message, never an exception, and the parser then consumes
// nothing more (the connection is answered and closed).
//
// What is accepted: a request line `METHOD SP target SP HTTP/1.0|1.1` (the
// target an absolute path, or an absolute URL of which the path is kept),
// CRLF or bare LF line ends, empty lines before the request line (skipped,
// counted in the header bytes), header fields `name: value` (name a token,
// value without control characters but HTAB). Refused:
//   400  malformed line, obs-fold, a Content-Length that is not digits only
//        (a sign, spaces inside, hex), two Content-Lengths that disagree,
//        Content-Length together with Transfer-Encoding, a bad chunk line;
//   411  a POST / PUT / PATCH with neither Content-Length nor chunked;
//   413  a body (Content-Length, or the chunks' sum) over max_body_bytes;
//   414  a request line over max_header_bytes;
//   417  an Expect other than 100-continue;
//   431  over max_headers fields or max_header_bytes of head (trailers count);
//   501  a Transfer-Encoding other than chunked;
//   505  an HTTP version other than 1.0 and 1.1.
// Keep-alive: HTTP/1.1 unless "Connection: close"; HTTP/1.0 only with
// "Connection: keep-alive". Expect: 100-continue is reported by
// wants_continue() once the head is complete and the body is not refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qloom::serve::http {

struct HttpLimits {
  size_t max_header_bytes = size_t(64) << 10;  // request line + fields (+ trailers)
  size_t max_headers = 100;                    // header fields (+ trailer fields)
  size_t max_body_bytes = size_t(32) << 20;    // decoded body
};

struct HttpRequest {
  std::string method, target;  // target as sent: path + "?" + query
  std::string path, query;     // target split at the first '?'
  int minor_version = 1;       // HTTP/1.x
  std::vector<std::pair<std::string, std::string>> headers;  // names lowercased, in order
  std::string body;            // decoded (chunks joined)
  bool keep_alive = true;

  // The first field of that (lowercase) name, or "" when absent.
  const std::string& header(std::string_view lower_name) const;
};

struct HttpError {
  int status = 0;  // 0: none
  std::string message;
};

class RequestParser {
 public:
  enum class State { kHead, kBody, kComplete, kError };

  explicit RequestParser(HttpLimits limits = {});

  // Consumes bytes of the current request and returns how many; fewer than
  // data.size() only when the request completed (the rest is the next one's)
  // or failed. Feeding after kComplete / kError consumes nothing.
  size_t feed(std::string_view data);

  State state() const { return state_; }
  bool started() const { return head_bytes_ > 0; }  // any byte of this request seen
  bool in_body() const { return state_ == State::kBody; }
  // The client sent "Expect: 100-continue", the head is complete and the
  // body is still to come: answer "100 Continue" once, then continue_sent().
  bool wants_continue() const { return expect_continue_ && state_ == State::kBody; }
  void continue_sent() { expect_continue_ = false; }
  const HttpError& error() const { return error_; }
  size_t buffered_bytes() const { return line_.size() + req_.body.size(); }

  // After kComplete: the request; the parser is reset for the next one.
  HttpRequest take();

 private:
  enum class Body { kNone, kLength, kChunkSize, kChunkData, kChunkDataEnd, kTrailers };

  size_t feed_head(std::string_view data);
  size_t feed_body(std::string_view data);
  size_t feed_chunked(std::string_view data);
  // Appends to the current line; true when a whole line is in line_ (CR/LF stripped).
  // `used` counts the bytes against `limit`; over it: fail(over_status).
  bool take_line(std::string_view data, size_t& pos, size_t& used, size_t limit, int over_status);
  void head_line();
  void request_line();
  void header_field();
  void head_complete();
  void framing();
  void chunk_size_line();
  void trailer_line();
  void fail(int status, std::string message);

  HttpLimits limits_;
  State state_ = State::kHead;
  Body body_ = Body::kNone;
  HttpRequest req_;
  HttpError error_;
  std::string line_;        // the line being read (head, chunk size, trailer)
  bool line_done_ = false;  // line_ holds a complete line
  bool seen_request_line_ = false;
  bool expect_continue_ = false;
  size_t head_bytes_ = 0;   // bytes of head (and trailers) so far
  size_t fields_ = 0;       // header + trailer fields so far
  size_t chunk_line_bytes_ = 0;  // bytes of the current chunk-size / chunk-end line
  uint64_t remaining_ = 0;  // body bytes left (kLength) or of the current chunk
};

const char* reason_phrase(int status);

}  // namespace qloom::serve::http
