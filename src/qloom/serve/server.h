// serve::Server — `qloom serve`: an OpenAI-compatible HTTP server (its own
// HTTP/1.1 transport, serve/http/http_server.h) over one model: a plain directory or a Quark checkpoint of
// any scheme, loaded with eval::load_for_eval on ServerOptions::runtime:
// native by default (the quantized kernels), or simulate, where it computes
// exactly as `qloom eval` does.
//
// Routes: GET /health (no key needed), GET /v1/models, GET /v1/models/{id},
// POST /v1/completions, POST /v1/chat/completions (both with "stream": SSE).
// Errors: see api_error.h; unknown routes 404, a known route with another
// method 405, a body over max_body_bytes 413 (chunked bodies included), and
// the transport's own refusals (408, 411, 414, 431, 503 + Retry-After; see
// http/http_server.h), all with OpenAI error bodies. A client that leaves
// before its answer (streamed or not) cancels its request's generation.
//
// Limits: a prompt is at most the model's context (max_position_embeddings,
// 2048 when the config has none) minus its max_tokens; max_tokens is at most
// max_tokens_limit. Defaults: completions max_tokens 16 (OpenAI's), chat the
// rest of the context capped at max_tokens_limit. Completion string prompts
// are encoded with the tokenizer's special tokens (BOS), chat prompts
// (rendered with the model's chat template, add_generation_prompt) without.
// A request lists at most max_prompts_per_request prompts; its sequences run
// within the KV-cache budget (scheduler.h: admission, fair prefill); JSON
// nests at most kMaxJsonDepth levels (request.h). Every response echoes the
// sampling seed used ("seed", response.h).
// Not supported (400): n > 1, best_of > 1, logprobs or echo together with
// stream, non-text content parts.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "qloom/engine/model.h"
#include "qloom/export/checkpoint_runtime.h"
#include "qloom/serve/request.h"

namespace qloom::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (see port())
  std::string api_key;  // empty: no authentication
  size_t max_concurrency = 8;
  int64_t max_tokens_limit = 0;  // 0: min(context, 4096)
  unsigned threads = 0;          // compute threads, 0 = all cores
  // A Quark checkpoint's quantized linears on the native kernels (serving is
  // where speed is the point); kSimulate for Quark's arithmetic.
  exporter::Runtime runtime = exporter::Runtime::kNative;
  engine::LoadOptions::Compute compute = engine::LoadOptions::Compute::kF32;
  std::string served_model_name;  // empty: the model directory's name
  size_t max_body_bytes = size_t(32) << 20;
  // The transport's bounds (http/http_server.h; the defaults are its own).
  size_t max_connections = 512;
  size_t max_queued_requests = 64;
  size_t max_header_bytes = size_t(64) << 10;
  size_t max_headers = 100;
  size_t max_buffered_bytes = size_t(256) << 20;  // request bytes held by all connections being read
  double header_timeout_s = 10, body_timeout_s = 60, keep_alive_timeout_s = 5, write_timeout_s = 30;
  // KV-cache bytes the running sequences may need at worst (prompt +
  // max_tokens each); 0: half the memory available once the model is loaded
  // (serve::default_kv_budget). A sequence over it alone: 400; others wait.
  size_t kv_cache_budget_bytes = 0;
  size_t max_prompts_per_request = kDefaultMaxPrompts;  // /v1/completions prompt lists; more: 400
};

class Server {
 public:
  // Loads the model, tokenizer and chat template (a model without one serves
  // completions only; chat answers 400). Throws qloom::Error.
  Server(const std::filesystem::path& model_dir, ServerOptions opt);
  ~Server();

  // Binds the socket; returns the port (the chosen one for port 0). Throws
  // qloom::Error (kIo) when the address cannot be bound.
  int bind();
  // Serves until stop(); call bind() first.
  void run();
  // From any thread: ends streams with a 503 error event and makes run() return.
  void stop();

  const std::string& model_name() const;
  std::string description() const;  // e.g. "stories260K-hf-bf16, bf16, context 512"

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qloom::serve
