#include "qloom/eval/openai_client.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/io/hub_http.h"

namespace qloom::eval {
namespace {

using nlohmann::json;

bool retryable(const io::HttpResult& r) { return !r.transport_ok || r.status == 429 || r.status >= 500; }

// `request()` until it succeeds or fails for good, at most max_retries more
// times, waiting 0.5 s, 1 s, 2 s ... in between.
template <class Request>
io::HttpResult with_retries(int max_retries, const Request& request) {
  for (int attempt = 0;; ++attempt) {
    io::HttpResult r = request();
    if (!retryable(r) || attempt >= max_retries) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(500 << attempt));
  }
}

// The server's own words: OpenAI's {"error": {"message"}}, else the body's start.
std::string server_message(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error")) {
    const json& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"].get<std::string>();
    if (e.is_string()) return e.get<std::string>();
  }
  return body.substr(0, 300);
}

std::string backend_of(const std::string& owned_by) {
  for (const char* b : {"vllm", "sglang", "qloom"})
    if (owned_by == b) return b;
  return "openai-compatible";
}

const json& logprobs_of(const json& choice, const std::string& where) {
  if (!choice.is_object() || !choice.contains("logprobs") || !choice["logprobs"].is_object())
    throw_invalid(where, "choices[].logprobs", "the server's answer has no logprobs",
                  "use a server that supports echo with logprobs on /v1/completions (vLLM, SGLang, qloom serve)");
  return choice["logprobs"];
}

// Sum of token_logprobs[from, to) and whether each equals its top_logprobs maximum.
OptionScore sum_logprobs(const json& lp, size_t from, size_t to, const std::string& where) {
  const json& tl = lp.contains("token_logprobs") ? lp["token_logprobs"] : json();
  const json& top = lp.contains("top_logprobs") ? lp["top_logprobs"] : json();
  if (!tl.is_array() || !top.is_array() || tl.size() < to || top.size() < to)
    throw_invalid(where, "logprobs.token_logprobs",
                  "the server returned " + std::to_string(tl.is_array() ? tl.size() : 0) +
                      " prompt log-probabilities, expected at least " + std::to_string(to),
                  "the server must echo every prompt token's log-probability (echo: true)");
  OptionScore s;
  s.greedy = true;
  s.tokens = int64_t(to - from);
  for (size_t i = from; i < to; ++i) {
    if (!tl[i].is_number() || !top[i].is_object() || top[i].empty())
      throw_invalid(where, "logprobs", "position " + std::to_string(i) + " has no log-probability");
    const double v = tl[i].get<double>();
    s.loglik += v;
    double best = -1e300;
    for (const auto& [tok, x] : top[i].items())
      if (x.is_number()) best = std::max(best, x.get<double>());
    s.greedy = s.greedy && v == best;
  }
  return s;
}

}  // namespace

OpenAiClient::OpenAiClient(ServerOptions options) : o_(std::move(options)) {
  if (o_.url.empty()) throw Error(ErrorKind::kUsage, "", "--server", "no server URL given");
  if (o_.concurrency < 1) throw Error(ErrorKind::kUsage, "", "--concurrency", "--concurrency must be at least 1");
}

std::string OpenAiClient::base() const {
  std::string b = o_.url;
  while (!b.empty() && b.back() == '/') b.pop_back();
  if (b.size() >= 3 && b.ends_with("/v1")) b.resize(b.size() - 3);
  return b;
}

