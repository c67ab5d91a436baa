// qloom serve MODEL [--host 127.0.0.1] [--port 8000] [--api-key KEY]
//                   [--max-concurrency 8] [--max-tokens-limit N] [--threads N]
//                   [--served-model-name NAME] [--max-body-bytes N]
//                   [--max-connections 512] [--max-queued-requests 64]
//                   [--max-header-bytes 65536] [--max-headers 100]
//                   [--max-buffered-bytes 268435456]
//                   [--header-timeout-s 10] [--body-timeout-s 60]
//                   [--keep-alive-timeout-s 5] [--write-timeout-s 30]
// An OpenAI-compatible HTTP server over the engine (serve/server.h). Prints
// "qloom serve: listening on http://HOST:PORT (model ...)" on stderr once it
// accepts connections; SIGINT / SIGTERM stop it (exit 0).
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "qloom/cli/commands.h"
#include "qloom/cli/flags.h"
#include "qloom/cli/runtime_flags.h"
#include "qloom/cli/model_spec.h"
#include "qloom/core/error.h"
#include "qloom/serve/server.h"

namespace qloom::cli {
namespace {

// SIGINT/SIGTERM: a handler (any thread may take the signal; OpenBLAS starts
// its own before main) writes the signal number to a pipe, and a waiter
// thread turns it into Server::stop(). The destructor wakes the waiter with 0.
int g_stop_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] const ssize_t n = ::write(g_stop_pipe[1], &b, 1);
}

class SignalStopper {
 public:
  explicit SignalStopper(serve::Server& server) {
    if (::pipe(g_stop_pipe) != 0) throw_errno(errno, "pipe", "creating the signal pipe", false);
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (int s : {SIGINT, SIGTERM}) ::sigaction(s, &sa, nullptr);
    waiter_ = std::thread([&server] {
      unsigned char sig = 0;
      while (::read(g_stop_pipe[0], &sig, 1) < 0 && errno == EINTR) {
      }
      if (sig != 0) {
        std::cerr << "qloom serve: stopping (signal " << int(sig) << ")\n";
        server.stop();
      }
    });
  }
  ~SignalStopper() {
    struct sigaction sa {};
    sa.sa_handler = SIG_DFL;
    for (int s : {SIGINT, SIGTERM}) ::sigaction(s, &sa, nullptr);
    const unsigned char zero = 0;
    [[maybe_unused]] const ssize_t n = ::write(g_stop_pipe[1], &zero, 1);  // ignored when a signal came first
    waiter_.join();
    ::close(g_stop_pipe[0]);
    ::close(g_stop_pipe[1]);
  }

 private:
  std::thread waiter_;
};

// The HTTP transport's bounds (serve/http/http_server.h).
void add_transport_flags(CLI::App* sub, serve::ServerOptions& s) {
  sub->add_option(flag_names("max_connections"), s.max_connections,
                  "open connections at once; one more is answered 503 and closed (default 512)")
      ->check(CLI::Range(1, 100000));
  sub->add_option(flag_names("max_queued_requests"), s.max_queued_requests,
                  "complete requests waiting for a worker; more are answered 503 + Retry-After (default 64)")
      ->check(CLI::Range(1, 100000));
  sub->add_option(flag_names("max_header_bytes"), s.max_header_bytes,
                  "largest request line + header fields; larger: 414 / 431 (default 65536)")
      ->check(CLI::Range(1024, 16 << 20));
  sub->add_option(flag_names("max_headers"), s.max_headers, "most header fields in a request; more: 431 (default 100)")
      ->check(CLI::Range(8, 100000));
  sub->add_option(flag_names("max_buffered_bytes"), s.max_buffered_bytes,
                  "request bytes held by all connections still being read; past it: 503 + Retry-After "
                  "(default 256 MiB)")
      ->check(CLI::PositiveNumber);
  sub->add_option(flag_names("header_timeout_s"), s.header_timeout_s,
                  "seconds from a request's first byte to the end of its header fields; later: 408 (default 10)")
      ->check(CLI::Range(0.1, 3600.0));
  sub->add_option(flag_names("body_timeout_s"), s.body_timeout_s,
                  "seconds to receive a request's body after its header fields; later: 408 (default 60)")
      ->check(CLI::Range(0.1, 3600.0));
  sub->add_option(flag_names("keep_alive_timeout_s"), s.keep_alive_timeout_s,
                  "seconds an idle keep-alive connection stays open (default 5)")
      ->check(CLI::Range(0.1, 3600.0));
  sub->add_option(flag_names("write_timeout_s"), s.write_timeout_s,
                  "seconds a response write may wait for a client that does not read; then the connection is "
                  "dropped and its generation cancelled (default 30)")
      ->check(CLI::Range(0.1, 3600.0));
}

}  // namespace

