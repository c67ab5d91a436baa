// serve::http::RequestParser: framing, every refusal's status, the limits,
// and the same outcome whatever the split of the bytes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "qloom/serve/http/request_parser.h"

namespace qloom::serve::http {
namespace {

using State = RequestParser::State;

struct Outcome {
  State state;
  int status = 0;
  size_t consumed = 0;
  HttpRequest req;
};

// Feeds `bytes` in pieces of `step` bytes (0: all at once).
Outcome parse(const std::string& bytes, size_t step = 0, HttpLimits limits = {}) {
  RequestParser p(limits);
  Outcome o{State::kHead};
  const size_t n = step == 0 ? bytes.size() : step;
  for (size_t at = 0; at < bytes.size(); at += n) {
    const std::string_view piece = std::string_view(bytes).substr(at, n);
    const size_t used = p.feed(piece);
    o.consumed += used;
    if (used < piece.size()) break;
  }
  o.state = p.state();
  o.status = p.error().status;
  if (o.state == State::kComplete) o.req = p.take();
  return o;
}

int status_of(const std::string& bytes, HttpLimits limits = {}) {
  const Outcome o = parse(bytes, 0, limits);
  EXPECT_EQ(o.state, State::kError) << bytes.substr(0, 200);
  return o.status;
}

TEST(HttpRequestParser, GetWithFieldsAndQuery) {
  const Outcome o = parse("GET /v1/models/a%2Fb?x=1 HTTP/1.1\r\nHost: h\r\nX-Thing:  v a l \t\r\n\r\n");
  ASSERT_EQ(o.state, State::kComplete);
  EXPECT_EQ(o.req.method, "GET");
  EXPECT_EQ(o.req.path, "/v1/models/a%2Fb");
  EXPECT_EQ(o.req.query, "x=1");
  EXPECT_EQ(o.req.header("x-thing"), "v a l");
  EXPECT_EQ(o.req.header("host"), "h");
  EXPECT_EQ(o.req.header("absent"), "");
  EXPECT_TRUE(o.req.keep_alive);
  EXPECT_TRUE(o.req.body.empty());
}

TEST(HttpRequestParser, PostBodyByContentLength) {
  const Outcome o = parse("POST /v1/completions HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloEXTRA");
  ASSERT_EQ(o.state, State::kComplete);
  EXPECT_EQ(o.req.body, "hello");
  EXPECT_EQ(o.consumed, std::string("POST /v1/completions HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello").size());
}

TEST(HttpRequestParser, ChunkedBodyWithExtensionsAndTrailers) {
  const std::string req =
      "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;name=v\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: t\r\n\r\n";
  const Outcome o = parse(req);
  ASSERT_EQ(o.state, State::kComplete) << o.status;
  EXPECT_EQ(o.req.body, "helloabcdefghijklmnopqrstuvwxyz");
  EXPECT_EQ(o.consumed, req.size());
  EXPECT_EQ(o.req.header("x-trailer"), "");  // trailers are checked, not kept
}

TEST(HttpRequestParser, EverySplitGivesTheSameRequest) {
  const std::vector<std::string> requests = {
      "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
      "POST /y?q HTTP/1.0\nContent-Length: 4\nConnection: keep-alive\n\nbody",
      "\r\n\r\nGET / HTTP/1.1\r\nA: b\r\n\r\n"};
  for (const std::string& r : requests) {
    const Outcome whole = parse(r);
    ASSERT_EQ(whole.state, State::kComplete) << r;
    for (size_t step = 1; step < r.size(); ++step) {
      const Outcome o = parse(r, step);
      ASSERT_EQ(o.state, State::kComplete) << r << " step " << step;
      EXPECT_EQ(o.req.body, whole.req.body);
      EXPECT_EQ(o.req.target, whole.req.target);
      EXPECT_EQ(o.req.headers, whole.req.headers);
      EXPECT_EQ(o.consumed, r.size());
    }
  }
}

TEST(HttpRequestParser, PipelinedRequestsParseOneAfterAnother) {
  const std::string two = "GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi";
  RequestParser p;
  const size_t first = p.feed(two);
  ASSERT_EQ(p.state(), State::kComplete);
  EXPECT_EQ(p.take().path, "/a");
  EXPECT_EQ(p.state(), State::kHead);
  EXPECT_FALSE(p.started());
  EXPECT_EQ(p.feed(std::string_view(two).substr(first)), two.size() - first);
  ASSERT_EQ(p.state(), State::kComplete);
  const HttpRequest b = p.take();
  EXPECT_EQ(b.path, "/b");
  EXPECT_EQ(b.body, "hi");
}

TEST(HttpRequestParser, ContentLengthIsStrict) {
  const std::string head = "POST /x HTTP/1.1\r\n";
  for (const char* bad : {"-5", "+5", "0x10", "5 5", "", "5a", "1e3", "5,6"})
    EXPECT_EQ(status_of(head + "Content-Length: " + bad + "\r\n\r\n"), 400) << bad;
  EXPECT_EQ(status_of(head + "Content-Length: 3\r\nContent-Length: 4\r\n\r\n"), 400);
  const Outcome same = parse(head + "Content-Length: 3\r\nContent-Length: 3, 003\r\n\r\nabc");
  ASSERT_EQ(same.state, State::kComplete);
  EXPECT_EQ(same.req.body, "abc");
  EXPECT_EQ(status_of(head + "Content-Length: 99999999999999999999999999\r\n\r\n"), 413);
}

TEST(HttpRequestParser, BodyOverTheLimitIs413WithoutReadingIt) {
  HttpLimits l;
  l.max_body_bytes = 1000;
  EXPECT_EQ(status_of("POST /x HTTP/1.1\r\nContent-Length: 1001\r\n\r\n", l), 413);
  const Outcome at = parse("POST /x HTTP/1.1\r\nContent-Length: 1000\r\n\r\n" + std::string(1000, 'a'), 0, l);
  EXPECT_EQ(at.state, State::kComplete);
  // Chunked: one chunk over the limit is refused at its size line, many small ones at the one that crosses it.
  EXPECT_EQ(status_of("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3E9\r\n", l), 413);
  EXPECT_EQ(status_of("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFFFF\r\n", l), 413);
  std::string many = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 200; ++i) many += "a\r\n0123456789\r\n";
  const Outcome o = parse(many, 7, l);
  EXPECT_EQ(o.state, State::kError);
  EXPECT_EQ(o.status, 413);
  EXPECT_LT(o.consumed, 50 + 101 * 15u);  // the head, 100 chunks, the size line of the 101st
}

TEST(HttpRequestParser, MissingLengthOnPostIs411) {
  EXPECT_EQ(status_of("POST /v1/completions HTTP/1.1\r\nHost: h\r\n\r\n"), 411);
  EXPECT_EQ(status_of("PUT /x HTTP/1.1\r\n\r\n"), 411);
  EXPECT_EQ(parse("GET /x HTTP/1.1\r\n\r\n").state, State::kComplete);
}

TEST(HttpRequestParser, HeaderCountAndBytesAre431) {
  HttpLimits l;
  l.max_headers = 100;
  std::string flood = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 100000; ++i) flood += "X-" + std::to_string(i) + ": v\r\n";
  const Outcome o = parse(flood + "\r\n", 4096, l);
  EXPECT_EQ(o.state, State::kError);
  EXPECT_EQ(o.status, 431);
  EXPECT_LT(o.consumed, 4096u + 2000u);  // stopped at field 101, not after reading them all
  std::string hundred = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 100; ++i) hundred += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(parse(hundred + "\r\n", 0, l).state, State::kComplete);
  l.max_header_bytes = 256;
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nX: " + std::string(300, 'a') + "\r\n\r\n", l), 431);
  EXPECT_EQ(status_of("GET /" + std::string(300, 'a') + " HTTP/1.1\r\n\r\n", l), 414);
  // A head that never ends is bounded too (no newline at all).
  EXPECT_EQ(status_of("GET /" + std::string(1000, 'a'), l), 414);
  // Trailers count against the same limits.
  l.max_headers = 2;
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nA: 1\r\nB: 2\r\n\r\n", l), 431);
}

