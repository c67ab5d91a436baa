// HttpClient: the few HTTP requests the hub client makes, over libcurl. One
// client per thread (it owns a curl easy handle and reuses its connections).
// Transport failures (connection refused, reset, timeout, DNS) are reported in
// the result, never thrown; HTTP statuses are returned as they are.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace qloom::io {

struct HttpResult {
  bool transport_ok = false;    // false: no complete HTTP exchange (see error)
  std::string error;            // curl's message when !transport_ok
  bool interrupted = false;     // the body stopped short (connection dropped mid-file)
  long status = 0;              // last response's status
  std::map<std::string, std::string> headers;  // last response's, names lower-case
  std::string url;              // the URL that answered last (after redirects)
  std::string body;             // text bodies (get_text), error bodies
  uint64_t body_bytes = 0;      // bytes delivered to the sink (download)

  std::string header(const std::string& lower_name) const;  // "" when absent
};

// Receives body bytes of a 200/206 response; returns false to abort.
using BodySink = std::function<bool(const char* data, size_t n)>;
// Called before the first body byte with the status (200 or 206); returns
// false to abort.
using BodyStart = std::function<bool(long status, const HttpResult& head)>;

class HttpClient {
 public:
  // `token`: sent as "Authorization: Bearer <token>" to `token_host` only.
  HttpClient(std::string token, std::string token_host);
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;
  ~HttpClient();

  // HEAD `url`, following redirects only while they stay on the same host
  // (relative Locations included); a redirect to another host (the CDN of
  // LFS files) is returned as is, with its Location resolved to an absolute
  // URL in headers["location"].
  HttpResult head(const std::string& url);

  // GET a small text/JSON body (at most max_bytes), following redirects.
  HttpResult get_text(const std::string& url, size_t max_bytes = 64u << 20);

  // POST `body` as application/json to `url` (no redirects followed) and keep
  // the response body (at most max_bytes); the whole exchange is cut after
  // timeout_s seconds.
  HttpResult post_json(const std::string& url, const std::string& body, long timeout_s,
                       size_t max_bytes = 256u << 20);

  // GET `url` into `sink`, following redirects, from byte `offset` (a Range
  // request when offset > 0). `start` sees the status first (a 200 to a
  // Range request means the server sent everything). `cancel` is polled;
  // when it returns true the transfer stops (transport_ok = false).
  HttpResult download(const std::string& url, uint64_t offset, const BodyStart& start,
                      const BodySink& sink, const std::function<bool()>& cancel);

  // Host of an absolute URL, lower-case ("" when it cannot be parsed).
  static std::string host_of(const std::string& url);
  // `location` resolved against `base`.
  static std::string resolve(const std::string& base, const std::string& location);
  // Percent-encodes everything but unreserved characters (and '/' when keep_slash).
  static std::string encode(const std::string& s, bool keep_slash);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qloom::io
