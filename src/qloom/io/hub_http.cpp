#include "qloom/io/hub_http.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <mutex>

#include "qloom/core/strings.h"
#include "qloom/build_info.h"

namespace qloom::io {
namespace {

constexpr long kConnectTimeoutS = 10;
constexpr long kMetadataTimeoutS = 30;
constexpr long kStallSeconds = 30;      // a download that moves < 1 byte/s this long is cut
constexpr size_t kErrorBodyMax = 64 << 10;


bool is_redirect(long status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

// Per-request state the callbacks see.
struct Exchange {
  CURL* easy = nullptr;
  HttpResult* result = nullptr;
  size_t text_limit = 0;          // text mode: the most body bytes kept
  const BodyStart* start = nullptr;
  const BodySink* sink = nullptr;  // download mode when set
  const std::function<bool()>* cancel = nullptr;
  bool started = false;
  bool pass_body = false;  // this response's body goes to the sink
  const std::string* post_body = nullptr;          // POST when set
  long timeout_s = 0;                              // POST: whole-exchange limit
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* x = static_cast<Exchange*>(user);
  const std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {  // a new response (redirects, 100-continue)
    x->result->headers.clear();
    const size_t sp = line.find(' ');
    x->result->status = sp == std::string::npos ? 0 : std::atol(line.c_str() + sp + 1);
  } else if (const size_t colon = line.find(':'); colon != std::string::npos) {
    x->result->headers[lower_ascii(trim(line.substr(0, colon), kAsciiSpace))] = trim(line.substr(colon + 1), kAsciiSpace);
  }
  return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* x = static_cast<Exchange*>(user);
  const size_t len = size * n;
  if (!x->started) {
    x->started = true;
    long status = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    x->result->status = status;
    x->pass_body = x->sink && (status == 200 || status == 206);
    if (x->pass_body && x->start && !(*x->start)(status, *x->result)) return 0;
  }
  if (x->pass_body) {
    if (!(*x->sink)(data, len)) return 0;
    x->result->body_bytes += len;
    return len;
  }
  const size_t limit = x->sink ? kErrorBodyMax : x->text_limit;
  if (x->result->body.size() + len > limit) return 0;
  x->result->body.append(data, len);
  return len;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* x = static_cast<Exchange*>(user);
  return (x->cancel && *x->cancel && (*x->cancel)()) ? 1 : 0;
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

std::string HttpResult::header(const std::string& lower_name) const {
  const auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

struct HttpClient::Impl {
  CURL* easy = nullptr;
  std::string token, token_host, user_agent;

  // Resets the handle (keeping its connection cache) and runs one request.
  HttpResult perform(const std::string& url, bool head, bool follow, uint64_t offset,
                     Exchange& x) {
    HttpResult r;
    r.url = url;
    x.easy = easy;
    x.result = &r;
    curl_easy_reset(easy);
    curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_USERAGENT, user_agent.c_str());
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT, kConnectTimeoutS);
    curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, follow ? 1L : 0L);
    curl_easy_setopt(easy, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");  // no file://, ftp://... from a redirect
    curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, &x);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(easy, CURLOPT_XFERINFODATA, &x);
    curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, 1L << 20);
    if (x.post_body) {
      curl_easy_setopt(easy, CURLOPT_POSTFIELDS, x.post_body->c_str());
      curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(x.post_body->size()));
      curl_easy_setopt(easy, CURLOPT_TIMEOUT, x.timeout_s);
    } else if (head) {
      curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
      curl_easy_setopt(easy, CURLOPT_TIMEOUT, kMetadataTimeoutS);
    } else if (x.sink) {
      curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
      curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME, kStallSeconds);
    } else {
      curl_easy_setopt(easy, CURLOPT_TIMEOUT, kMetadataTimeoutS);
    }
    curl_slist* hdrs = curl_slist_append(nullptr, "Accept-Encoding: identity");
    if (x.post_body) hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    if (!token.empty() && HttpClient::host_of(url) == token_host) {
      std::string auth = "Authorization: Bearer ";
      auth += token;
      hdrs = curl_slist_append(hdrs, auth.c_str());
    }
    if (offset > 0) {
      std::string range = "Range: bytes=";
      range += std::to_string(offset);
      range += '-';
      hdrs = curl_slist_append(hdrs, range.c_str());
    }
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, hdrs);
    const CURLcode rc = curl_easy_perform(easy);
    curl_slist_free_all(hdrs);
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    if (status != 0) r.status = status;
    char* eff = nullptr;
    if (curl_easy_getinfo(easy, CURLINFO_EFFECTIVE_URL, &eff) == CURLE_OK && eff) r.url = eff;
    r.transport_ok = rc == CURLE_OK;
    if (rc != CURLE_OK) {
      r.error = curl_easy_strerror(rc);
      r.interrupted = rc == CURLE_PARTIAL_FILE || (r.body_bytes > 0 && rc != CURLE_WRITE_ERROR &&
                                                   rc != CURLE_ABORTED_BY_CALLBACK);
    }
    return r;
  }
};