TEST(HttpRequestParser, MalformedHeadsAre400Or505) {
  EXPECT_EQ(status_of("GARBAGE\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET  / HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET x/ HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(parse("GET http://x:1/v1/models?a HTTP/1.1\r\n\r\n").req.path, "/v1/models");  // absolute-form
  EXPECT_EQ(parse("GET HTTP://x HTTP/1.1\r\n\r\n").req.path, "/");
  EXPECT_EQ(status_of("G(T / HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/2.0\r\n\r\n"), 505);
  EXPECT_EQ(status_of("GET / HTTP/1.1x\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nA : b\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nnocolon\r\n\r\n"), 400);
  EXPECT_EQ(status_of(std::string("GET / HTTP/1.1\r\nA: b\0c\r\n\r\n", 26)), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nA: b\rc\r\n\r\n"), 400);
}

TEST(HttpRequestParser, TransferEncodingRules) {
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"), 501);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), 501);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n"), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3" + std::string(5000, ' ') + "\r\n"), 400);
}

TEST(HttpRequestParser, ExpectContinue) {
  RequestParser p;
  p.feed("POST / HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(p.state(), State::kBody);
  EXPECT_TRUE(p.wants_continue());
  p.continue_sent();
  EXPECT_FALSE(p.wants_continue());
  p.feed("ok");
  EXPECT_EQ(p.state(), State::kComplete);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nContent-Length: 2\r\nExpect: something\r\n\r\n"), 417);
  // A body too large is refused at once: no 100 Continue.
  HttpLimits l;
  l.max_body_bytes = 1;
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n", l), 413);
}

TEST(HttpRequestParser, KeepAliveByVersionAndConnection) {
  EXPECT_TRUE(parse("GET / HTTP/1.1\r\n\r\n").req.keep_alive);
  EXPECT_FALSE(parse("GET / HTTP/1.1\r\nConnection: close\r\n\r\n").req.keep_alive);
  EXPECT_FALSE(parse("GET / HTTP/1.1\r\nConnection: foo, Close\r\n\r\n").req.keep_alive);
  EXPECT_FALSE(parse("GET / HTTP/1.0\r\n\r\n").req.keep_alive);
  EXPECT_TRUE(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").req.keep_alive);
}

TEST(HttpRequestParser, NothingIsConsumedAfterAnError) {
  RequestParser p;
  p.feed("BAD\r\n");
  ASSERT_EQ(p.state(), State::kError);
  EXPECT_EQ(p.feed("GET / HTTP/1.1\r\n\r\n"), 0u);
  EXPECT_FALSE(p.error().message.empty());
}

}  // namespace
}  // namespace qloom::serve::http
