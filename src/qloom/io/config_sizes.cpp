#include "qloom/io/config_sizes.h"

#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "qloom/core/error.h"

namespace qloom::io {
namespace {

using nlohmann::json;

constexpr std::string_view kPrefixes[] = {"model.layers.", "model.language_model.layers.",
                                          "language_model.model.layers."};

struct Facts {
  std::string prefix;               // e.g. "model." (before "layers.")
  std::set<int64_t> layers;         // indices of model.layers.N.
  std::map<int64_t, std::set<int64_t>> experts;  // layer -> expert indices
};

int64_t parse_index(std::string_view s, size_t& i) {
  int64_t v = 0;
  const size_t start = i;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i - start < 18) v = v * 10 + (s[i++] - '0');
  return i > start && i < s.size() && s[i] == '.' ? v : -1;
}

Facts gather(const WeightIndex& w) {
  Facts f;
  for (const std::string& name : w.tensor_names()) {
    for (std::string_view p : kPrefixes) {
      if (name.rfind(p, 0) != 0) continue;
      size_t i = p.size();
      const int64_t layer = parse_index(name, i);
      if (layer < 0) break;
      f.layers.insert(layer);
      if (f.prefix.empty()) f.prefix = std::string(p.substr(0, p.size() - 7));  // drop "layers."
      const size_t e = name.find(".experts.", i);
      if (e != std::string::npos) {
        size_t j = e + 9;
        const int64_t ex = parse_index(name, j);
        if (ex >= 0) f.experts[layer].insert(ex);
      }
      break;
    }
  }
  return f;
}

std::string ranges(const std::set<int64_t>& s) {
  std::string out;
  auto it = s.begin();
  while (it != s.end()) {
    const int64_t a = *it;
    int64_t b = a;
    while (std::next(it) != s.end() && *std::next(it) == b + 1) b = *++it;
    ++it;
    if (!out.empty()) out += ", ";
    out += std::to_string(a);
    if (b > a) out += ".." + std::to_string(b);
  }
  return out;
}

struct Checker {
  const json& cfg;
  const std::string& label;
  const WeightIndex& w;

  std::optional<int64_t> get(const char* key) const {
    auto it = cfg.find(key);
    if (it == cfg.end() || !it->is_number_integer()) return std::nullopt;
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return INT64_MAX;
    return it->get<int64_t>();
  }
  [[noreturn]] void fail(const char* key, int64_t value, const std::string& evidence) const {
    throw_invalid(label, key, "config.json " + std::string(key) + " = " + std::to_string(value) + " but " + evidence,
                  "fix config.json to match the checkpoint's tensors (or use the config that came with them)");
  }
  const TensorInfo* tensor(const std::string& name) const { return w.find(name); }
  // The field must equal `actual` (read from tensor `name`, dimension `dim`).
  void expect(const char* key, int64_t want, int64_t actual, const std::string& name, int dim) const {
    if (want != actual)
      fail(key, want, "tensor " + name + " has " + std::to_string(actual) + (dim == 0 ? " rows" : " columns"));
  }
};

void check_layers(const Checker& c, const Facts& f) {
  const auto n = c.get("num_hidden_layers");
  if (!n) return;
  const int64_t want = *n;
  const bool exact = !f.layers.empty() && *f.layers.begin() == 0 && *f.layers.rbegin() + 1 == want &&
                     static_cast<int64_t>(f.layers.size()) == want;
  if (!exact) c.fail("num_hidden_layers", want, "the weights hold layers " + ranges(f.layers));
}

void check_experts(const Checker& c, const Facts& f) {
  if (f.experts.empty()) return;
  const char* key = c.get("num_local_experts") ? "num_local_experts" : "num_experts";
  const auto n = c.get(key);
  if (!n) return;
  for (const auto& [layer, ex] : f.experts) {
    const bool exact = *ex.begin() == 0 && *ex.rbegin() + 1 == *n && static_cast<int64_t>(ex.size()) == *n;
    if (!exact)
      c.fail(key, *n, "layer " + std::to_string(layer) + " of the weights holds experts " + ranges(ex));
  }
}

void check_shapes(const Checker& c, const Facts& f) {
  const std::string p = f.prefix;
  const TensorInfo* emb = c.tensor(p + "embed_tokens.weight");
  const auto hidden = c.get("hidden_size");
  if (emb && emb->shape.size() == 2) {
    if (auto v = c.get("vocab_size")) c.expect("vocab_size", *v, static_cast<int64_t>(emb->shape[0]), emb->name, 0);
    if (hidden) c.expect("hidden_size", *hidden, static_cast<int64_t>(emb->shape[1]), emb->name, 1);
  }
  const std::string l0 = p + "layers." + std::to_string(*f.layers.begin()) + ".";
  const auto heads = c.get("num_attention_heads"), kv = c.get("num_key_value_heads"), hd = c.get("head_dim");
  const TensorInfo* q = c.tensor(l0 + "self_attn.q_proj.weight");
  const TensorInfo* k = c.tensor(l0 + "self_attn.k_proj.weight");
  if (q && k && q->shape.size() == 2 && k->shape.size() == 2 && heads && *heads > 0) {
    const int64_t qr = static_cast<int64_t>(q->shape[0]), kr = static_cast<int64_t>(k->shape[0]);
    if (qr % *heads != 0) c.fail("num_attention_heads", *heads, q->name + " has " + std::to_string(qr) + " rows");
    const int64_t d = qr / *heads;
    if (hd && *hd != d) c.fail("head_dim", *hd, q->name + " has " + std::to_string(qr) + " rows for " +
                                                   std::to_string(*heads) + " heads");
    const int64_t kvh = kv ? *kv : *heads;
    if (kvh <= 0 || kvh * d != kr)
      c.fail(kv ? "num_key_value_heads" : "num_attention_heads", kvh,
             k->name + " has " + std::to_string(kr) + " rows (head_dim " + std::to_string(d) + ")");
  }
  const auto inter = c.get("intermediate_size");
  for (const char* name : {"mlp.gate_proj.weight", "mlp.up_proj.weight", "block_sparse_moe.experts.0.w1.weight"})
    if (const TensorInfo* t = c.tensor(l0 + name); t && inter && t->shape.size() == 2)
      c.expect("intermediate_size", *inter, static_cast<int64_t>(t->shape[0]), t->name, 0);
  if (const TensorInfo* t = c.tensor(l0 + "mlp.gate_up_proj.weight"); t && inter && t->shape.size() == 2)
    c.expect("intermediate_size", 2 * *inter, static_cast<int64_t>(t->shape[0]), t->name, 0);
  for (const auto& [layer, ex] : f.experts) {
    const TensorInfo* t = c.tensor(p + "layers." + std::to_string(layer) + ".mlp.experts.0.gate_proj.weight");
    if (const auto mi = c.get("moe_intermediate_size"); t && mi && t->shape.size() == 2)
      c.expect("moe_intermediate_size", *mi, static_cast<int64_t>(t->shape[0]), t->name, 0);
    break;
  }
}

}  // namespace

void check_config_sizes(const json& config, const WeightIndex& weights, const std::string& label) {
  if (!config.is_object()) return;
  const auto tc = config.find("text_config");
  const json& text = tc != config.end() && tc->is_object() ? *tc : config;
  const Facts f = gather(weights);
  if (f.layers.empty()) return;
  const Checker c{text, label, weights};
  check_layers(c, f);
  check_experts(c, f);
  if (!config.contains("quantization_config")) check_shapes(c, f);
}

}  // namespace qloom::io