ServerInfo OpenAiClient::probe() {
  const std::string url = base() + "/v1/models";
  io::HttpClient http(o_.api_key, io::HttpClient::host_of(url));
  const io::HttpResult r = with_retries(o_.max_retries, [&] { return http.get_text(url, 1u << 20); });
  if (!r.transport_ok)
    throw_not_found(url, "--server", "the server does not answer: " + r.error,
                    "start it first (qloom serve MODEL, vllm serve MODEL) and check the URL");
  if (r.status != 200)
    throw_invalid(url, "--server", "GET /v1/models answered HTTP " + std::to_string(r.status) + ": " +
                                       server_message(r.body));
  const json j = json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array() || j["data"].empty())
    throw_not_found(url, "data", "the server lists no model", "check that the server has loaded a model");
  for (const json& m : j["data"]) {
    if (!m.is_object() || !m.contains("id") || !m["id"].is_string()) continue;
    const std::string id = m["id"].get<std::string>();
    if (!o_.model.empty() && id != o_.model) continue;
    info_.model = id;
    info_.owned_by = m.contains("owned_by") && m["owned_by"].is_string() ? m["owned_by"].get<std::string>() : "";
    info_.backend = backend_of(info_.owned_by);
    return info_;
  }
  throw_invalid(url, "--model", "the server does not serve a model named '" + o_.model + "'",
                "pass one of the ids GET /v1/models lists, or drop --model");
}

std::string OpenAiClient::post(const std::string& path, const std::string& body) {
  const std::string url = base() + path;
  io::HttpClient http(o_.api_key, io::HttpClient::host_of(url));
  const io::HttpResult r = with_retries(o_.max_retries, [&] { return http.post_json(url, body, o_.timeout_s); });
  if (!r.transport_ok)
    throw_not_found(url, "--server", "the server did not answer after " + std::to_string(o_.max_retries + 1) +
                                         " tries: " + r.error,
                    "check that the server is up and not overloaded; raise --max_retries");
  if (r.status != 200)
    throw_invalid(url, "", "the server answered HTTP " + std::to_string(r.status) + ": " + server_message(r.body));
  return r.body;
}

std::vector<OptionScore> OpenAiClient::loglikelihood(const std::vector<TokenPair>& pairs) {
  if (info_.model.empty()) probe();
  std::vector<OptionScore> out;
  const auto keep = size_t(std::max<int64_t>(2, o_.max_length - 1));  // one position kept for the generated token
  for (const TokenPair& p : pairs) {
    std::vector<int32_t> seq = p.context;
    seq.insert(seq.end(), p.continuation.begin(), p.continuation.end());
    const size_t cut = seq.size() > keep ? seq.size() - keep : 0;
    seq.erase(seq.begin(), seq.begin() + std::ptrdiff_t(cut));
    const size_t ctxlen = p.context.size() > cut ? p.context.size() - cut : 1;
    const json req = {{"model", info_.model}, {"prompt", seq},   {"temperature", 0}, {"max_tokens", 1},
                      {"logprobs", 1},        {"seed", o_.seed}, {"echo", true}};
    const std::string where = base() + "/v1/completions";
    const json res = json::parse(post("/v1/completions", req.dump()), nullptr, false);
    if (!res.is_object() || !res.contains("choices") || !res["choices"].is_array() || res["choices"].empty())
      throw_invalid(where, "choices", "the server's answer has no choices");
    out.push_back(sum_logprobs(logprobs_of(res["choices"][0], where), ctxlen, seq.size(), where));
  }
  return out;
}

std::string OpenAiClient::generate(const std::vector<int32_t>& prompt, int64_t max_tokens,
                                   const std::vector<std::string>& stop) {
  if (info_.model.empty()) probe();
  const json req = {{"model", info_.model}, {"prompt", prompt}, {"temperature", 0},
                    {"max_tokens", max_tokens}, {"stop", stop}, {"seed", o_.seed}};
  const std::string where = base() + "/v1/completions";
  const json res = json::parse(post("/v1/completions", req.dump()), nullptr, false);
  if (!res.is_object() || !res.contains("choices") || !res["choices"].is_array() || res["choices"].empty() ||
      !res["choices"][0].contains("text") || !res["choices"][0]["text"].is_string())
    throw_invalid(where, "choices[0].text", "the server's answer has no generated text");
  return res["choices"][0]["text"].get<std::string>();
}

OptionScorer server_scorer(OpenAiClient& client) {
  return [&client](const std::vector<TokenPair>& pairs) { return client.loglikelihood(pairs); };
}

}  // namespace qloom::eval
