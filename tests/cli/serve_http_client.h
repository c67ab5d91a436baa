// A minimal blocking HTTP/1.1 client for the serve tests (raw sockets, one
// request per connection, "Connection: close"): status, headers and body,
// with chunked transfer decoding. Timeouts on every socket call, so a test
// never hangs on a server that does not answer.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <string>
#include <vector>

namespace qloom::test {

struct HttpReply {
  int status = 0;  // 0: no answer (connection failed or timed out)
  std::string headers, body;
};

inline std::string dechunk(const std::string& s) {
  std::string out;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t eol = s.find("\r\n", pos);
    if (eol == std::string::npos) break;
    const size_t n = std::strtoul(s.substr(pos, eol - pos).c_str(), nullptr, 16);
    if (n == 0) break;
    out += s.substr(eol + 2, n);
    pos = eol + 2 + n + 2;
  }
  return out;
}

inline HttpReply http_request(int port, const std::string& method, const std::string& path,
                              const std::string& body = {}, const std::vector<std::string>& headers = {},
                              int timeout_s = 30) {
  HttpReply r;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return r;
  timeval tv{timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return r;
  }
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  for (const std::string& h : headers) req += h + "\r\n";
  if (method == "POST") req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  for (size_t sent = 0; sent < req.size();) {
    const ssize_t n = ::send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer (413) before reading it all
    sent += size_t(n);
  }
  std::string raw;
  char buf[16384];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) raw.append(buf, size_t(n));
  ::close(fd);
  const size_t head_end = raw.find("\r\n\r\n");
  if (raw.compare(0, 9, "HTTP/1.1 ") != 0 || head_end == std::string::npos) return r;
  r.status = std::atoi(raw.c_str() + 9);
  r.headers = raw.substr(0, head_end);
  r.body = raw.substr(head_end + 4);
  std::string lower = r.headers;
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("transfer-encoding: chunked") != std::string::npos) r.body = dechunk(r.body);
  return r;
}

// The JSON payloads of an SSE body ("data: X\n\n" events), "[DONE]" included.
inline std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    if (end == std::string::npos) break;
    pos = end + 2;
  }
  return out;
}

}  // namespace qloom::test