void register_serve(CLI::App& app, CommandFn& run) {
  struct Options {
    std::string model;
    serve::ServerOptions server;
    RuntimeFlags runtime;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "serve", "Serve a model (plain or a Quark checkpoint) over an OpenAI-compatible HTTP API: /v1/models, "
               "/v1/completions (echo + logprobs for lm-eval's local-completions), /v1/chat/completions "
               "(the model's chat template, SSE streaming), /health");
  sub->add_option("model", o->model, "model directory, Quark checkpoint, .gguf or hub id")->required();
  sub->add_option(flag_names("host"), o->server.host, "address to listen on (default 127.0.0.1)");
  sub->add_option(flag_names("port"), o->server.port, "TCP port (default 8000; 0 = any free port)")
      ->check(CLI::Range(0, 65535));
  sub->add_option(flag_names("api_key"), o->server.api_key,
                  "require 'Authorization: Bearer KEY' on /v1/* (401 otherwise)");
  sub->add_option(flag_names("max_concurrency"), o->server.max_concurrency,
                  "requests served at once; more are answered 429 (default 8)")
      ->check(CLI::Range(1, 1024));
  sub->add_option(flag_names("max_tokens_limit"), o->server.max_tokens_limit,
                  "largest max_tokens a request may ask (default min(context, 4096))")
      ->check(CLI::NonNegativeNumber);
  sub->add_option(flag_names("threads"), o->server.threads, "compute threads (0 = all cores)");
  add_runtime_flags(sub, o->runtime, "native");
  sub->add_option(flag_names("served_model_name"), o->server.served_model_name,
                  "the model id in /v1/models and responses (default: the directory name)");
  sub->add_option(flag_names("max_body_bytes"), o->server.max_body_bytes,
                  "largest request body accepted; larger: 413 (default 32 MiB)")
      ->check(CLI::PositiveNumber);
  add_transport_flags(sub, o->server);
  sub->add_option(flag_names("kv_cache_budget"), o->server.kv_cache_budget_bytes,
                  "KV-cache memory the running sequences may need at worst (prompt + max_tokens each), in bytes "
                  "or with a unit (8GiB); a sequence over it alone is refused, others wait (default: half the "
                  "memory available after loading the model)")
      ->transform(CLI::AsSizeValue(false));
  sub->add_option(flag_names("max_prompts_per_request"), o->server.max_prompts_per_request,
                  "prompts one /v1/completions request may list; more: 400 (default 256)")
      ->check(CLI::Range(1, 1 << 20));
  sub->callback([o, &run] {
    run = [o] {
      const std::string dir = resolve_model_arg(o->model, io::HubFetch::kModel);
      o->server.runtime = o->runtime.parsed_runtime();
      o->server.compute = o->runtime.parsed_compute();
      serve::Server server(dir, o->server);
      SignalStopper stopper(server);
      const int port = server.bind();
      std::cerr << "qloom serve: listening on http://" << o->server.host << ":" << port << " (model "
                << server.description() << ")" << std::endl;
      server.run();
      std::cerr << "qloom serve: stopped\n";
      return 0;
    };
  });
}

}  // namespace qloom::cli
