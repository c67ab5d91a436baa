// A raw TCP client for the transport tests: send any bytes (half a request,
// nothing, a flood of header fields), read answers with deadlines, hang up
// mid-request. Every call is bounded in time, so a test never hangs.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>

namespace qloom::test {

class RawConn {
 public:
  explicit RawConn(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) close();
  }
  ~RawConn() { close(); }
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;
  RawConn(RawConn&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }

  bool ok() const { return fd_ >= 0; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Sends what the socket takes within `timeout_ms`; false when not all of it went.
  bool send(std::string_view data, int timeout_ms = 5000) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!data.empty() && fd_ >= 0) {
      pollfd p{fd_, POLLOUT, 0};
      if (::poll(&p, 1, left(end)) <= 0) return false;
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n <= 0) return false;
      data.remove_prefix(size_t(n));
    }
    return data.empty();
  }
  // Whether the server sent something (or hung up) not yet read: a client
  // that sends a long body stops once the answer came early (413).
  bool readable() const {
    pollfd p{fd_, POLLIN, 0};
    return fd_ >= 0 && ::poll(&p, 1, 0) > 0;
  }
  // Reads until `marker` is in what was read (returned whole), EOF, or the deadline.
  std::string read_until(std::string_view marker, int timeout_ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (fd_ >= 0 && (marker.empty() || buf_.find(marker) == std::string::npos)) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, left(end)) <= 0) break;
      char tmp[65536];
      const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
      if (n <= 0) {
        eof_ = true;
        break;
      }
      buf_.append(tmp, size_t(n));
    }
    std::string out;
    out.swap(buf_);
    return out;
  }
  std::string read_all(int timeout_ms) { return read_until({}, timeout_ms); }
  // One whole response with a Content-Length body (leaves the rest buffered).
  std::string read_response(int timeout_ms) {
    std::string got = read_until("\r\n\r\n", timeout_ms);
    const size_t head = got.find("\r\n\r\n");
    if (head == std::string::npos) return got;
    const size_t cl = got.find("Content-Length: ");
    const size_t len = cl < head ? std::strtoul(got.c_str() + cl + 16, nullptr, 10) : 0;
    while (got.size() < head + 4 + len && !eof_) {
      const std::string more = read_until({}, 200);
      if (more.empty()) break;
      got += more;
    }
    buf_ = got.substr(std::min(got.size(), head + 4 + len));
    return got.substr(0, head + 4 + len);
  }
  // Whether the server closed the connection within `timeout_ms`.
  bool closed_by_server(int timeout_ms) {
    read_all(timeout_ms);
    return eof_;
  }
  bool eof() const { return eof_; }

 private:
  static int left(std::chrono::steady_clock::time_point end) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    return ms.count() > 0 ? int(ms.count()) : 0;
  }
  int fd_ = -1;
  bool eof_ = false;
  std::string buf_;
};

inline int status_of_response(const std::string& raw) {
  return raw.compare(0, 9, "HTTP/1.1 ") == 0 ? std::atoi(raw.c_str() + 9) : 0;
}

}  // namespace qloom::test
