// serve::http::HttpServer — `qloom serve`'s HTTP/1.1 transport: one
// connection thread and a pool of workers.
//
// The connection thread (epoll) accepts and reads every connection until a
// request is complete (RequestParser), so a slow or idle client holds no
// worker; only complete requests go to the workers, through a bounded queue.
// A worker runs the handler, writes the response (a write timeout on every
// send, streams included) and gives a keep-alive connection back.
//
// Bounds (HttpServerOptions; the CLI flags are `qloom serve`'s):
//   max_connections      open connections; one more is answered 503 and closed
//   header_timeout       from a request's first byte to the end of its head: 408
//   body_timeout         from the end of the head to the end of the body: 408
//   keep_alive_timeout   idle time between requests on one connection: closed
//   write_timeout        a send that makes no progress this long: connection dropped
//   max_queued           complete requests waiting for a worker; more: 503
//   max_buffered_bytes   request bytes held by all connections being read; more: 503
//   limits               per request: header bytes / fields, body bytes (request_parser.h)
// Every 503 carries "Retry-After: <retry_after_s>". An answer to a request
// the parser refused (4xx) closes the connection after draining what the
// client still sends, for at most a second, so that it reads the answer.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "qloom/serve/http/http_response.h"
#include "qloom/serve/http/request_parser.h"

namespace qloom::serve::http {

struct HttpServerOptions {
  HttpLimits limits;
  size_t max_connections = 512;
  size_t workers = 24;
  size_t max_queued = 64;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds body_timeout{60'000};
  std::chrono::milliseconds keep_alive_timeout{5'000};
  std::chrono::milliseconds write_timeout{30'000};
  size_t max_buffered_bytes = size_t(256) << 20;
  int retry_after_s = 1;
};

// Fills the response. Runs on a worker; may throw PeerGone (nothing is sent).
using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
// The answer for a status the transport gives itself (400, 408, 411, 413,
// 414, 417, 431, 501, 503, 505), with the parser's or the server's message.
using ErrorResponder = std::function<HttpResponse(int status, const std::string& message)>;

class HttpServer {
 public:
  HttpServer(HttpServerOptions opt, Handler handler, ErrorResponder errors);
  ~HttpServer();  // stop() and wait for run() to return
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port (0: a free port) and returns the port. Throws qloom::Error.
  int bind(const std::string& host, int port);
  // Serves until stop(): returns once every connection is closed and every
  // worker has finished its request.
  void run();
  // From any thread (a signal's waiter included); run() returns soon after.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qloom::serve::http
