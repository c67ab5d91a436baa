#include "qloom/serve/http/socket_io.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "qloom/core/error.h"
#include "qloom/serve/http/request_parser.h"

namespace qloom::serve::http {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void cannot_listen(const std::string& host, int port, const std::string& why) {
  throw Error(ErrorKind::kIo, host + ":" + std::to_string(port), "--port",
              "cannot listen on this address (" + why + ")", "pick another --port or --host");
}

// Waits until `fd` takes more bytes or `deadline` passes.
bool wait_writable(int fd, Clock::time_point deadline) {
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLOUT, 0};
    const int r = ::poll(&p, 1, int(std::min<long long>(left, 1000)));
    if (r < 0 && errno != EINTR) return false;
    if (r > 0) return (p.revents & (POLLERR | POLLHUP | POLLNVAL)) == 0;
  }
}

std::string hex(size_t n) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%zx", n);
  return buf;
}

}  // namespace

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

int listen_socket(const std::string& host, int port, int& bound_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0)
    cannot_listen(host, port, ::gai_strerror(rc));
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd < 0) cannot_listen(host, port, why);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  bound_port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                        : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  set_nonblocking(fd);
  return fd;
}

bool send_all(int fd, std::string_view data, std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(size_t(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_writable(fd, deadline)) return false;
    } else {
      return false;
    }
  }
  return true;
}

void send_now(int fd, std::string_view data) {
  [[maybe_unused]] const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

bool peer_closed(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return true;
  if (!(p.revents & POLLIN)) return false;
  char c;
  const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

bool HttpResponse::peer_gone() const { return peer_fd >= 0 && peer_closed(peer_fd); }

bool StreamSink::write(std::string_view data) {
  if (failed_) return false;
  if (data.empty()) return true;  // an empty chunk would end the stream
  const std::string framed = hex(data.size()) + "\r\n" + std::string(data) + "\r\n";
  failed_ = !send_all(fd_, framed, timeout_);
  return !failed_;
}

std::string response_head(const HttpResponse& res, bool keep_alive) {
  std::string h = "HTTP/1.1 " + std::to_string(res.status) + " " + reason_phrase(res.status) + "\r\n";
  h += "Content-Type: " + res.content_type + "\r\n";
  h += res.stream_next ? std::string("Transfer-Encoding: chunked\r\n")
                       : "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
  h += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (const auto& [name, value] : res.headers) h += name + ": " + value + "\r\n";
  return h + "\r\n";
}

bool write_response(int fd, HttpResponse& res, bool keep_alive, std::chrono::milliseconds timeout) {
  if (!res.stream_next) return send_all(fd, response_head(res, keep_alive) + res.body, timeout);
  StreamSink sink(fd, timeout);
  bool ok = send_all(fd, response_head(res, keep_alive), timeout);
  while (ok && !sink.is_done()) {
    if (peer_closed(fd)) ok = false;
    else ok = res.stream_next(sink) && !sink.failed();
  }
  ok = ok && sink.is_done() && send_all(fd, "0\r\n\r\n", timeout);
  if (res.stream_end) res.stream_end(ok);
  return ok;
}

}  // namespace qloom::serve::http
