// serve::http::HttpResponse — what a handler fills in: a status and a body,
// or a stream (SSE) produced piece by piece by the worker that runs the
// handler. The connection it answers can be asked whether its client left
// (peer_gone()), so a handler waiting on long work can cancel it.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qloom::serve::http {

// Thrown by a handler whose client left: the worker writes nothing and
// closes the connection.
struct PeerGone : std::exception {
  const char* what() const noexcept override { return "the client closed the connection"; }
};

// One streamed response's writer (chunked transfer coding). Not thread-safe:
// used by the worker that runs the stream.
class StreamSink {
 public:
  StreamSink(int fd, std::chrono::milliseconds write_timeout) : fd_(fd), timeout_(write_timeout) {}
  // Sends one chunk; false (and every later call false) when the client is
  // gone or did not take the bytes within the write timeout.
  bool write(std::string_view data);
  void done() { done_ = true; }
  bool is_done() const { return done_; }
  bool failed() const { return failed_; }

 private:
  int fd_;
  std::chrono::milliseconds timeout_;
  bool done_ = false, failed_ = false;
};

// Called again and again (each call should return within a fraction of a
// second) until it calls sink.done() or returns false; between calls the
// worker checks that the client is still there.
using StreamFn = std::function<bool(StreamSink&)>;
// After a stream: true when it completed and every byte was sent.
using StreamEnd = std::function<void(bool completed)>;

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra fields (Retry-After, Cache-Control)
  bool close = false;  // close the connection after this response
  StreamFn stream_next;
  StreamEnd stream_end;
  int peer_fd = -1;  // set by the server: the connection this answers

  void set_content(std::string b, std::string type) {
    body = std::move(b);
    content_type = std::move(type);
  }
  void set_stream(std::string type, StreamFn next, StreamEnd end) {
    content_type = std::move(type);
    stream_next = std::move(next);
    stream_end = std::move(end);
  }
  // Whether the client closed its connection (EOF, reset, or hang-up).
  bool peer_gone() const;
};

}  // namespace qloom::serve::http
