#include "qloom/export/gguf_export.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <unordered_map>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/model/model_config.h"
#include "qloom/export/gguf_metadata.h"
#include "qloom/export/quark_config.h"
#include "qloom/export/quark_tensors.h"
#include "qloom/io/gguf_quant.h"
#include "qloom/io/gguf_writer.h"
#include "qloom/io/model_dir.h"
#include "qloom/quant/layer_selection.h"
#include "qloom/quant/quantize_fast.h"

namespace qloom::exporter {
namespace fs = std::filesystem;
using io::GgmlType;

namespace {

enum class How { kVector, kPlain, kCarry, kRefit, kDequant };

struct Entry {
  std::string hf_name, gguf_name;
  std::vector<uint64_t> shape;  // HF row-major
  uint64_t qk_heads = 0;        // > 0: permute rows as llama.cpp does
  How how = How::kPlain;
  GgmlType type = GgmlType::kF32;
  std::optional<quant::QuantSpec> spec;
};

struct Ctx {
  explicit Ctx(io::ModelDir d) : dir(std::move(d)) {}
  io::ModelDir dir;
  model::ModelConfig cfg;
  std::string file;  // config.json, for errors
  GgufExportOptions opt;
  std::unordered_map<std::string, quant::QuantSpec> specs;  // module -> weight spec
  PackOrder order = PackOrder::kReorder;
  GgufExportSummary sum;
};

bool fits(GgmlType t, uint64_t ne0) { return ne0 % io::ggml_type_info(t).block_elems == 0; }

// float_type, or its fallback when the rows are not whole blocks of it.
GgmlType float_type_for(Ctx& c, uint64_t ne0) {
  if (fits(c.opt.float_type, ne0)) return c.opt.float_type;
  ++c.sum.fallback_tensors;
  return fits(GgmlType::kQ8_0, ne0) ? GgmlType::kQ8_0 : GgmlType::kF16;
}

void decide(Ctx& c, Entry& e) {
  if (e.shape.size() == 1) {
    e.how = How::kVector, e.type = GgmlType::kF32;
    return;
  }
  const uint64_t ne0 = e.shape[1];
  if (!e.spec) {
    e.how = How::kPlain, e.type = float_type_for(c, ne0);
    return;
  }
  const auto carry = carry_type(*e.spec, ne0);
  if (!carry) {
    e.how = How::kDequant, e.type = float_type_for(c, ne0);
    return;
  }
  const bool four_bit = *carry != GgmlType::kQ8_0;
  if (four_bit && c.opt.refit_4bit) {
    if (fits(*c.opt.refit_4bit, ne0)) {
      e.how = How::kRefit, e.type = *c.opt.refit_4bit;
      return;
    }
    ++c.sum.fallback_tensors;
  }
  e.how = How::kCarry, e.type = *carry;
}

// The HF tensors of a llama model with their GGUF names and shapes.
std::vector<Entry> llama_entries(const Ctx& c) {
  const auto& m = c.cfg;
  const uint64_t H = m.hidden_size, I = m.intermediate_size, hd = m.head_dim;
  const uint64_t q_rows = m.num_heads * hd, kv_rows = m.num_kv_heads * hd;
  std::vector<Entry> v;
  auto add = [&](std::string hf, std::string gg, std::vector<uint64_t> shape, uint64_t heads = 0) {
    Entry e;
    e.hf_name = std::move(hf), e.gguf_name = std::move(gg), e.shape = std::move(shape), e.qk_heads = heads;
    v.push_back(std::move(e));
  };
  add("model.embed_tokens.weight", "token_embd.weight", {uint64_t(m.vocab_size), H});
  for (int64_t l = 0; l < m.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".", b = "blk." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", b + "attn_norm.weight", {H});
    const struct { const char* hf; const char* gg; uint64_t rows, cols, heads; } lin[] = {
        {"self_attn.q_proj", "attn_q", q_rows, H, uint64_t(m.num_heads)},
        {"self_attn.k_proj", "attn_k", kv_rows, H, uint64_t(m.num_kv_heads)},
        {"self_attn.v_proj", "attn_v", kv_rows, H, 0},
        {"self_attn.o_proj", "attn_output", H, q_rows, 0},
        {"mlp.gate_proj", "ffn_gate", I, H, 0},
        {"mlp.up_proj", "ffn_up", I, H, 0},
        {"mlp.down_proj", "ffn_down", H, I, 0}};
    for (const auto& x : lin) {
      add(p + x.hf + ".weight", b + x.gg + ".weight", {x.rows, x.cols}, x.heads);
      if (c.dir.weights().find(p + x.hf + ".bias")) add(p + x.hf + ".bias", b + x.gg + ".bias", {x.rows}, x.heads);
      if (x.hf == std::string("self_attn.o_proj"))
        add(p + "post_attention_layernorm.weight", b + "ffn_norm.weight", {H});
    }
  }
  add("model.norm.weight", "output_norm.weight", {H});
  if (!m.tie_word_embeddings) add("lm_head.weight", "output.weight", {uint64_t(m.vocab_size), H});
  return v;
}

// Quark's per-module tensors besides .weight, consumed with the weight.
bool is_quark_aux(const std::string& name) {
  for (const char* s : {".weight_scale", ".weight_zero_point", ".input_scale", ".input_zero_point", ".output_scale",
                        ".output_zero_point"})
    if (name.ends_with(s)) return true;
  return false;
}

void read_quant_config(Ctx& c) {
  const nlohmann::json& cfg = c.dir.config();
  const auto it = cfg.find("quantization_config");
  if (it == cfg.end() || it->is_null()) return;
  if (!it->is_object() || it->value("quant_method", "") != "quark")
    throw Error(ErrorKind::kUnsupported, c.file, "quantization_config.quant_method",
                "only Quark checkpoints (quant_method \"quark\") or unquantized models export to GGUF",
                "export a checkpoint written by qloom quantize");
  c.order = pack_order_of(*it);
  const io::WeightIndex& w = c.dir.weights();
  std::vector<std::pair<std::string, std::vector<uint64_t>>> shapes;
  for (const std::string& n : w.tensor_names()) shapes.emplace_back(n, w.find(n)->shape);
  uint64_t act = 0, kv = 0;
  std::set<std::string> act_kinds;
  for (const quant::LinearLayer& layer : quant::find_linear_layers(shapes)) {
    const auto spec = resolve_layer_quant_spec(*it, layer.module, c.file);
    if (!spec) continue;
    if (spec->weight_stage2)
      throw Error(ErrorKind::kUnsupported, c.file, layer.module + ".weight",
                  "a two-stage weight (int4_fp8, nvfp4, amdfp4_global*) has no GGUF form", "");
    if (spec->weight && w.find(layer.module + ".weight_scale")) c.specs.emplace(layer.module, *spec->weight);
    if (spec->input) ++act, act_kinds.insert(quant::quant_dtype_name(spec->input->dtype));
    if (spec->output) ++kv;
  }
  if (act) {
    std::string kinds;
    for (const auto& k : act_kinds) kinds += (kinds.empty() ? "" : ", ") + k;
    c.sum.warnings.push_back(std::to_string(act) + " linears have " + kinds +
                             " input (activation) quantization in quantization_config; GGUF cannot express it: "
                             "llama.cpp runs those activations unquantized");
  }
  if (kv)
    c.sum.warnings.push_back(std::to_string(kv) + " linears have output (KV-cache) quantization in quantization_config; "
                             "GGUF cannot express it: pick llama.cpp's own --cache-type-k / --cache-type-v at run time");
}

std::vector<float> plain_floats(const Ctx& c, const Entry& e) {
  const auto view = index_lookup(c.dir.weights())(e.hf_name);
  if (!view) throw Error(ErrorKind::kNotFound, c.dir.path().string(), e.hf_name, "tensor missing from the checkpoint");
  if (view->shape() != e.shape)
    throw_invalid(c.dir.path().string(), e.hf_name, "shape disagrees with config.json");
  if (view->dtype() != DType::kF32 && view->dtype() != DType::kBF16 && view->dtype() != DType::kF16)
    throw Error(ErrorKind::kUnsupported, c.dir.path().string(), e.hf_name, "is not F32 / BF16 / F16 and not quantized");
  std::vector<float> out(view->numel());
  to_f32(view->dtype(), view->data.data(), out.data(), out.size());
  return out;
}

void permute_rows(std::vector<float>& x, uint64_t rows, uint64_t cols, std::span<const uint64_t> map) {
  const std::vector<float> src = x;
  for (uint64_t r = 0; r < rows; ++r) std::memcpy(&x[r * cols], &src[map[r] * cols], cols * sizeof(float));
}

quant::QuantizedTensor load_quantized(const Ctx& c, const Entry& e) {
  const std::string module = e.hf_name.substr(0, e.hf_name.size() - std::string(".weight").size());
  quant::QuantizedTensor qt = unpack_quantized_weight(module, *e.spec, index_lookup(c.dir.weights()), c.order);
  if (qt.shape != e.shape) throw_invalid(c.dir.path().string(), e.hf_name, "shape disagrees with config.json");
  return qt;
}

std::vector<std::byte> tensor_bytes(Ctx& c, const Entry& e) {
  const std::vector<uint64_t> map = e.qk_heads ? llama_qk_row_map(e.shape[0], e.qk_heads) : std::vector<uint64_t>{};
  if (e.how == How::kCarry) return carry_blocks(load_quantized(c, e), e.type, map, e.hf_name, c.sum.carry);
  std::vector<float> x = e.spec ? quant::dequantize(load_quantized(c, e), 1) : plain_floats(c, e);
  const uint64_t cols = e.shape.size() == 2 ? e.shape[1] : 1;
  if (!map.empty()) permute_rows(x, e.shape[0], cols, map);
  if (e.type == GgmlType::kF16) {
    uint64_t overflow = 0;
    for (float v : x) overflow += std::isfinite(v) && std::fabs(v) > 65504.0f;
    if (overflow)
      throw Error(ErrorKind::kUnsupported, c.dir.path().string(), e.hf_name,
                  std::to_string(overflow) + " values exceed fp16's range", "export with float_type BF16");
  }
  return io::gguf_quantize(e.type, x);
}

uint32_t llama_ftype(GgmlType t) {
  switch (t) {
    case GgmlType::kF32: return 0;
    case GgmlType::kF16: return 1;
    case GgmlType::kQ4_0: return 2;
    case GgmlType::kQ4_1: return 3;
    case GgmlType::kQ8_0: return 7;
    case GgmlType::kQ4_K: return 14;
    case GgmlType::kQ6_K: return 18;
    case GgmlType::kBF16: return 32;
    default: return 0;
  }
}

// The type holding most elements of the decoder linears (the "mostly" type).
uint32_t file_type_of(const std::vector<Entry>& entries, GgmlType fallback) {
  std::map<GgmlType, uint64_t> elems;
  for (const auto& e : entries)
    if (e.shape.size() == 2 && e.hf_name.starts_with("model.layers.")) elems[e.type] += e.shape[0] * e.shape[1];
  GgmlType best = fallback;
  uint64_t most = 0;
  for (const auto& [t, n] : elems)
    if (n > most) most = n, best = t;
  return llama_ftype(best);
}

void check_all_mapped(const Ctx& c, const std::vector<Entry>& entries) {
  std::set<std::string> mapped;
  for (const auto& e : entries) mapped.insert(e.hf_name);
  for (const std::string& n : c.dir.weights().tensor_names()) {
    if (mapped.count(n) || is_quark_aux(n) || n.ends_with("rotary_emb.inv_freq")) continue;
    if (n == "lm_head.weight" && c.cfg.tie_word_embeddings) continue;  // tied: the embedding serves
    throw Error(ErrorKind::kUnsupported, c.dir.path().string(), n, "tensor has no GGUF name in qloom's llama mapping",
                "export a plain llama checkpoint");
  }
}

void validate_options(const GgufExportOptions& o) {
  const std::set<GgmlType> floats = {GgmlType::kF16, GgmlType::kBF16, GgmlType::kF32, GgmlType::kQ8_0,
                                     GgmlType::kQ4_K, GgmlType::kQ6_K};
  if (!floats.count(o.float_type))
    throw Error(ErrorKind::kUsage, "", "float_type", "must be F16, BF16, F32, Q8_0, Q4_K or Q6_K");
  if (o.refit_4bit && *o.refit_4bit != GgmlType::kQ4_K && *o.refit_4bit != GgmlType::kQ6_K)
    throw Error(ErrorKind::kUsage, "", "refit_4bit", "must be Q4_K or Q6_K");
}

GgmlType gguf_type_flag(const std::string& value, const char* flag) {
  try {
    return parse_gguf_type(value);
  } catch (const Error&) {
    throw Error(ErrorKind::kUsage, "", flag, "'" + value + "' is not a GGUF type qloom writes",
                "use f16, bf16, f32, q8_0, q4_k or q6_k");
  }
}

}  // namespace

GgmlType parse_gguf_type(const std::string& name) {
  std::string up = name;
  for (auto& ch : up) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  for (GgmlType t : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_0,
                     GgmlType::kQ4_1, GgmlType::kQ4_K, GgmlType::kQ6_K})
    if (io::ggml_type_info(t).name == up) return t;
  throw Error(ErrorKind::kUsage, "", name, "not a GGUF type qloom writes", "use F32, F16, BF16, Q8_0, Q4_K or Q6_K");
}

