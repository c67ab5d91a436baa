#include "qloom/eval/gsm8k.h"

#include <algorithm>
#include <regex>

#include "qloom/core/error.h"
#include "qloom/eval/py_random.h"

namespace qloom::eval {
namespace {

const char* const kInvalid = "[invalid]";

std::string strip(const std::string& s) {
  const char* ws = " \t\n\r\v\f";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

std::string doc_to_text(const Gsm8kDoc& d) {
  std::string s = "Question: ";
  s += d.question;
  s += "\nAnswer:";
  return s;
}

}  // namespace

std::vector<std::string> build_gsm8k_prompts(const std::vector<Gsm8kDoc>& test,
                                             const std::vector<Gsm8kDoc>& train, size_t n,
                                             const Gsm8kConfig& cfg) {
  n = std::min(n, test.size());
  if (cfg.num_fewshot > 0 && train.size() < size_t(cfg.num_fewshot))
    throw_invalid("", "", "the few-shot pool has fewer than " + std::to_string(cfg.num_fewshot) +
                              " examples");
  PyRandom rnd(cfg.fewshot_seed);
  std::vector<std::string> prompts;
  prompts.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string p;
    if (cfg.num_fewshot > 0) {
      for (uint64_t idx : rnd.sample(train.size(), uint64_t(cfg.num_fewshot))) {
        p += doc_to_text(train[idx]);
        p += ' ';  // target_delimiter
        p += train[idx].answer;
        p += "\n\n";  // fewshot_delimiter
      }
    }
    p += doc_to_text(test[i]);
    prompts.push_back(std::move(p));
  }
  return prompts;
}

std::string gsm8k_extract_strict(const std::string& response) {
  static const std::regex re("#### (-?[0-9.,]+)");
  std::smatch m;
  if (!std::regex_search(response, m, re)) return kInvalid;
  return strip(m[1].str());
}

std::string gsm8k_extract_flexible(const std::string& response) {
  static const std::regex re("(-?[$0-9.,]{2,})|(-?[0-9]+)");
  std::string last;
  bool found = false;
  for (auto it = std::sregex_iterator(response.begin(), response.end(), re);
       it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    found = true;
    last = m[1].matched && m[1].length() > 0 ? m[1].str()
           : m[2].matched && m[2].length() > 0 ? m[2].str()
                                                : std::string(kInvalid);
  }
  return found ? strip(last) : std::string(kInvalid);
}

std::string gsm8k_normalize(const std::string& in) {
  std::string s;
  for (char c : in)
    if (c != ',' && c != '$') s += c;  // regexes "," and "\$"
  // "(?s).*#### ": greedy with DOTALL, so everything up to the last "#### ".
  if (const size_t pos = s.rfind("#### "); pos != std::string::npos) s.erase(0, pos + 5);
  // "\.$": a '.' at the end, or just before a final '\n' (Python's '$').
  if (!s.empty() && s.back() == '.')
    s.pop_back();
  else if (s.size() >= 2 && s[s.size() - 1] == '\n' && s[s.size() - 2] == '.')
    s.erase(s.size() - 2, 1);
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');  // ignore_case (answers are ASCII)
  return s;
}

bool gsm8k_exact_match(const std::string& prediction, const std::string& reference) {
  return gsm8k_normalize(prediction) == gsm8k_normalize(reference);
}

std::string cut_at_stop(const std::string& text, const std::vector<std::string>& stops) {
  size_t cut = text.size();
  for (const std::string& s : stops)
    if (!s.empty()) cut = std::min(cut, text.find(s));
  return text.substr(0, cut);
}

std::string generate_greedy(engine::Model& model, const engine::ForwardHooks* hooks,
                            const text::Tokenizer& tok, const std::vector<int32_t>& prompt,
                            const GenerateOptions& opt) {
  if (prompt.empty()) throw_invalid("", "", "empty prompt");
  const int64_t vocab = model.config().vocab_size;
  auto cache = model.new_cache(int64_t(prompt.size()) + opt.max_new);
  std::vector<int32_t> out;
  std::vector<float> logits = model.forward(prompt, *cache, true, hooks);
  std::string text;
  for (int64_t step = 0; step < opt.max_new; ++step) {
    int32_t next = 0;
    for (int64_t i = 1; i < vocab; ++i)
      if (logits[size_t(i)] > logits[size_t(next)]) next = int32_t(i);
    if (std::find(opt.eos_ids.begin(), opt.eos_ids.end(), next) != opt.eos_ids.end()) break;
    out.push_back(next);
    text = tok.decode(out, true);
    bool stopped = false;
    for (const std::string& s : opt.stops)
      if (!s.empty() && text.find(s) != std::string::npos) stopped = true;
    if (stopped || step + 1 == opt.max_new) break;
    const int32_t one[1] = {next};
    logits = model.forward(one, *cache, true, hooks);
  }
  return cut_at_stop(text, opt.stops);
}

double Gsm8kResult::accuracy_strict() const {
  if (items.empty()) return 0;
  return double(std::count_if(items.begin(), items.end(), [](auto& i) { return i.strict_ok; })) /
         double(items.size());
}
double Gsm8kResult::accuracy_flexible() const {
  if (items.empty()) return 0;
  return double(std::count_if(items.begin(), items.end(), [](auto& i) { return i.flexible_ok; })) /
         double(items.size());
}

Gsm8kResult run_gsm8k(const Generator& generate, const text::Tokenizer& tok, const std::vector<Gsm8kDoc>& test,
                      const std::vector<Gsm8kDoc>& train, size_t n, const Gsm8kConfig& cfg, int64_t max_length,
                      const std::vector<int64_t>& config_eos_ids, const std::function<bool(int64_t)>& on_item) {
  const std::vector<std::string> prompts = build_gsm8k_prompts(test, train, n, cfg);
  const int64_t max_ctx = max_length - cfg.max_gen_toks;
  if (max_ctx <= 0)
    throw Error(ErrorKind::kUsage, "", "--max_gen_toks",
                "max_gen_toks " + std::to_string(cfg.max_gen_toks) +
                    " leaves no room for the prompt in the model's " + std::to_string(max_length) +
                    " positions",
                "pass a smaller --max_gen_toks");
  GenerateOptions gen;
  gen.max_new = cfg.max_gen_toks;
  gen.stops = {"Question:", "</s>", "<|im_end|>"};
  if (const auto eos = tok.eos_id()) {
    gen.eos_ids.push_back(*eos);
    const int32_t e[1] = {*eos};
    const std::string eos_text = tok.decode(e, false);
    if (std::find(gen.stops.begin(), gen.stops.end(), eos_text) == gen.stops.end())
      gen.stops.push_back(eos_text);
  }
  for (int64_t id : config_eos_ids) gen.eos_ids.push_back(int32_t(id));

  Gsm8kResult r;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int32_t> ids = tok.encode(prompts[i], true);
    if (int64_t(ids.size()) > max_ctx) ids.erase(ids.begin(), ids.end() - max_ctx);
    Gsm8kItem item;
    item.response = generate(ids, gen);
    item.strict = gsm8k_extract_strict(item.response);
    item.flexible = gsm8k_extract_flexible(item.response);
    item.strict_ok = gsm8k_exact_match(item.strict, test[i].answer);
    item.flexible_ok = gsm8k_exact_match(item.flexible, test[i].answer);
    r.items.push_back(std::move(item));
    if (on_item && !on_item(r.n())) break;
  }
  return r;
}

Gsm8kResult run_gsm8k(engine::Model& model, const engine::ForwardHooks* hooks,
                      const text::Tokenizer& tok, const std::vector<Gsm8kDoc>& test,
                      const std::vector<Gsm8kDoc>& train, size_t n, const Gsm8kConfig& cfg,
                      const std::function<bool(int64_t)>& on_item) {
  const int64_t max_length = model.config().max_position_embeddings > 0
                                 ? model.config().max_position_embeddings
                                 : 2048;
  const Generator engine_generator = [&](const std::vector<int32_t>& ids, const GenerateOptions& gen) {
    return generate_greedy(model, hooks, tok, ids, gen);
  };
  return run_gsm8k(engine_generator, tok, test, train, n, cfg, max_length, model.config().eos_token_ids, on_item);
}

}  // namespace qloom::eval
