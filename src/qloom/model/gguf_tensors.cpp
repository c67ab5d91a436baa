#include "qloom/model/gguf_tensors.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <string_view>

#include "qloom/core/error.h"
#include "qloom/io/gguf.h"
#include "qloom/model/gguf_config.h"

namespace qloom::model {
namespace {

using Shape = std::vector<uint64_t>;

// blk.N.<gguf> -> model.layers.N.<hf>, with the expected shape.
struct LayerTensor {
  const char* gguf;
  const char* hf;
};
constexpr LayerTensor kLayerTensors[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.bias", "self_attn.o_proj.bias"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"ffn_gate.bias", "mlp.gate_proj.bias"},
    {"ffn_up.bias", "mlp.up_proj.bias"},
    {"ffn_down.bias", "mlp.down_proj.bias"},
};

Shape expected_layer_shape(std::string_view g, const GgufModelInfo& m) {
  const auto h = uint64_t(m.hidden), q = uint64_t(m.heads * m.head_dim), kv = uint64_t(m.kv_heads * m.head_dim),
             ff = uint64_t(m.intermediate), hd = uint64_t(m.head_dim);
  if (g == "attn_norm.weight" || g == "ffn_norm.weight" || g == "attn_output.bias" || g == "ffn_down.bias") return {h};
  if (g == "attn_q.weight") return {q, h};
  if (g == "attn_k.weight" || g == "attn_v.weight") return {kv, h};
  if (g == "attn_output.weight") return {h, q};
  if (g == "attn_q.bias") return {q};
  if (g == "attn_k.bias" || g == "attn_v.bias") return {kv};
  if (g == "attn_q_norm.weight" || g == "attn_k_norm.weight") return {hd};
  if (g == "ffn_gate.weight" || g == "ffn_up.weight") return {ff, h};
  if (g == "ffn_down.weight") return {h, ff};
  return {ff};  // ffn_gate.bias, ffn_up.bias
}

std::string tensor_shape_text(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

[[noreturn]] void unmapped(const io::GgufFile& f, const std::string& name) {
  throw Error(ErrorKind::kUnsupported, f.path().string(), name,
              "a GGUF tensor qloom does not map to a HuggingFace name for this architecture",
              "convert the original HuggingFace checkpoint instead of this GGUF");
}

// (HF name, expected shape, Q/K heads) of one GGUF tensor.
GgufTensorPlan plan_one(const io::GgufFile& f, const io::GgufTensorInfo& t, const GgufModelInfo& m) {
  GgufTensorPlan p;
  p.info = &t;
  Shape want;
  const auto h = uint64_t(m.hidden), v = uint64_t(m.vocab);
  if (t.name == "token_embd.weight") {
    p.hf_name = "model.embed_tokens.weight", want = {v, h};
  } else if (t.name == "output_norm.weight") {
    p.hf_name = "model.norm.weight", want = {h};
  } else if (t.name == "output.weight") {
    p.hf_name = "lm_head.weight", want = {v, h};
  } else if (t.name.rfind("blk.", 0) == 0) {
    const size_t dot = t.name.find('.', 4);
    int64_t layer = -1;
    const char* first = t.name.data() + 4;
    const char* last = t.name.data() + (dot == std::string::npos ? t.name.size() : dot);
    const auto [ptr, ec] = std::from_chars(first, last, layer);
    if (ec != std::errc() || ptr != last || layer < 0 || layer >= m.layers) unmapped(f, t.name);
    const std::string_view rest = std::string_view(t.name).substr(dot + 1);
    const auto it = std::find_if(std::begin(kLayerTensors), std::end(kLayerTensors),
                                 [&](const LayerTensor& lt) { return rest == lt.gguf; });
    if (it == std::end(kLayerTensors)) unmapped(f, t.name);
    const bool qk_norm = rest.find("_norm.weight") != std::string_view::npos && rest.rfind("attn_", 0) == 0 &&
                         rest != "attn_norm.weight";
    if (qk_norm && m.model_type != "qwen3") unmapped(f, t.name);
    p.hf_name = "model.layers." + std::to_string(layer) + "." + it->hf;
    want = expected_layer_shape(rest, m);
    if (m.permute_qk && (rest == "attn_q.weight" || rest == "attn_q.bias")) p.unpermute_heads = m.heads;
    if (m.permute_qk && (rest == "attn_k.weight" || rest == "attn_k.bias")) p.unpermute_heads = m.kv_heads;
  } else {
    unmapped(f, t.name);
  }
  p.shape = t.shape();
  if (p.shape != want)
    throw_invalid(f.path().string(), t.name,
                  "has shape " + tensor_shape_text(p.shape) + " where the metadata implies " + tensor_shape_text(want),
                  "the GGUF's hyper-parameters and tensors disagree; re-create the file");
  return p;
}

void check_complete(const io::GgufFile& f, const GgufModelInfo& m, const std::vector<GgufTensorPlan>& plans) {
  std::map<std::string, bool> have;
  for (const auto& p : plans) have[p.hf_name] = true;
  std::vector<std::string> need = {"model.embed_tokens.weight", "model.norm.weight"};
  if (!m.tied) need.push_back("lm_head.weight");
  for (int64_t i = 0; i < m.layers; ++i)
    for (const char* s : {"input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.q_proj.weight",
                          "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                          "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"})
      need.push_back("model.layers." + std::to_string(i) + "." + s);
  if (m.model_type == "qwen3")
    for (int64_t i = 0; i < m.layers; ++i)
      for (const char* s : {"self_attn.q_norm.weight", "self_attn.k_norm.weight"})
        need.push_back("model.layers." + std::to_string(i) + "." + s);
  for (const auto& n : need)
    if (!have.count(n))
      throw_invalid(f.path().string(), n, "missing: the metadata describes a tensor the file does not hold",
                    "the GGUF is incomplete; re-create it");
}

void permute_rows(std::span<float> w, int64_t rows, int64_t cols, int64_t heads, bool to_hf) {
  if (heads <= 0 || rows % heads != 0 || (rows / heads) % 2 != 0 || int64_t(w.size()) != rows * cols)
    throw Error(ErrorKind::kInternal, "", "", "Q/K permutation: rows must be heads x an even head size");
  const int64_t hd = rows / heads, half = hd / 2;
  std::vector<float> head(static_cast<size_t>(hd * cols));
  for (int64_t h = 0; h < heads; ++h) {
    float* base = w.data() + h * hd * cols;
    std::copy(base, base + hd * cols, head.begin());
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < half; ++j) {
        const int64_t hf = i * half + j, gg = 2 * j + i;
        const float* src = head.data() + (to_hf ? gg : hf) * cols;
        std::copy(src, src + cols, base + (to_hf ? hf : gg) * cols);
      }
  }
}

}  // namespace

std::vector<GgufTensorPlan> plan_gguf_tensors(const io::GgufFile& file, const GgufModelInfo& info) {
  std::vector<GgufTensorPlan> plans;
  plans.reserve(file.tensors().size());
  for (const auto& t : file.tensors()) plans.push_back(plan_one(file, t, info));
  std::sort(plans.begin(), plans.end(),
            [](const GgufTensorPlan& a, const GgufTensorPlan& b) { return a.hf_name < b.hf_name; });
  check_complete(file, info, plans);
  return plans;
}

void unpermute_qk_rows(std::span<float> w, int64_t rows, int64_t cols, int64_t heads) {
  permute_rows(w, rows, cols, heads, true);
}

void permute_qk_rows(std::span<float> w, int64_t rows, int64_t cols, int64_t heads) {
  permute_rows(w, rows, cols, heads, false);
}

}  // namespace qloom::model