GgufExportOptions gguf_options_from_flags(const std::string& float_type, const std::string& refit_4bit) {
  GgufExportOptions go;
  go.float_type = gguf_type_flag(float_type, "--gguf_float_type");
  if (refit_4bit.empty() || refit_4bit == "none") return go;
  go.refit_4bit = gguf_type_flag(refit_4bit, "--gguf_refit_4bit");
  if (*go.refit_4bit != GgmlType::kQ4_K && *go.refit_4bit != GgmlType::kQ6_K)
    throw Error(ErrorKind::kUsage, "", "--gguf_refit_4bit", "'" + refit_4bit + "' is not a K-quant type",
                "pass q4_k, q6_k or none");
  return go;
}

GgufExportSummary export_gguf(const fs::path& quark_dir, const fs::path& out_file, const GgufExportOptions& options) {
  validate_options(options);
  Ctx c{io::ModelDir::open(quark_dir)};
  c.file = (quark_dir / "config.json").string();
  c.opt = options;
  const std::string model_type = c.dir.config().value("model_type", "");
  if (model_type != "llama")
    throw Error(ErrorKind::kUnsupported, c.file, "model_type",
                "GGUF export supports the llama architecture only, not '" + model_type + "'",
                "export a llama-family checkpoint (e.g. SmolLM2)");
  c.cfg = model::ModelConfig::parse(c.dir.config(), c.file);
  read_quant_config(c);
  std::vector<Entry> entries = llama_entries(c);
  check_all_mapped(c, entries);
  for (Entry& e : entries) {
    const std::string module = e.hf_name.ends_with(".weight") ? e.hf_name.substr(0, e.hf_name.size() - 7) : "";
    if (const auto it = c.specs.find(module); it != c.specs.end() && e.shape.size() == 2) e.spec = it->second;
    decide(c, e);
  }
  io::GgufWriter w;
  const std::string name = options.name.empty() ? fs::absolute(quark_dir).lexically_normal().filename().string()
                                                : options.name;
  c.sum.file_type = file_type_of(entries, options.float_type);
  w.add_u32("general.alignment", io::kGgufDefaultAlignment);
  add_llama_metadata(w, c.cfg, name, c.sum.file_type, c.file);
  add_tokenizer_metadata(w, quark_dir, c.cfg, c.sum.warnings);
  for (const Entry& e : entries) {
    std::vector<uint64_t> ne(e.shape.rbegin(), e.shape.rend());
    w.add_tensor(e.gguf_name, e.type, ne);
  }
  w.begin(out_file, options.overwrite);
  for (const Entry& e : entries) {
    const auto bytes = tensor_bytes(c, e);
    w.write_tensor({bytes.data(), bytes.size()});
    ++c.sum.tensors_by_type[std::string(io::ggml_type_info(e.type).name)];
    c.sum.carried_tensors += e.how == How::kCarry;
    c.sum.refit_tensors += e.how == How::kRefit;
    c.sum.dequantized_tensors += e.how == How::kDequant;
  }
  c.sum.tensors = entries.size();
  c.sum.bytes = w.bytes_written();
  if (c.sum.dequantized_tensors)
    c.sum.warnings.push_back(std::to_string(c.sum.dequantized_tensors) +
                             " quantized weights have no GGUF block form carrying their codes; written dequantized as " +
                             std::string(io::ggml_type_info(options.float_type).name));
  if (c.sum.carry.inexact_scale || c.sum.carry.inexact_min)
    c.sum.warnings.push_back(std::to_string(c.sum.carry.inexact_scale) + " block scales and " +
                             std::to_string(c.sum.carry.inexact_min) + " block mins of " +
                             std::to_string(c.sum.carry.blocks) + " carried blocks are not exact in fp16 (rounded to nearest)");
  w.commit();
  c.sum.out_file = fs::absolute(out_file).lexically_normal();
  return c.sum;
}

}  // namespace qloom::exporter
