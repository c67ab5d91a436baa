#include "qloom/serve/server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <cctype>
#include <optional>
#include <string_view>

#include "qloom/core/error.h"
#include "qloom/text/chat_template.h"
#include "qloom/eval/checkpoint_runtime.h"
#include "qloom/serve/api_error.h"
#include "qloom/serve/http/http_server.h"
#include "qloom/serve/request.h"
#include "qloom/serve/response.h"
#include "qloom/serve/scheduler.h"

namespace qloom::serve {
namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;
using http::HttpRequest;
using http::HttpResponse;

constexpr int64_t kCompletionDefaultMaxTokens = 16;  // OpenAI's default for /v1/completions
constexpr auto kPeerCheck = std::chrono::milliseconds(100);  // how often a waiting handler looks for its client

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

void send_json(HttpResponse& res, int status, const Json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(HttpResponse& res, const ApiError& e) {
  res.status = e.status();
  res.set_content(dump(e.body()), "application/json");
}

// A qloom::Error while handling a request: the chat template refusing the
// conversation (raise_exception), a template construct qloom does not support
// or bad arguments are not a server fault: 400 naming the template line.
ApiError api_error_of(const Error& e) {
  if (e.kind() == ErrorKind::kInvalidInput || e.kind() == ErrorKind::kUsage || e.kind() == ErrorKind::kUnsupported)
    return ApiError(400, e.what(), "invalid_request_error", e.item());
  return internal_error(e.what());
}

// The transport's own refusals (http_server.h), as OpenAI error bodies.
ApiError transport_error(int status, const std::string& message) {
  const char* code = status == 408   ? "request_timeout"
                     : status == 411 ? "length_required"
                     : status == 413 ? "payload_too_large"
                     : status == 414 ? "uri_too_long"
                     : status == 417 ? "expectation_failed"
                     : status == 431 ? "headers_too_large"
                     : status == 501 ? "not_implemented"
                     : status == 503 ? "server_overloaded"
                     : status == 505 ? "http_version_not_supported"
                                     : "";
  return ApiError(status, message, status >= 500 ? "server_error" : "invalid_request_error", {}, code);
}

HttpResponse transport_response(int status, const std::string& message) {
  HttpResponse res;
  send_error(res, transport_error(status, message));
  return res;
}

// "%2F" and the like in a path segment (a model id such as org%2Fname).
std::string percent_decoded(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) && hex(s[i + 2])) {
      out += char(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Waits for a non-streamed job; its client leaving cancels it.
void await_job(Job& job, const HttpResponse& res) {
  while (!job.done()) {
    job.take(kPeerCheck);  // the events are the stream's; a plain answer reads results()
    if (res.peer_gone()) {
      job.cancel();
      throw http::PeerGone();
    }
  }
}

http::HttpServerOptions transport_options(const ServerOptions& o) {
  http::HttpServerOptions h;
  h.limits.max_body_bytes = o.max_body_bytes;
  h.limits.max_header_bytes = o.max_header_bytes;
  h.limits.max_headers = o.max_headers;
  h.max_connections = o.max_connections;
  h.max_queued = o.max_queued_requests;
  h.max_buffered_bytes = o.max_buffered_bytes;
  h.workers = std::max<size_t>(o.max_concurrency, 1) * 2 + 8;  // admitted generations + quick routes
  auto ms = [](double s) { return std::chrono::milliseconds(int64_t(s * 1000)); };
  h.header_timeout = ms(o.header_timeout_s);
  h.body_timeout = ms(o.body_timeout_s);
  h.keep_alive_timeout = ms(o.keep_alive_timeout_s);
  h.write_timeout = ms(o.write_timeout_s);
  return h;
}

engine::LoadOptions load_options(const ServerOptions& opt) {
  engine::LoadOptions o;
  o.threads = opt.threads;
  o.compute = opt.compute;
  return o;
}

std::vector<int32_t> eos_ids(const text::Tokenizer& tok, const model::ModelConfig& cfg) {
  std::vector<int32_t> ids;
  if (const auto eos = tok.eos_id()) ids.push_back(*eos);
  for (int64_t id : cfg.eos_token_ids)
    if (std::find(ids.begin(), ids.end(), int32_t(id)) == ids.end()) ids.push_back(int32_t(id));
  return ids;
}

}  // namespace

struct Server::Impl {
  ServerOptions opt;
  eval::LoadedModel lm;
  text::Tokenizer tok;
  std::optional<text::ChatTemplate> chat;
  std::string no_chat_reason;
  std::string name;
  int64_t context = 0, max_tokens_limit = 0, created = 0;
  std::unique_ptr<Scheduler> sched;
  std::unique_ptr<http::HttpServer> http;  // after sched: destroyed first
  std::atomic<uint64_t> next_id{0};
  bool bound = false;

  Impl(const fs::path& dir, ServerOptions o);
  void handle(const HttpRequest& req, HttpResponse& res);
  void route(const HttpRequest& req, HttpResponse& res);
  void check_auth(const HttpRequest& req) const;
  void check_model(const std::string& model) const;
  void check_ids(const std::vector<int32_t>& ids, const char* param) const;
  int64_t resolve_max_tokens(std::optional<int64_t> given, bool chat, int64_t prompt, const char* param) const;
  SeqSpec base_spec(const GenParams& g) const;
  void check_min_tokens(const SeqSpec& s) const;
  ResponseHead head(const char* prefix, std::optional<int64_t> seed);
  Json model_card() const;
  void completions(const HttpRequest& req, HttpResponse& res);
  void chat_completions(const HttpRequest& req, HttpResponse& res);
  void stream(HttpResponse& res, std::shared_ptr<Job> job, const ResponseHead& h, bool chat, bool usage);
};

Server::Impl::Impl(const fs::path& dir, ServerOptions o)
    : opt(std::move(o)), lm(eval::load_for_eval(dir, load_options(opt), opt.runtime)), tok(text::Tokenizer::load(dir)) {
  try {
    chat = text::ChatTemplate::load(dir);
  } catch (const Error& e) {
    no_chat_reason = e.what();
  }
  const fs::path abs = fs::absolute(dir).lexically_normal();
  name = !opt.served_model_name.empty() ? opt.served_model_name
         : abs.filename().empty()       ? abs.parent_path().filename().string()
                                        : abs.filename().string();
  const model::ModelConfig& cfg = lm.model->config();
  context = cfg.max_position_embeddings > 0 ? cfg.max_position_embeddings : 2048;
  max_tokens_limit = opt.max_tokens_limit > 0 ? std::min(opt.max_tokens_limit, context) : std::min<int64_t>(context, 4096);
  created = int64_t(std::time(nullptr));
  SchedulerOptions so;
  so.max_concurrency = std::max<size_t>(opt.max_concurrency, 1);
  so.eos_ids = eos_ids(tok, cfg);
  so.batch_decode = lm.runtime.rows_independent;
  so.kv_budget_bytes = opt.kv_cache_budget_bytes;
  sched = std::make_unique<Scheduler>(*lm.model, &lm.runtime.hooks, tok, so);
  http = std::make_unique<http::HttpServer>(
      transport_options(opt), [this](const HttpRequest& req, HttpResponse& res) { handle(req, res); },
      transport_response);
}

void Server::Impl::check_auth(const HttpRequest& req) const {
  if (opt.api_key.empty() || req.path == "/health") return;
  const std::string& h = req.header("authorization");
  if (h.empty())
    throw unauthorized_error("You didn't provide an API key. Send it as 'Authorization: Bearer KEY'.");
  if (h != "Bearer " + opt.api_key) throw unauthorized_error("Incorrect API key provided.");
}

void Server::Impl::check_model(const std::string& model) const {
  if (!model.empty() && model != name)
    throw not_found_error("The model '" + model + "' does not exist; this server serves '" + name + "'",
                          "model_not_found");
}

void Server::Impl::check_ids(const std::vector<int32_t>& ids, const char* param) const {
  if (ids.empty()) throw_bad_request(std::string("the '") + param + "' encodes to no tokens", param);
  const int64_t vocab = lm.model->config().vocab_size;
  for (int32_t id : ids)
    if (id >= vocab)
      throw_bad_request("token id " + std::to_string(id) + " is outside the vocabulary (" + std::to_string(vocab) +
                            " ids)",
                        param);
}

int64_t Server::Impl::resolve_max_tokens(std::optional<int64_t> given, bool chat_default, int64_t prompt,
                                         const char* param) const {
  int64_t mt = given ? *given
               : chat_default ? std::min(max_tokens_limit, context - prompt)
                              : std::min(max_tokens_limit, kCompletionDefaultMaxTokens);
  if (mt > max_tokens_limit)
    throw_bad_request("max_tokens " + std::to_string(mt) + " is over this server's limit of " +
                          std::to_string(max_tokens_limit) + " (--max-tokens-limit)",
                      "max_tokens");
  if (prompt + std::max<int64_t>(mt, chat_default ? 1 : 0) > context)
    throw_bad_request("This model's maximum context length is " + std::to_string(context) +
                          " tokens. However, you requested " + std::to_string(prompt + mt) + " tokens (" +
                          std::to_string(prompt) + " in the " + param + ", " + std::to_string(mt) +
                          " in the completion). Please reduce the length of the " + param + " or completion.",
                      param, "context_length_exceeded");
  return mt;
}

SeqSpec Server::Impl::base_spec(const GenParams& g) const {
  SeqSpec s;
  s.sampling = g.sampling;
  s.stop = g.stop;
  s.ignore_eos = g.ignore_eos;
  s.min_tokens = g.min_tokens;
  return s;
}

void Server::Impl::check_min_tokens(const SeqSpec& s) const {
  if (s.min_tokens > s.max_tokens)
    throw_bad_request("'min_tokens' " + std::to_string(s.min_tokens) + " is over max_tokens " +
                          std::to_string(s.max_tokens),
                      "min_tokens");
}

ResponseHead Server::Impl::head(const char* prefix, std::optional<int64_t> seed) {
  return ResponseHead{std::string(prefix) + "-" + std::to_string(++next_id), int64_t(std::time(nullptr)), name, seed};
}

Json Server::Impl::model_card() const {
  return {{"id", name}, {"object", "model"}, {"created", created}, {"owned_by", "qloom"}, {"max_model_len", context}};
}

void Server::Impl::completions(const HttpRequest& req, HttpResponse& res) {
  const CompletionRequest r = parse_completion_request(req.body, opt.max_prompts_per_request);
  check_model(r.model);
  if (r.gen.stream && (r.echo || r.logprobs >= 0))
    throw_bad_request("echo and logprobs are not supported with stream", r.echo ? "echo" : "logprobs");
  std::vector<SeqSpec> specs;
  std::vector<std::string> texts;
  for (const Prompt& p : r.prompts) {
    SeqSpec s = base_spec(r.gen);
    s.prompt = p.is_text ? tok.encode(p.text, true) : p.ids;
    check_ids(s.prompt, "prompt");
    s.max_tokens = resolve_max_tokens(r.gen.max_tokens, false, int64_t(s.prompt.size()), "prompt");
    check_min_tokens(s);
    s.prompt_logprobs = r.echo && r.logprobs >= 0;
    s.top_logprobs = r.logprobs;
    texts.push_back(!r.echo ? std::string() : p.is_text ? p.text : tok.decode(p.ids, false));
    specs.push_back(std::move(s));
  }
  std::shared_ptr<Job> job = sched->submit(std::move(specs));
  const ResponseHead h = head("cmpl", echoed_seed(r.gen.sampling));
  if (r.gen.stream) return stream(res, job, h, false, r.gen.include_usage);
  await_job(*job, res);
  if (auto e = job->error()) throw *e;
  Json choices = Json::array();
  for (size_t i = 0; i < job->specs().size(); ++i)
    choices.push_back(completion_choice(tok, i, job->specs()[i], job->results()[i], r.echo, texts[i]));
  send_json(res, 200, completion_response(h, std::move(choices), usage_of(job->specs(), job->results())));
}

void Server::Impl::chat_completions(const HttpRequest& req, HttpResponse& res) {
  const ChatRequest r = parse_chat_request(req.body);
  check_model(r.model);
  if (!chat)
    throw_bad_request("this model has no chat template (" + no_chat_reason + "); use /v1/completions", "messages",
                      "no_chat_template");
  if (r.gen.stream && r.logprobs >= 0) throw_bad_request("logprobs are not supported with stream", "logprobs");
  SeqSpec s = base_spec(r.gen);
  s.prompt = tok.encode(chat->render(r.messages, true, r.template_kwargs), false);
  check_ids(s.prompt, "messages");
  s.max_tokens = resolve_max_tokens(r.gen.max_tokens, true, int64_t(s.prompt.size()), "messages");
  check_min_tokens(s);
  s.top_logprobs = r.logprobs;
  std::vector<SeqSpec> specs;
  specs.push_back(std::move(s));
  std::shared_ptr<Job> job = sched->submit(std::move(specs));
  const ResponseHead h = head("chatcmpl", echoed_seed(r.gen.sampling));
  if (r.gen.stream) return stream(res, job, h, true, r.gen.include_usage);
  await_job(*job, res);
  if (auto e = job->error()) throw *e;
  send_json(res, 200,
            chat_response(tok, h, job->specs()[0], job->results()[0], usage_of(job->specs(), job->results())));
}

void Server::Impl::stream(HttpResponse& res, std::shared_ptr<Job> job, const ResponseHead& h, bool chat_api,
                          bool usage) {
  struct State {
    bool started = false;
    size_t finished = 0;
  };
  auto st = std::make_shared<State>();
  res.headers.emplace_back("Cache-Control", "no-cache");
  auto provider = [job, h, chat_api, usage, st](http::StreamSink& sink) {
    bool ok = true;
    auto write = [&](const std::string& s) { ok = ok && sink.write(s); };
    if (chat_api && !st->started) write(sse(chat_chunk(h, {{"role", "assistant"}, {"content", ""}}, "")));
    st->started = true;
    for (const SeqEvent& e : job->take(std::chrono::milliseconds(200))) {
      if (!e.delta.empty())
        write(sse(chat_api ? chat_chunk(h, {{"content", e.delta}}, "") : completion_chunk(h, e.index, e.delta, "")));
      if (!e.finished) continue;
      write(sse(chat_api ? chat_chunk(h, Json::object(), e.finish_reason)
                         : completion_chunk(h, e.index, "", e.finish_reason)));
      ++st->finished;
    }
    const std::optional<ApiError> err = job->error();
    const bool all = st->finished == job->specs().size();
    if (err) write(sse(err->body()));
    if (all && usage && !err)
      write(sse(usage_chunk(h, chat_api ? "chat.completion.chunk" : "text_completion",
                            usage_of(job->specs(), job->results()))));
    if (err || all) {
      write(kSseDone);
      if (ok) sink.done();
    }
    if (!ok) job->cancel();
    return ok;
  };
  res.set_stream("text/event-stream", provider, [job](bool success) {
    if (!success) job->cancel();
  });
}

void Server::Impl::handle(const HttpRequest& req, HttpResponse& res) {
  try {
    check_auth(req);
    route(req, res);
  } catch (const http::PeerGone&) {
    throw;
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const Error& e) {
    send_error(res, api_error_of(e));
  } catch (const std::exception& e) {
    send_error(res, internal_error(e.what()));
  }
}

void Server::Impl::route(const HttpRequest& req, HttpResponse& res) {
  const std::string& p = req.path;
  const std::string_view models_prefix = "/v1/models/";
  const bool model_card_route = p.size() > models_prefix.size() && p.compare(0, models_prefix.size(), models_prefix) == 0;
  const bool get_route = p == "/health" || p == "/v1/models" || model_card_route;
  const bool post_route = p == "/v1/completions" || p == "/v1/chat/completions";
  if (!get_route && !post_route) throw not_found_error("no route " + req.method + " " + p, "not_found");
  if (req.method != (get_route ? "GET" : "POST"))
    throw ApiError(405, "method " + req.method + " is not allowed on " + p, "invalid_request_error", {},
                   "method_not_allowed");
  if (p == "/health") {
    send_json(res, 200, {{"status", "ok"}, {"model", name}, {"requests_in_flight", sched->in_flight()}});
  } else if (p == "/v1/models") {
    send_json(res, 200, {{"object", "list"}, {"data", Json::array({model_card()})}});
  } else if (model_card_route) {
    check_model(percent_decoded(std::string_view(p).substr(models_prefix.size())));
    send_json(res, 200, model_card());
  } else if (p == "/v1/completions") {
    completions(req, res);
  } else {
    chat_completions(req, res);
  }
}

Server::Server(const fs::path& model_dir, ServerOptions opt) : impl_(std::make_unique<Impl>(model_dir, std::move(opt))) {}

Server::~Server() { stop(); }

int Server::bind() {
  const int port = impl_->http->bind(impl_->opt.host, impl_->opt.port);
  impl_->bound = true;
  return port;
}

void Server::run() {
  if (!impl_->bound) bind();
  impl_->http->run();
}

void Server::stop() {
  if (!impl_) return;
  impl_->sched->stop();
  impl_->http->stop();
}

const std::string& Server::model_name() const { return impl_->name; }

std::string Server::description() const {
  return impl_->name + ", " + impl_->lm.runtime.description + ", context " + std::to_string(impl_->context) +
         (impl_->chat ? "" : ", no chat template");
}

}  // namespace qloom::serve
