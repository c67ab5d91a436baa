#include "qloom/serve/http/http_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "qloom/core/error.h"
#include "qloom/core/heap.h"
#include "qloom/serve/http/socket_io.h"

namespace qloom::serve::http {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kDrainTime = std::chrono::seconds(1);  // reading what a refused client still sends
constexpr size_t kReadsPerWake = 16;                  // 64 KiB reads per readiness, then the others' turn

}  // namespace

struct HttpServer::Impl {
  enum class Phase { kIdle, kHead, kBody, kBusy, kDraining };

  struct Conn {
    explicit Conn(int f, const HttpLimits& l) : fd(f), parser(l) {}
    int fd;
    RequestParser parser;
    std::string pending;  // bytes after a complete request: the next one's
    Phase phase = Phase::kIdle;
    Clock::time_point deadline;
    size_t buffered = 0;       // this connection's share of Impl::buffered
    bool close_after = false;  // set by the worker
  };

  struct Task {
    Conn* conn;
    HttpRequest req;
  };

  HttpServerOptions opt;
  Handler handler;
  ErrorResponder errors;
  int listen_fd = -1, epoll_fd = -1, wake_fd = -1;
  std::atomic<bool> stopping{false};
  std::mutex run_m;  // held by run()
  // The connection thread's own state.
  std::unordered_map<int, std::unique_ptr<Conn>> conns;
  size_t buffered = 0;
  Clock::time_point accept_paused_until{};
  // Shared with the workers.
  std::mutex m;
  std::condition_variable cv;
  std::deque<Task> queue;
  std::vector<Conn*> returned;
  bool workers_closing = false;

  Impl(HttpServerOptions o, Handler h, ErrorResponder e);
  ~Impl();
  void loop();
  void accept_all();
  void watch(Conn& c, int op);
  void on_readable(Conn& c);
  bool feed(Conn& c, std::string_view data);
  void account(Conn& c, size_t now_buffered);
  void dispatch(Conn& c);
  void refuse(Conn& c, int status, const std::string& message);
  HttpResponse error_response(int status, const std::string& message) const;
  void close_conn(int fd);
  void expire();
  void take_returned();
  void worker();
  void serve_one(Task& t);
  void wake();
};

HttpServer::Impl::Impl(HttpServerOptions o, Handler h, ErrorResponder e)
    : opt(std::move(o)), handler(std::move(h)), errors(std::move(e)) {
  epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd < 0 || wake_fd < 0) throw_errno(errno, "epoll", "creating the server's event loop", false);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev);
}

HttpServer::Impl::~Impl() {
  for (const int fd : {listen_fd, epoll_fd, wake_fd})
    if (fd >= 0) ::close(fd);
}

void HttpServer::Impl::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd, &one, sizeof one);
}

HttpResponse HttpServer::Impl::error_response(int status, const std::string& message) const {
  HttpResponse r = errors ? errors(status, message) : HttpResponse{};
  r.status = status;
  if (!errors) r.set_content(message + "\n", "text/plain");
  if (status == 503 || status == 429) r.headers.emplace_back("Retry-After", std::to_string(opt.retry_after_s));
  return r;
}

void HttpServer::Impl::watch(Conn& c, int op) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = c.fd;
  ::epoll_ctl(epoll_fd, op, c.fd, &ev);
}

void HttpServer::Impl::accept_all() {
  while (true) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        accept_paused_until = Clock::now() + std::chrono::milliseconds(100);  // out of descriptors: wait a tick
        epoll_event ev{};
        ev.data.fd = listen_fd;
        ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, listen_fd, &ev);
      }
      return;
    }
    if (conns.size() >= opt.max_connections) {
      const HttpResponse r = error_response(503, "the server has " + std::to_string(opt.max_connections) +
                                                     " connections open, its limit (--max-connections)");
      send_now(fd, response_head(r, false) + r.body);
      ::close(fd);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // stream events leave at once
    auto c = std::make_unique<Conn>(fd, opt.limits);
    c->deadline = Clock::now() + opt.header_timeout;
    watch(*c, EPOLL_CTL_ADD);
    conns.emplace(fd, std::move(c));
  }
}

