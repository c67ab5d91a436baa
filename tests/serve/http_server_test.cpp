// serve::http::HttpServer with a toy handler (no model): slow and idle
// clients hold no worker, every timeout and bound answers as documented,
// keep-alive and pipelining, 100-continue, streams, cancel on hang-up.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "qloom/serve/http/http_server.h"
#include "serve/raw_client.h"

namespace qloom::serve::http {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::RawConn;
using test::status_of_response;

class TestServer {
 public:
  TestServer(HttpServerOptions o, Handler h) : server_(o, std::move(h), nullptr) {
    port_ = server_.bind("127.0.0.1", 0);
    thread_ = std::thread([this] { server_.run(); });
  }
  ~TestServer() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  HttpServer server_;
  int port_ = 0;
  std::thread thread_;
};

void echo(const HttpRequest& req, HttpResponse& res) {
  res.set_content(req.method + " " + req.path + " " + req.body, "text/plain");
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// GET / on a fresh connection: the status, and how long the answer took.
std::pair<int, double> probe(int port) {
  const auto t0 = Clock::now();
  RawConn c(port);
  c.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  return {status_of_response(c.read_response(5000)), seconds_since(t0)};
}

TEST(HttpServer, SlowAndIdleClientsHoldNoWorker) {
  HttpServerOptions o;
  o.workers = 1;
  TestServer s(o, echo);
  std::vector<RawConn> held;
  for (int i = 0; i < 30; ++i) {  // half a request each
    held.emplace_back(s.port());
    held.back().send("POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
  }
  for (int i = 0; i < 200; ++i) held.emplace_back(s.port());  // nothing at all
  const auto [status, secs] = probe(s.port());
  EXPECT_EQ(status, 200);
  EXPECT_LT(secs, 1.0);
}

TEST(HttpServer, HeadAndBodyTimeoutsAre408) {
  HttpServerOptions o;
  o.header_timeout = 300ms;
  o.body_timeout = 300ms;
  TestServer s(o, echo);
  RawConn head(s.port()), body(s.port()), idle(s.port());
  head.send("GET / HTTP/1.1\r\nHost:");
  body.send("POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
  const auto t0 = Clock::now();
  EXPECT_EQ(status_of_response(head.read_all(3000)), 408);
  EXPECT_EQ(status_of_response(body.read_all(3000)), 408);
  EXPECT_TRUE(head.eof() && body.eof());
  EXPECT_EQ(idle.read_all(3000), "");  // a connection that never sent a byte is closed silently
  EXPECT_TRUE(idle.eof());
  EXPECT_LT(seconds_since(t0), 2.5);
}

TEST(HttpServer, KeepAliveThenIdleClose) {
  HttpServerOptions o;
  o.keep_alive_timeout = 300ms;
  TestServer s(o, echo);
  RawConn c(s.port());
  // Two pipelined requests in one send, then a third: answered in order on one connection.
  c.send("GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi");
  const std::string a = c.read_response(3000), b = c.read_response(3000);
  EXPECT_NE(a.find("GET /a "), std::string::npos) << a;
  EXPECT_NE(b.find("POST /b hi"), std::string::npos) << b;
  c.send("GET /c HTTP/1.1\r\n\r\n");
  EXPECT_NE(c.read_response(3000).find("GET /c"), std::string::npos);
  const auto t0 = Clock::now();
  EXPECT_TRUE(c.closed_by_server(3000));
  EXPECT_LT(seconds_since(t0), 2.0);
  // HEAD: the head alone, and the connection ends.
  RawConn h(s.port());
  h.send("HEAD /h HTTP/1.1\r\n\r\n");
  const std::string head = h.read_all(3000);
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n") << head;
  EXPECT_EQ(head.find("HEAD /h"), std::string::npos) << head;
  EXPECT_TRUE(h.eof());
  // Connection: close is honoured.
  RawConn d(s.port());
  d.send("GET /d HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_NE(d.read_all(3000).find("Connection: close"), std::string::npos);
  EXPECT_TRUE(d.eof());
}

TEST(HttpServer, MaxConnectionsAnswers503) {
  HttpServerOptions o;
  o.max_connections = 3;
  TestServer s(o, echo);
  std::vector<RawConn> held;
  for (int i = 0; i < 3; ++i) held.emplace_back(s.port());
  std::this_thread::sleep_for(100ms);  // accepted
  RawConn extra(s.port());
  const std::string got = extra.read_all(3000);
  EXPECT_EQ(status_of_response(got), 503) << got;
  EXPECT_NE(got.find("Retry-After: 1"), std::string::npos);
  held.pop_back();
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(probe(s.port()).first, 200);
}

TEST(HttpServer, QueueFullAnswers503WithRetryAfter) {
  HttpServerOptions o;
  o.workers = 1;
  o.max_queued = 1;
  std::atomic<bool> release{false};
  TestServer s(o, [&](const HttpRequest& req, HttpResponse& res) {
    for (int i = 0; i < 500 && !release; ++i) std::this_thread::sleep_for(10ms);
    echo(req, res);
  });
  RawConn busy(s.port()), queued(s.port()), refused(s.port());
  busy.send("GET /1 HTTP/1.1\r\n\r\n");
  std::this_thread::sleep_for(100ms);
  queued.send("GET /2 HTTP/1.1\r\n\r\n");
  std::this_thread::sleep_for(100ms);
  refused.send("GET /3 HTTP/1.1\r\n\r\n");
  const std::string r = refused.read_all(3000);
  EXPECT_EQ(status_of_response(r), 503) << r;
  EXPECT_NE(r.find("Retry-After: 1"), std::string::npos);
  release = true;
  EXPECT_EQ(status_of_response(busy.read_response(3000)), 200);
  EXPECT_EQ(status_of_response(queued.read_response(3000)), 200);
}

TEST(HttpServer, BufferedBytesOfAllConnectionsAreBounded) {
  HttpServerOptions o;
  o.max_buffered_bytes = 1000;
  TestServer s(o, echo);
  RawConn first(s.port()), second(s.port());
  first.send("POST /1 HTTP/1.1\r\nContent-Length: 900\r\n\r\n" + std::string(600, 'a'));
  std::this_thread::sleep_for(100ms);
  second.send("POST /2 HTTP/1.1\r\nContent-Length: 900\r\n\r\n" + std::string(600, 'b'));
  const std::string refused = second.read_all(3000);
  EXPECT_EQ(status_of_response(refused), 503) << refused;
  EXPECT_NE(refused.find("Retry-After: 1"), std::string::npos);
  first.send(std::string(300, 'a'));  // the first completes: its bytes were within the bound
  EXPECT_EQ(status_of_response(first.read_response(3000)), 200);
  EXPECT_EQ(probe(s.port()).first, 200);  // and the count went back down
}

TEST(HttpServer, HandlerBusyAnswersCarryRetryAfter) {
  TestServer s({}, [](const HttpRequest&, HttpResponse& res) {
    res.status = 429;
    res.set_content("{}", "application/json");
  });
  RawConn c(s.port());
  c.send("GET / HTTP/1.1\r\n\r\n");
  const std::string got = c.read_response(3000);
  EXPECT_EQ(status_of_response(got), 429);
  EXPECT_NE(got.find("Retry-After: 1\r\n"), std::string::npos) << got;
}

TEST(HttpServer, ExpectContinueAndOversizedBody) {
  HttpServerOptions o;
  o.limits.max_body_bytes = 1000;
  TestServer s(o, echo);
  RawConn c(s.port());
  c.send("POST /e HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_NE(c.read_until("\r\n\r\n", 3000).find("HTTP/1.1 100 Continue"), std::string::npos);
  c.send("body");
  EXPECT_NE(c.read_response(3000).find("POST /e body"), std::string::npos);
  // A client that sends its over-long body anyway still reads the 413.
  RawConn big(s.port());
  big.send("POST /x HTTP/1.1\r\nContent-Length: 200000\r\n\r\n");
  big.send(std::string(200000, 'a'), 1000);
  EXPECT_EQ(status_of_response(big.read_all(3000)), 413);
  RawConn bad(s.port());
  bad.send("NONSENSE\r\n\r\n");
  EXPECT_EQ(status_of_response(bad.read_all(3000)), 400);
  EXPECT_TRUE(bad.eof());
}

TEST(HttpServer, HandlerSeesTheClientLeave) {
  std::atomic<double> noticed{-1};
  TestServer s({}, [&](const HttpRequest&, HttpResponse& res) {
    const auto start = Clock::now();
    while (!res.peer_gone() && seconds_since(start) < 10) std::this_thread::sleep_for(10ms);
    noticed = seconds_since(start);
    throw PeerGone();
  });
  {
    RawConn c(s.port());
    c.send("GET /wait HTTP/1.1\r\n\r\n");
    std::this_thread::sleep_for(200ms);
  }
  for (int i = 0; i < 300 && noticed < 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_GT(noticed, 0.1);
  EXPECT_LT(noticed, 1.0);
}

TEST(HttpServer, StreamsAreChunkedAndTheirWritesTimeOut) {
  HttpServerOptions o;
  o.write_timeout = 300ms;
  std::atomic<int> ended{-1};
  TestServer s(o, [&](const HttpRequest& req, HttpResponse& res) {
    const bool endless = req.path == "/endless";
    auto n = std::make_shared<int>(0);
    res.set_stream(
        "text/event-stream",
        [n, endless](StreamSink& sink) {
          const bool ok = sink.write(endless ? std::string(65536, 'x') : "piece" + std::to_string(*n));
          if (!endless && ++*n == 3) sink.done();
          return ok;
        },
        [&](bool completed) { ended = completed ? 1 : 0; });
  });
  RawConn c(s.port());
  c.send("GET /three HTTP/1.1\r\n\r\n");
  const std::string got = c.read_until("0\r\n\r\n", 3000);
  EXPECT_NE(got.find("Transfer-Encoding: chunked"), std::string::npos) << got;
  EXPECT_NE(got.find("6\r\npiece0\r\n6\r\npiece1\r\n6\r\npiece2\r\n0\r\n\r\n"), std::string::npos) << got;
  for (int i = 0; i < 100 && ended < 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(ended, 1);
  // A client that never reads: the stream ends (not completed) once a write times out.
  ended = -1;
  RawConn stuck(s.port());
  stuck.send("GET /endless HTTP/1.1\r\n\r\n");
  const auto t0 = Clock::now();
  for (int i = 0; i < 1000 && ended < 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(ended, 0);
  EXPECT_LT(seconds_since(t0), 5.0);
}

}  // namespace
}  // namespace qloom::serve::http
