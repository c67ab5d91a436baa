// serve::http socket helpers: the listening socket, non-blocking sends with
// a deadline, the hang-up probe, and writing a whole HttpResponse (with
// Content-Length, or chunked for a stream). Every socket here is
// non-blocking; a send waits for room with poll() up to its timeout.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "qloom/serve/http/http_response.h"

namespace qloom::serve::http {

// A listening TCP socket on host:port (port 0: any free one), non-blocking.
// Returns the fd and sets `bound_port`. Throws qloom::Error (kIo) naming the
// address when it cannot be bound.
int listen_socket(const std::string& host, int port, int& bound_port);

void set_nonblocking(int fd);

// Sends all of `data`, waiting up to `timeout` for room each time the socket
// is full. False when the peer is gone or the time ran out.
bool send_all(int fd, std::string_view data, std::chrono::milliseconds timeout);

// One try, no waiting: as much of `data` as the socket takes now (for the
// small error answers of the connection loop).
void send_now(int fd, std::string_view data);

// Whether the peer hung up or reset: poll() without waiting; readable data
// that is not EOF (a pipelined request) is not a hang-up.
bool peer_closed(int fd);

// The status line and header fields (Content-Length, or Transfer-Encoding:
// chunked when the response streams).
std::string response_head(const HttpResponse& res, bool keep_alive);
// The whole response to `fd`: head and body, or head, chunks and the last
// chunk. False when the client is gone or too slow (then stream_end(false)).
bool write_response(int fd, HttpResponse& res, bool keep_alive, std::chrono::milliseconds timeout);

}  // namespace qloom::serve::http
