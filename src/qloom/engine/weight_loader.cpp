#include "qloom/engine/weight_loader.h"

#include <cstring>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/engine/norms.h"

namespace qloom::engine {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  out += "]";
  return out;
}

// W (F32 or BF16) moved onto the native bf16 dot kernel: bf16 weights (F32
// ones rounded, RNE), activations rounded to bf16 in the kernel.
void to_bf16_compute(LinearWeight& w) {
  QuantLinearData q;
  q.weight = QWeightFormat::kBf16;
  q.act = QActFormat::kBf16;
  q.out = w.out;
  q.in = w.in;
  const size_t n = static_cast<size_t>(w.out * w.in);
  q.codes.resize(2 * n);
  if (w.type == WeightType::kBF16) std::memcpy(q.codes.data(), w.bf16.data(), 2 * n);
  else f32_to_bf16(w.f32.data(), reinterpret_cast<uint16_t*>(q.codes.data()), n);
  w.f32 = {};
  w.bf16 = {};
  w.packed.reset();
  w.native = make_quant_linear(std::move(q));
}

std::string layer_prefix(int64_t i) {
  std::string p = "model.layers.";
  p += std::to_string(i);
  p += ".";
  return p;
}

class Loader {
 public:
  Loader(const WeightSource& src, LoadOptions::Weights mode, const std::string& label,
         LoadOptions::Compute compute = LoadOptions::Compute::kF32)
      : src_(src), mode_(mode), compute_(compute), label_(label) {}

  HostTensor fetch(const std::string& name, const std::vector<int64_t>& shape) const {
    if (!src_.contains(name)) {
      std::string msg = "tensor ";
      msg += name;
      msg += " is missing (expected shape ";
      msg += shape_str(shape);
      msg += ")";
      throw_invalid(label_, name, msg, "use a complete checkpoint of this architecture");
    }
    HostTensor t = src_.load(name);
    if (t.shape != shape) {
      std::string msg = "tensor ";
      msg += name;
      msg += " has shape ";
      msg += shape_str(t.shape);
      msg += ", expected ";
      msg += shape_str(shape);
      throw_invalid(label_, name, msg, "the checkpoint does not match its config.json");
    }
    return t;
  }

  std::vector<float> vec(const std::string& name, int64_t n) const {
    HostTensor t = fetch(name, {n});
    std::vector<float> out(static_cast<size_t>(n));
    to_f32(t.dtype, t.bytes.data(), out.data(), out.size());
    src_.release(name);
    return out;
  }

  std::vector<float> norm(const std::string& name, int64_t n, bool gemma) const {
    std::vector<float> w = vec(name, n);
    if (gemma) fold_gemma_norm_weight(w);
    return w;
  }

  // A linear for the forward pass: native when the source hands it over so,
  // on the bf16 dot kernel under Compute::kBF16, else F32/BF16 (plain()).
  NamedLinear linear(const std::string& module, int64_t out, int64_t in, bool bias) const {
    if (std::optional<QuantLinearData> q = src_.load_native(module)) return native(module, out, in, bias, std::move(*q));
    NamedLinear l = plain(module, out, in, bias);
    if (compute_ == LoadOptions::Compute::kBF16) to_bf16_compute(l.w);
    return l;
  }

  // The token embedding (rows looked up, never a native kernel).
  NamedLinear plain(const std::string& module, int64_t out, int64_t in, bool bias) const {
    NamedLinear l;
    l.name = module;
    const std::string wname = module + ".weight";
    HostTensor t = fetch(wname, {out, in});
    LinearWeight& w = l.w;
    w.out = out;
    w.in = in;
    const size_t n = static_cast<size_t>(out * in);
    const bool bf16 = mode_ == LoadOptions::Weights::kBF16 ||
                      (mode_ == LoadOptions::Weights::kAuto && t.dtype == DType::kBF16);
    if (bf16) {
      w.type = WeightType::kBF16;
      w.bf16.resize(n);
      if (t.dtype == DType::kBF16) {
        std::memcpy(w.bf16.data(), t.bytes.data(), n * 2);
      } else {
        std::vector<float> tmp(n);
        to_f32(t.dtype, t.bytes.data(), tmp.data(), n);
        f32_to_bf16(tmp.data(), w.bf16.data(), n);
      }
    } else {
      w.type = WeightType::kF32;
      w.f32.resize(n);
      to_f32(t.dtype, t.bytes.data(), w.f32.data(), n);
    }
    t = HostTensor{};
    src_.release(wname);
    const std::string bname = module + ".bias";
    if (bias || src_.contains(bname)) w.bias = vec(bname, out);
    return l;
  }