void HttpServer::Impl::close_conn(int fd) {
  const auto it = conns.find(fd);
  if (it == conns.end()) return;
  buffered -= it->second->buffered;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
  conns.erase(it);
}

void HttpServer::Impl::account(Conn& c, size_t now_buffered) {
  buffered = buffered - c.buffered + now_buffered;
  c.buffered = now_buffered;
}

void HttpServer::Impl::on_readable(Conn& c) {
  char buf[65536];
  for (size_t i = 0; i < kReadsPerWake; ++i) {
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) return close_conn(c.fd);  // EOF or reset: nothing to answer
    if (c.phase != Phase::kDraining && !feed(c, std::string_view(buf, size_t(n)))) return;
  }
}

// False when the connection left the reading phase (dispatched or refused).
bool HttpServer::Impl::feed(Conn& c, std::string_view data) {
  const size_t used = c.parser.feed(data);
  const Clock::time_point now = Clock::now();
  if (c.phase == Phase::kIdle && c.parser.started()) {
    c.phase = Phase::kHead;
    c.deadline = now + opt.header_timeout;
  }
  if (c.phase == Phase::kHead && c.parser.state() != RequestParser::State::kHead) {
    c.phase = Phase::kBody;
    c.deadline = now + opt.body_timeout;
  }
  account(c, c.parser.buffered_bytes());
  switch (c.parser.state()) {
    case RequestParser::State::kError:
      refuse(c, c.parser.error().status, c.parser.error().message);
      return false;
    case RequestParser::State::kComplete:
      c.pending.assign(data.substr(used));
      dispatch(c);
      return false;
    default: break;
  }
  if (buffered > opt.max_buffered_bytes) {
    refuse(c, 503, "the server holds too many request bytes in flight (--max-buffered-bytes); retry later");
    return false;
  }
  if (c.parser.wants_continue()) {
    send_now(c.fd, "HTTP/1.1 100 Continue\r\n\r\n");
    c.parser.continue_sent();
  }
  return true;
}

void HttpServer::Impl::dispatch(Conn& c) {
  std::unique_lock lock(m);
  if (queue.size() >= opt.max_queued) {
    lock.unlock();
    return refuse(c, 503, "the server's request queue is full (" + std::to_string(opt.max_queued) +
                              " waiting, --max-queued-requests); retry later");
  }
  ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.fd, nullptr);
  c.phase = Phase::kBusy;
  queue.push_back(Task{&c, c.parser.take()});
  account(c, 0);
  lock.unlock();
  cv.notify_one();
}

void HttpServer::Impl::refuse(Conn& c, int status, const std::string& message) {
  const HttpResponse r = error_response(status, message);
  send_now(c.fd, response_head(r, false) + r.body);
  ::shutdown(c.fd, SHUT_WR);
  c.parser = RequestParser(opt.limits);  // frees what it held
  c.pending.clear();
  c.pending.shrink_to_fit();
  account(c, 0);
  c.phase = Phase::kDraining;
  c.deadline = Clock::now() + kDrainTime;
}

void HttpServer::Impl::expire() {
  const Clock::time_point now = Clock::now();
  std::vector<Conn*> late;
  for (auto& [fd, c] : conns)
    if (c->phase != Phase::kBusy && c->deadline <= now) late.push_back(c.get());
  for (Conn* c : late) {
    if (c->phase == Phase::kHead || c->phase == Phase::kBody)
      refuse(*c, 408, c->phase == Phase::kHead ? "the request's head did not arrive in time (--header-timeout-s)"
                                               : "the request's body did not arrive in time (--body-timeout-s)");
    else
      close_conn(c->fd);  // idle keep-alive, or done draining
  }
  if (accept_paused_until != Clock::time_point{} && now >= accept_paused_until) {
    accept_paused_until = {};
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = listen_fd;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, listen_fd, &ev);
  }
}