HttpClient::HttpClient(std::string token, std::string token_host) : impl_(std::make_unique<Impl>()) {
  global_init();
  impl_->easy = curl_easy_init();
  impl_->token = std::move(token);
  impl_->token_host = lower_ascii(std::move(token_host));
  impl_->user_agent = "qloom/";
  impl_->user_agent += build::kVersion;
}

HttpClient::~HttpClient() {
  if (impl_ && impl_->easy) curl_easy_cleanup(impl_->easy);
}

HttpResult HttpClient::head(const std::string& url) {
  std::string current = url;
  for (int hop = 0;; ++hop) {
    Exchange x;
    HttpResult r = impl_->perform(current, /*head=*/true, /*follow=*/false, 0, x);
    if (!r.transport_ok || !is_redirect(r.status)) return r;
    const std::string loc = r.header("location");
    if (loc.empty()) return r;
    const std::string next = resolve(current, loc);
    r.headers["location"] = next;
    if (hop >= 10 || host_of(next) != host_of(current)) return r;
    current = next;
  }
}

HttpResult HttpClient::get_text(const std::string& url, size_t max_bytes) {
  Exchange x;
  x.text_limit = max_bytes;
  return impl_->perform(url, false, true, 0, x);
}

HttpResult HttpClient::post_json(const std::string& url, const std::string& body, long timeout_s,
                                 size_t max_bytes) {
  Exchange x;
  x.text_limit = max_bytes;
  x.post_body = &body;
  x.timeout_s = timeout_s;
  return impl_->perform(url, false, false, 0, x);
}

HttpResult HttpClient::download(const std::string& url, uint64_t offset, const BodyStart& start,
                                const BodySink& sink, const std::function<bool()>& cancel) {
  Exchange x;
  x.start = &start;
  x.sink = &sink;
  x.cancel = &cancel;
  return impl_->perform(url, false, true, offset, x);
}

std::string HttpClient::host_of(const std::string& url) {
  CURLU* u = curl_url();
  std::string host;
  char* h = nullptr;
  if (curl_url_set(u, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_HOST, &h, 0) == CURLUE_OK && h) {
    host = lower_ascii(h);
    curl_free(h);
  }
  curl_url_cleanup(u);
  return host;
}

std::string HttpClient::resolve(const std::string& base, const std::string& location) {
  CURLU* u = curl_url();
  std::string out = location;
  char* s = nullptr;
  if (curl_url_set(u, CURLUPART_URL, base.c_str(), 0) == CURLUE_OK &&
      curl_url_set(u, CURLUPART_URL, location.c_str(), 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_URL, &s, 0) == CURLUE_OK && s) {
    out = s;
    curl_free(s);
  }
  curl_url_cleanup(u);
  return out;
}

std::string HttpClient::encode(const std::string& s, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace qloom::io