 private:
  NamedLinear native(const std::string& module, int64_t out, int64_t in, bool bias, QuantLinearData q) const {
    if (q.out != out || q.in != in) {
      throw_invalid(label_, module + ".weight",
                    "tensor " + module + ".weight has shape [" + std::to_string(q.out) + ", " + std::to_string(q.in) +
                        "], expected " + shape_str({out, in}),
                    "the checkpoint does not match its config.json");
    }
    if (q.name.empty()) q.name = module;
    NamedLinear l;
    l.name = module;
    l.w.out = out;
    l.w.in = in;
    l.w.native = make_quant_linear(std::move(q));
    const std::string bname = module + ".bias";
    if (bias || src_.contains(bname)) l.w.bias = vec(bname, out);
    return l;
  }

  const WeightSource& src_;
  LoadOptions::Weights mode_;
  LoadOptions::Compute compute_;
  std::string label_;
};

MlpWeights load_mlp(const Loader& L, const std::string& p, const char* gate, const char* up,
                    const char* down, int64_t hidden, int64_t inter, bool bias) {
  MlpWeights m;
  m.gate = L.linear(p + gate, inter, hidden, bias);
  m.up = L.linear(p + up, inter, hidden, bias);
  m.down = L.linear(p + down, hidden, inter, bias);
  return m;
}

AttentionWeights load_attention(const Loader& L, const model::ModelConfig& c, const model::Architecture& a,
                                const std::string& p) {
  AttentionWeights w;
  const int64_t D = c.hidden_size, hd = c.head_dim;
  const int64_t qn = c.num_heads * hd, kn = c.num_kv_heads * hd;
  if (a.fused_qkv) {
    w.qkv = L.linear(p + "self_attn.qkv_proj", qn + 2 * kn, D, c.qkv_bias);
  } else {
    w.q = L.linear(p + "self_attn.q_proj", qn, D, c.qkv_bias);
    w.k = L.linear(p + "self_attn.k_proj", kn, D, c.qkv_bias);
    w.v = L.linear(p + "self_attn.v_proj", kn, D, c.qkv_bias);
  }
  w.o = L.linear(p + "self_attn.o_proj", D, qn, c.o_bias);
  if (a.qk_norm) {
    w.q_norm = L.norm(p + "self_attn.q_norm.weight", hd, a.gemma_norm);
    w.k_norm = L.norm(p + "self_attn.k_norm.weight", hd, a.gemma_norm);
  }
  return w;
}

MoeWeights load_moe(const Loader& L, const model::ModelConfig& c, const model::Architecture& a, const std::string& p) {
  MoeWeights m;
  const int64_t D = c.hidden_size, E = c.num_experts, I = c.moe_intermediate_size;
  const std::string block = p + (a.moe == model::MoeKind::kMixtral ? "block_sparse_moe." : "mlp.");
  m.router = L.linear(block + "gate", E, D, false);
  for (int64_t e = 0; e < E; ++e) {
    std::string ep = block + "experts." + std::to_string(e) + ".";
    if (a.moe == model::MoeKind::kMixtral) m.experts.push_back(load_mlp(L, ep, "w1", "w3", "w2", D, I, false));
    else m.experts.push_back(load_mlp(L, ep, "gate_proj", "up_proj", "down_proj", D, I, false));
  }
  if (a.moe == model::MoeKind::kQwen2Moe && c.shared_expert_intermediate_size > 0) {
    m.has_shared = true;
    m.shared = load_mlp(L, block + "shared_expert.", "gate_proj", "up_proj", "down_proj", D,
                        c.shared_expert_intermediate_size, false);
    m.shared_gate = L.linear(block + "shared_expert_gate", 1, D, false);
  }
  return m;
}

}  // namespace