void HttpServer::Impl::take_returned() {
  std::vector<Conn*> back;
  {
    std::lock_guard lock(m);
    back.swap(returned);
  }
  for (Conn* c : back) {
    if (c->close_after || stopping) {
      close_conn(c->fd);
      continue;
    }
    c->phase = Phase::kIdle;
    c->deadline = Clock::now() + opt.keep_alive_timeout;
    watch(*c, EPOLL_CTL_ADD);
    const std::string next = std::move(c->pending);
    c->pending.clear();
    if (!next.empty()) feed(*c, next);  // a pipelined request already read
  }
}

void HttpServer::Impl::loop() {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev);
  epoll_event events[256];
  while (!stopping) {
    const int n = ::epoll_wait(epoll_fd, events, 256, 100);
    for (int i = 0; i < n && !stopping; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd) {
        accept_all();
      } else if (fd == wake_fd) {
        uint64_t v;
        [[maybe_unused]] const ssize_t r = ::read(wake_fd, &v, sizeof v);
      } else if (const auto it = conns.find(fd); it != conns.end() && it->second->phase != Phase::kBusy) {
        on_readable(*it->second);
      }
    }
    take_returned();
    expire();
  }
}

void HttpServer::Impl::serve_one(Task& t) {
  Conn& c = *t.conn;
  HttpResponse res;
  res.peer_fd = c.fd;
  bool gone = false;
  try {
    handler(t.req, res);
    res.peer_fd = c.fd;
  } catch (const PeerGone&) {
    gone = true;
  } catch (const std::exception& e) {
    res = error_response(500, e.what());
  }
  if ((res.status == 503 || res.status == 429) &&
      std::none_of(res.headers.begin(), res.headers.end(), [](const auto& h) { return h.first == "Retry-After"; }))
    res.headers.emplace_back("Retry-After", std::to_string(opt.retry_after_s));
  const bool head_only = t.req.method == "HEAD";  // no body follows: the connection ends with the head
  const bool keep = !gone && !head_only && t.req.keep_alive && !res.close && !stopping;
  const bool ok = !gone && (head_only ? send_all(c.fd, response_head(res, false), opt.write_timeout)
                                      : write_response(c.fd, res, keep, opt.write_timeout));
  if (head_only && res.stream_end) res.stream_end(false);  // a stream not sent is a stream abandoned
  c.close_after = !(ok && keep);
}

void HttpServer::Impl::worker() {
  while (true) {
    Task t;
    {
      std::unique_lock lock(m);
      cv.wait(lock, [&] { return !queue.empty() || workers_closing; });
      if (queue.empty()) return;
      t = std::move(queue.front());
      queue.pop_front();
    }
    serve_one(t);
    return_freed_heap_memory();  // what the request freed (core/heap.h)
    {
      std::lock_guard lock(m);
      returned.push_back(t.conn);
    }
    wake();
  }
}

HttpServer::HttpServer(HttpServerOptions opt, Handler handler, ErrorResponder errors)
    : impl_(std::make_unique<Impl>(std::move(opt), std::move(handler), std::move(errors))) {
  keep_large_blocks_out_of_arenas();  // core/heap.h
}

HttpServer::~HttpServer() {
  stop();
  std::lock_guard wait_for_run(impl_->run_m);
}

int HttpServer::bind(const std::string& host, int port) {
  int bound = 0;
  impl_->listen_fd = listen_socket(host, port, bound);
  return bound;
}

void HttpServer::run() {
  Impl& s = *impl_;
  std::lock_guard running(s.run_m);
  if (s.listen_fd < 0)
    throw Error(ErrorKind::kUsage, "serve", "run", "the server is not bound to an address", "call bind() first");
  std::vector<std::thread> workers;
  for (size_t i = 0; i < std::max<size_t>(s.opt.workers, 1); ++i) workers.emplace_back([&s] { s.worker(); });
  s.loop();
  {
    std::lock_guard lock(s.m);
    s.workers_closing = true;
  }
  s.cv.notify_all();
  for (std::thread& w : workers) w.join();
  std::vector<int> fds;
  for (const auto& [fd, c] : s.conns) fds.push_back(fd);
  for (int fd : fds) s.close_conn(fd);
  s.returned.clear();
}

void HttpServer::stop() {
  impl_->stopping = true;
  impl_->wake();
}

}  // namespace qloom::serve::http
