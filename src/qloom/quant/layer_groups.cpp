#include "qloom/quant/layer_groups.h"

#include <set>

#include "qloom/core/error.h"
#include "qloom/model/architecture.h"

namespace qloom::quant {
namespace {

using model::Architecture;
using model::ModelConfig;
using model::MoeKind;

std::string layer_prefix(int layer) {
  std::string p = "model.layers.";
  p += std::to_string(layer);
  p += ".";
  return p;
}

ScalingGroup norm_group(std::string kind, std::string norm_tensor, bool gemma, int64_t channels,
                        std::vector<std::string> linears, std::string inspect) {
  ScalingGroup g;
  g.kind = std::move(kind);
  g.prev_kind = PrevKind::kNorm;
  g.prev_op = std::move(norm_tensor);
  g.gemma_norm = gemma;
  g.channels = channels;
  g.input_site = linears.front();
  g.linears = std::move(linears);
  g.inspect = std::move(inspect);
  return g;
}

ScalingGroup linear_group(std::string kind, std::string prev, int64_t row_offset, int64_t channels,
                          std::string reader) {
  ScalingGroup g;
  g.kind = std::move(kind);
  g.prev_kind = PrevKind::kLinear;
  g.prev_op = std::move(prev);
  g.prev_row_offset = row_offset;
  g.channels = channels;
  g.linears = {reader};
  g.inspect = reader;
  g.input_site = std::move(reader);
  return g;
}

void add_attention(std::vector<ScalingGroup>& out, const ModelConfig& c, const Architecture& a,
                   const std::string& p) {
  const int64_t D = c.hidden_size, qn = c.num_heads * c.head_dim, kn = c.num_kv_heads * c.head_dim;
  const std::string norm = p + "input_layernorm.weight";
  const std::string o = p + "self_attn.o_proj";
  ScalingGroup vo;
  if (a.fused_qkv) {
    out.push_back(norm_group("attn_in", norm, a.gemma_norm, D, {p + "self_attn.qkv_proj"}, p + "self_attn"));
    vo = linear_group("attn_out", p + "self_attn.qkv_proj", qn + kn, qn, o);
  } else {
    out.push_back(norm_group("attn_in", norm, a.gemma_norm, D,
                             {p + "self_attn.q_proj", p + "self_attn.k_proj", p + "self_attn.v_proj"},
                             p + "self_attn"));
    vo = linear_group("attn_out", p + "self_attn.v_proj", 0, qn, o);
  }
  if (c.num_kv_heads != c.num_heads) {
    vo.applicable = false;
    vo.skip_reason = "grouped-query attention (";
    vo.skip_reason += std::to_string(c.num_kv_heads);
    vo.skip_reason += " KV heads for ";
    vo.skip_reason += std::to_string(c.num_heads);
    vo.skip_reason += " query heads): o_proj has more input channels than v has rows";
  }
  out.push_back(std::move(vo));
}

// gate/up/down MLP at prefix `m` ("model.layers.3.mlp.") with names g/u/d.
void add_dense_mlp(std::vector<ScalingGroup>& out, const ModelConfig& c, const Architecture& a,
                   const std::string& p, const std::string& norm) {
  const int64_t D = c.hidden_size, I = c.intermediate_size;
  const std::string m = p + "mlp.";
  if (a.fused_gate_up) {
    out.push_back(norm_group("mlp_in", norm, a.gemma_norm, D, {m + "gate_up_proj"}, p + "mlp"));
    out.push_back(linear_group("mlp_out", m + "gate_up_proj", I, I, m + "down_proj"));
  } else {
    out.push_back(norm_group("mlp_in", norm, a.gemma_norm, D, {m + "gate_proj", m + "up_proj"}, p + "mlp"));
    out.push_back(linear_group("mlp_out", m + "up_proj", 0, I, m + "down_proj"));
  }
}

void add_moe(std::vector<ScalingGroup>& out, const ModelConfig& c, const Architecture& a,
             const std::string& p, const std::string& norm) {
  const bool mixtral = a.moe == MoeKind::kMixtral;
  const std::string block = p + (mixtral ? "block_sparse_moe" : "mlp");
  const char* gate = mixtral ? "w1" : "gate_proj";
  const char* up = mixtral ? "w3" : "up_proj";
  const char* down = mixtral ? "w2" : "down_proj";
  const bool shared = a.moe == MoeKind::kQwen2Moe && c.shared_expert_intermediate_size > 0;

  ScalingGroup in;
  in.kind = "mlp_in";
  in.prev_kind = PrevKind::kNorm;
  in.prev_op = norm;
  in.gemma_norm = a.gemma_norm;
  in.channels = c.hidden_size;
  in.inspect = block;
  in.input_site = block + ".gate";  // the router sees every token
  in.fold_only.push_back(block + ".gate");
  std::vector<ScalingGroup> outs;
  for (int64_t e = 0; e < c.num_experts; ++e) {
    std::string ep = block + ".experts.";
    ep += std::to_string(e);
    ep += ".";
    in.linears.push_back(ep + gate);
    in.linears.push_back(ep + up);
    outs.push_back(linear_group("expert_out", ep + up, 0, c.moe_intermediate_size, ep + down));
  }
  if (shared) {
    const std::string sp = block + ".shared_expert.";
    in.linears.push_back(sp + "gate_proj");
    in.linears.push_back(sp + "up_proj");
    in.fold_only.push_back(block + ".shared_expert_gate");
    outs.push_back(linear_group("shared_out", sp + "up_proj", 0, c.shared_expert_intermediate_size,
                                sp + "down_proj"));
  }
  out.push_back(std::move(in));
  for (ScalingGroup& g : outs) out.push_back(std::move(g));
}

}  // namespace

std::vector<ScalingGroup> layer_scaling_groups(const ModelConfig& c, int layer) {
  const Architecture* a = model::find_architecture(c.model_type);
  if (a == nullptr) {
    std::string msg = "model_type '";
    msg += c.model_type;
    msg += "' has no scaling groups";
    std::string remedy = "supported: ";
    remedy += model::supported_model_types();
    throw Error(ErrorKind::kUnsupported, "config.json", "model_type", msg, remedy);
  }
  if (layer < 0 || layer >= c.num_layers) {
    std::string msg = "layer ";
    msg += std::to_string(layer);
    msg += " is out of range (the model has ";
    msg += std::to_string(c.num_layers);
    msg += " decoder layers)";
    throw Error(ErrorKind::kUsage, "", "layer", msg);
  }
  std::vector<ScalingGroup> out;
  const std::string p = layer_prefix(layer);
  add_attention(out, c, *a, p);
  const std::string mlp_norm =
      p + (a->sandwich_norms ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight");
  const bool moe = static_cast<size_t>(layer) < c.layer_moe.size() && c.layer_moe[static_cast<size_t>(layer)];
  if (moe) add_moe(out, c, *a, p, mlp_norm);
  else add_dense_mlp(out, c, *a, p, mlp_norm);
  return out;
}

nlohmann::json quark_scaling_layers(const ModelConfig& c) {
  nlohmann::json list = nlohmann::json::array();
  std::set<std::string> seen;
  for (int i = 0; i < static_cast<int>(c.num_layers); ++i) {
    const std::string p = layer_prefix(i);
    auto rel = [&p](const std::string& name) {
      std::string r = name.rfind(p, 0) == 0 ? name.substr(p.size()) : name;
      const std::string suffix = ".weight";
      if (r.size() > suffix.size() && r.compare(r.size() - suffix.size(), suffix.size(), suffix) == 0)
        r.resize(r.size() - suffix.size());
      return r;
    };
    for (const ScalingGroup& g : layer_scaling_groups(c, i)) {
      if (!g.applicable) continue;
      nlohmann::json e = nlohmann::json::object();
      e["prev_op"] = rel(g.prev_op);
      nlohmann::json layers = nlohmann::json::array();
      for (const std::string& l : g.linears) layers.push_back(rel(l));
      e["layers"] = layers;
      e["inp"] = rel(g.linears.front());
      if (g.linears.size() > 1 || g.inspect != g.linears.front()) e["module2inspect"] = rel(g.inspect);
      const std::string key = e.dump();
      if (seen.insert(key).second) list.push_back(std::move(e));
    }
  }
  return list;
}

}  // namespace qloom::quant