size_t LayerWeights::bytes() const {
  auto mlp_bytes = [](const MlpWeights& m) {
    return m.gate.w.bytes() + m.up.w.bytes() + m.gate_up.w.bytes() + m.down.w.bytes();
  };
  size_t b = 4 * (input_norm.size() + post_attention_norm.size() + pre_ff_norm.size() + post_ff_norm.size() +
                  attn.q_norm.size() + attn.k_norm.size());
  b += attn.q.w.bytes() + attn.k.w.bytes() + attn.v.w.bytes() + attn.qkv.w.bytes() + attn.o.w.bytes();
  b += mlp_bytes(mlp) + moe.router.w.bytes() + moe.shared_gate.w.bytes() + mlp_bytes(moe.shared);
  for (const MlpWeights& e : moe.experts) b += mlp_bytes(e);
  return b;
}

size_t ModelWeights::bytes() const {
  size_t b = embed.w.bytes() + lm_head.w.bytes() + final_norm.size() * 4;
  for (const LayerWeights& l : layers) b += l.bytes();
  return b;
}

NamedLinear load_embedding(const WeightSource& src, const model::ModelConfig& c, LoadOptions::Weights mode,
                           const std::string& label) {
  return Loader(src, mode, label).plain("model.embed_tokens", c.vocab_size, c.hidden_size, false);
}

LayerWeights load_layer_weights(const WeightSource& src, const model::ModelConfig& c, const model::Architecture& a,
                                LoadOptions::Weights mode, const std::string& label, int64_t i,
                                LoadOptions::Compute compute) {
  Loader L(src, mode, label, compute);
  const int64_t D = c.hidden_size;
  const std::string p = layer_prefix(i);
  LayerWeights l;
  l.input_norm = L.norm(p + "input_layernorm.weight", D, a.gemma_norm);
  l.post_attention_norm = L.norm(p + "post_attention_layernorm.weight", D, a.gemma_norm);
  if (a.sandwich_norms) {
    l.pre_ff_norm = L.norm(p + "pre_feedforward_layernorm.weight", D, a.gemma_norm);
    l.post_ff_norm = L.norm(p + "post_feedforward_layernorm.weight", D, a.gemma_norm);
  }
  l.attn = load_attention(L, c, a, p);
  l.is_moe = c.layer_moe[static_cast<size_t>(i)] != 0;
  if (l.is_moe) {
    l.moe = load_moe(L, c, a, p);
  } else if (a.fused_gate_up) {
    l.mlp.gate_up = L.linear(p + "mlp.gate_up_proj", 2 * c.intermediate_size, D, c.mlp_bias);
    l.mlp.down = L.linear(p + "mlp.down_proj", D, c.intermediate_size, c.mlp_bias);
  } else {
    l.mlp = load_mlp(L, p + "mlp.", "gate_proj", "up_proj", "down_proj", D, c.intermediate_size, c.mlp_bias);
  }
  return l;
}

std::vector<float> load_final_norm(const WeightSource& src, const model::ModelConfig& c, const model::Architecture& a,
                                   const std::string& label) {
  return Loader(src, LoadOptions::Weights::kF32, label).norm("model.norm.weight", c.hidden_size, a.gemma_norm);
}

ModelWeights load_weights(const WeightSource& src, const model::ModelConfig& c, const model::Architecture& a,
                          LoadOptions::Weights mode, const std::string& label, LoadOptions::Compute compute) {
  ModelWeights m;
  m.embed = load_embedding(src, c, mode, label);
  m.layers.reserve(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i)
    m.layers.push_back(load_layer_weights(src, c, a, mode, label, i, compute));
  m.final_norm = load_final_norm(src, c, a, label);
  m.tied_head = c.tie_word_embeddings && !src.contains("lm_head.weight");
  if (!m.tied_head) {
    m.lm_head = Loader(src, mode, label, compute).linear("lm_head", c.vocab_size, c.hidden_size, false);
  } else {
    m.lm_head.name = "lm_head";
    if (compute == LoadOptions::Compute::kBF16) {  // its own copy on the bf16 kernel
      m.lm_head.w = m.embed.w;
      to_bf16_compute(m.lm_head.w);
    }
  }
  return m;
}

}  // namespace qloom::engine
