#include "qloom/validate/folded_scales.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "qloom/core/convert.h"
#include "qloom/model/architecture.h"

namespace qloom::validate {
namespace {

using json = nlohmann::json;

struct Entry {
  std::string prefix;  // "model.layers"
  std::string prev_op;
  std::vector<std::string> layers;
};

std::optional<std::vector<float>> read_f32(const io::WeightIndex& w, const std::string& name,
                                           std::vector<uint64_t>* shape = nullptr) {
  const io::TensorInfo* t = w.find(name);
  if (t == nullptr) return std::nullopt;
  std::vector<float> out(t->numel());
  to_f32(t->dtype, w.view(name).data.data(), out.data(), out.size());
  if (shape) *shape = t->shape;
  return out;
}

std::vector<Entry> entries_of(const json& qc) {
  std::vector<Entry> out;
  std::set<std::string> seen;
  const auto algo = qc.find("algo_config");
  if (algo == qc.end()) return out;
  auto visit = [&](const json& a) {
    if (!a.is_object()) return;
    const auto sl = a.find("scaling_layers");
    if (sl == a.end() || !sl->is_array()) return;
    const auto dec = a.find("model_decoder_layers");
    const std::string prefix =
        dec != a.end() && dec->is_string() && !dec->get<std::string>().empty() ? dec->get<std::string>() : "model.layers";
    for (const json& e : *sl) {
      if (!e.is_object() || !e.contains("prev_op") || !e["prev_op"].is_string() || !e.contains("layers") ||
          !e["layers"].is_array())
        continue;
      Entry x{prefix, e["prev_op"].get<std::string>(), {}};
      for (const json& l : e["layers"])
        if (l.is_string()) x.layers.push_back(l.get<std::string>());
      if (x.layers.empty()) continue;
      std::vector<std::string> sorted = x.layers;
      std::sort(sorted.begin(), sorted.end());
      std::string key = prefix + "|" + x.prev_op;
      for (const auto& s : sorted) key += "|" + s;
      if (seen.insert(key).second) out.push_back(std::move(x));
    }
  };
  if (algo->is_array()) for (const json& a : *algo) visit(a);
  else visit(*algo);
  return out;
}

// Decoder layer indices present in the source under `prefix`.
std::set<int64_t> layer_indices(const io::WeightIndex& w, const std::string& prefix) {
  std::set<int64_t> out;
  const std::string p = prefix + ".";
  for (const auto& name : w.tensor_names()) {
    if (name.rfind(p, 0) != 0) continue;
    const size_t b = p.size(), e = name.find('.', b);
    if (e == std::string::npos || e == b) continue;
    const std::string idx = name.substr(b, e - b);
    if (std::all_of(idx.begin(), idx.end(), [](char c) { return c >= '0' && c <= '9'; })) out.insert(std::stoll(idx));
  }
  return out;
}

// Attention shape from config.json (text_config first when present), for
// Quark's grouped-query v_proj -> o_proj fold.
struct GqaShape {
  uint64_t heads = 0, kv_heads = 0, head_dim = 0;
  static GqaShape of(const json& config) {
    const json& c = config.contains("text_config") && config["text_config"].is_object() ? config["text_config"] : config;
    auto num = [&](const char* k) -> uint64_t {
      const auto it = c.find(k);
      return it != c.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
    };
    GqaShape g;
    g.heads = num("num_attention_heads");
    g.kv_heads = num("num_key_value_heads");
    if (g.kv_heads == 0) g.kv_heads = g.heads;
    g.head_dim = num("head_dim");
    if (g.head_dim == 0 && g.heads > 0) g.head_dim = num("hidden_size") / g.heads;
    return g;
  }
  // A producer in attention feeding `channels` = heads * head_dim columns
  // with fewer (or, fused, other) rows under grouped-query attention.
  bool applies(const std::string& prev, uint64_t channels, uint64_t prev_rows) const {
    return heads > kv_heads && kv_heads > 0 && head_dim > 0 && heads % kv_heads == 0 &&
           channels == heads * head_dim && prev_rows != channels && prev_rows >= kv_heads * head_dim &&
           prev.find("attn") != std::string::npos;
  }
};

bool valid_scale(double s) { return std::isfinite(s) && s > 0.0; }

FoldTransform& transform_of(std::map<std::string, FoldTransform>& m, const std::string& module, uint64_t rows,
                            uint64_t cols) {
  FoldTransform& t = m[module];
  if (t.col.empty()) t.col.assign(cols, 1.0);
  if (t.row.empty()) t.row.assign(rows, 1.0);
  return t;
}

void add_how(FoldTransform& t, const std::string& how) {
  if (t.how.find(how) != std::string::npos) return;
  if (!t.how.empty()) t.how += "+";
  t.how += how;
}

double sqnr_db(double signal, double noise) {
  if (noise == 0.0) return std::numeric_limits<double>::infinity();
  if (signal == 0.0) return -std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(signal / noise);
}

}  // namespace

FoldPlan plan_folded_scales(const json& qc, const io::ModelDir& source, const io::ModelDir& quantized,
                            const DequantizedFn& dequantized) {
  FoldPlan plan;
  const std::vector<Entry> entries = entries_of(qc);
  if (entries.empty()) return plan;
  const io::WeightIndex& sw = source.weights();
  const io::WeightIndex& qw = quantized.weights();
  bool gemma = false;
  if (const auto mt = source.config().find("model_type"); mt != source.config().end() && mt->is_string())
    if (const model::Architecture* a = model::find_architecture(mt->get<std::string>())) gemma = a->gemma_norm;
  auto f = [gemma](double w) { return gemma ? 1.0 + w : w; };
  const GqaShape gqa = GqaShape::of(source.config());

  struct Pending {
    std::string prev;               // full prev_op module / tensor stem
    std::vector<std::string> readers;
    uint64_t channels = 0;
    std::vector<double> exact;  // an exact rule's scales with gaps (NaN) the fit fills
    std::string exact_how;
  };
  // Exact rules first, then the fits (which use the scales known by then).
  std::vector<Pending> fits;
  auto shape_of = [&](const std::string& module) {
    const io::TensorInfo* t = sw.find(module + ".weight");
    return t ? t->shape : std::vector<uint64_t>{};
  };
  auto quantized_module = [&](const std::string& module) { return qw.find(module + ".weight_scale") != nullptr; };

  // exact[j]: s[j] was read exactly (norm / producer), not fitted.
  auto apply = [&](const Pending& p, const std::vector<double>& s, const std::vector<uint8_t>& exact,
                   const std::string& how) {
    for (const std::string& r : p.readers) {
      const std::vector<uint64_t> shape = shape_of(r);
      FoldTransform& t = transform_of(plan.modules, r, shape[0], shape[1]);
      if (t.col_exact.empty()) t.col_exact.assign(shape[1], 0);
      for (uint64_t j = 0; j < p.channels; ++j) {
        t.col[j] *= s[j];
        t.col_exact[j] |= exact[j];
      }
      add_how(t, how);
    }
    if (quantized_module(p.prev)) {
      const std::vector<uint64_t> shape = shape_of(p.prev);
      if (shape.size() == 2 && gqa.applies(p.prev, p.channels, shape[0])) {
        // Quark's GQA fold (awq/scale.py scale_fc_fc): o_proj's columns of
        // the query heads sharing a KV head carry one scale, the last
        // kv_heads * head_dim rows of the producer are divided by it.
        FoldTransform& t = transform_of(plan.modules, p.prev, shape[0], shape[1]);
        const uint64_t rep = gqa.heads / gqa.kv_heads, n_rows = gqa.kv_heads * gqa.head_dim, off = shape[0] - n_rows;
        for (uint64_t r = 0; r < n_rows; ++r) {
          const uint64_t k = r / gqa.head_dim, d = r % gqa.head_dim;
          double log_sum = 0.0;
          for (uint64_t i = 0; i < rep; ++i) log_sum += std::log(s[(k * rep + i) * gqa.head_dim + d]);
          t.row[off + r] *= std::exp(log_sum / static_cast<double>(rep));
        }
        add_how(t, how);
      } else if (shape.size() == 2 && shape[0] >= p.channels) {
        FoldTransform& t = transform_of(plan.modules, p.prev, shape[0], shape[1]);
        const uint64_t off = shape[0] - p.channels;
        for (uint64_t j = 0; j < p.channels; ++j) t.row[off + j] *= s[j];
        add_how(t, how);
      }
    }
    ++plan.entries;
  };

  for (const Entry& e : entries) {
    for (const int64_t layer : layer_indices(sw, e.prefix)) {
      const std::string lp = e.prefix + "." + std::to_string(layer) + ".";
      Pending p{lp + e.prev_op, {}, 0, {}, {}};
      bool complete = true;
      for (const std::string& l : e.layers) {
        const std::vector<uint64_t> shape = shape_of(lp + l);
        if (shape.size() != 2) {
          complete = false;
          break;
        }
        if (p.channels == 0) p.channels = shape[1];
        if (shape[1] != p.channels) complete = false;
        p.readers.push_back(lp + l);
      }
      if (!complete || p.channels == 0) continue;  // this layer lacks the entry's modules (e.g. dense vs MoE)
      // A norm (or other 1-D tensor) left unquantized.
      std::vector<uint64_t> nshape;
      const auto norm_src = read_f32(sw, p.prev + ".weight", &nshape);
      std::vector<double> s(p.channels, std::numeric_limits<double>::quiet_NaN());
      std::string how;
      if (norm_src && nshape.size() == 1 && nshape[0] == p.channels && !quantized_module(p.prev)) {
        const auto norm_q = read_f32(qw, p.prev + ".weight");
        if (!norm_q || norm_q->size() != p.channels) {
          plan.notes.push_back(p.prev + ".weight: missing or reshaped in the quantized checkpoint");
          continue;
        }
        for (uint64_t j = 0; j < p.channels; ++j) s[j] = f((*norm_src)[j]) / f((*norm_q)[j]);
        how = "norm";
      } else if (norm_src && nshape.size() == 2 && nshape[0] >= p.channels && !quantized_module(p.prev) &&
                 !gqa.applies(p.prev, p.channels, nshape[0])) {
        const auto prev_q = read_f32(qw, p.prev + ".weight");
        if (!prev_q || prev_q->size() != norm_src->size()) {
          plan.notes.push_back(p.prev + ".weight: missing or reshaped in the quantized checkpoint");
          continue;
        }
        const uint64_t in = nshape[1], off = nshape[0] - p.channels;
        for (uint64_t j = 0; j < p.channels; ++j) {
          double ss = 0.0, sq = 0.0;
          for (uint64_t k = 0; k < in; ++k) {
            const double a = (*norm_src)[(off + j) * in + k], b = (*prev_q)[(off + j) * in + k];
            ss += a * a;
            sq += a * b;
          }
          s[j] = ss / sq;
        }
        how = "producer";
      } else {
        fits.push_back(std::move(p));
        continue;
      }
      if (!std::all_of(s.begin(), s.end(), valid_scale)) {  // the fit fills the gaps
        p.exact = std::move(s);
        p.exact_how = how;
        fits.push_back(std::move(p));
        continue;
      }
      apply(p, s, std::vector<uint8_t>(p.channels, 1), how);
    }
  }
  // Fits: per channel least squares over the readers' columns, with what is
  // already known of each reader applied to the source side.
  for (const Pending& p : fits) {
    std::vector<double> num(p.channels, 0.0), den(p.channels, 0.0);
    for (const std::string& r : p.readers) {
      const std::optional<std::vector<float>> dq = dequantized(r);
      if (!dq) continue;
      std::vector<uint64_t> shape;
      const std::vector<float> v = read_f32(sw, r + ".weight", &shape).value();
      const uint64_t rows = shape[0], cols = shape[1];
      if (dq->size() != rows * cols) continue;
      const auto it = plan.modules.find(r);
      for (uint64_t i = 0; i < rows; ++i)
        for (uint64_t j = 0; j < cols; ++j) {
          double a = v[i * cols + j];
          if (it != plan.modules.end()) a = a / it->second.row[i] * it->second.col[j];
          num[j] += a * (*dq)[i * cols + j];
          den[j] += a * a;
        }
    }
    std::vector<double> s(p.channels, 1.0);
    for (uint64_t j = 0; j < p.channels; ++j) {
      const double v = num[j] / den[j];
      if (den[j] > 0.0 && valid_scale(v)) s[j] = v;
    }
    std::string how = "fit";
    std::vector<uint8_t> exact(p.channels, 0);
    if (!p.exact.empty()) {  // the exact rule's channels stay as it gave them
      for (uint64_t j = 0; j < p.channels; ++j)
        if (valid_scale(p.exact[j])) {
          s[j] = p.exact[j];
          exact[j] = 1;
        }
      how = p.exact_how + "/fit";
    }
    apply(p, s, exact, how);
  }
  return plan;
}

void apply_fold(const FoldTransform& t, std::vector<float>& src, uint64_t rows, uint64_t cols) {
  for (uint64_t i = 0; i < rows; ++i)
    for (uint64_t j = 0; j < cols; ++j) {
      double v = src[i * cols + j];
      if (!t.row.empty()) v /= t.row[i];
      if (!t.col.empty()) v *= t.col[j];
      src[i * cols + j] = static_cast<float>(v);
    }
}

FoldFit fold_check(const FoldTransform& t, const std::vector<float>& src, const std::vector<float>& deq,
                   uint64_t rows, uint64_t cols) {
  auto rs = [&](uint64_t i) { return t.row.empty() ? 1.0 : t.row[i]; };
  auto cs = [&](uint64_t j) { return t.col.empty() ? 1.0 : t.col[j]; };
  FoldFit fit;
  double sig = 0.0, err = 0.0;
  std::vector<double> num(cols, 0.0), den(cols, 0.0);
  std::vector<uint64_t> nonzero(cols, 0);
  for (uint64_t i = 0; i < rows; ++i)
    for (uint64_t j = 0; j < cols; ++j) {
      const double e = src[i * cols + j] / rs(i) * cs(j), d = deq[i * cols + j];
      sig += e * e;
      err += (e - d) * (e - d);
      num[j] += e * d;
      den[j] += e * e;
      nonzero[j] += d != 0.0;
    }
  fit.expected_db = sqnr_db(sig, err);
  double worst = 1.0;
  for (uint64_t j = 0; j < cols && j < t.col_exact.size(); ++j) {
    if (!t.col_exact[j] || den[j] <= 0.0 || 2 * nonzero[j] < rows) continue;
    const double g = num[j] / den[j];
    const double ratio = g > 0.0 ? std::max(g, 1.0 / g) : std::numeric_limits<double>::infinity();
    if (ratio > worst) {
      worst = ratio;
      fit.worst_gain = g;
    }
    if (!(ratio <= kFoldRatioLimit)) fit.mismatched.push_back(j);
  }
  return fit;
}

}  // namespace qloom::validate
