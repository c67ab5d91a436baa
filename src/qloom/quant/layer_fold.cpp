#include "qloom/quant/layer_fold.h"

#include <algorithm>
#include <vector>

#include "qloom/core/error.h"
#include "qloom/quant/layer_tensors.h"
#include "qloom/quant/smoothing.h"

namespace qloom::quant {
namespace {

bool is_pending(const std::vector<QuantTarget>& pending, const std::string& module) {
  return std::any_of(pending.begin(), pending.end(), [&](const QuantTarget& t) { return t.linear.name == module; });
}

bool has_linear(engine::LayerRunner& r, const std::string& module) {
  for (const engine::LayerLinear& l : r.linears())
    if (l.name == module) return true;
  return false;
}

}  // namespace

std::string fold_blocker(LayerSession& s, const ScalingGroup& g) {
  if (!g.applicable) return g.skip_reason;
  if (!g.fold_only.empty())
    return "the fold would also change " + g.fold_only.front() +
           ", which is not quantized and which Quark's scaling_layers cannot list (Quark's MoE maps leave this "
           "group out too)";
  const std::vector<QuantTarget> pending = s.pending();
  for (const std::string& l : g.linears) {
    if (s.quantized(l)) return l + " was already quantized by an earlier stage";
    if (!is_pending(pending, l)) return l + " is not quantized (excluded, or its shape does not fit the scheme)";
  }
  if (g.prev_kind == PrevKind::kLinear && s.quantized(g.prev_op))
    return g.prev_op + " was already quantized by an earlier stage";
  return "";
}

void fold_into_layer(LayerSession& s, const ScalingGroup& g, std::span<const float> scales) {
  engine::LayerRunner& r = s.runner();
  FoldTargets t;
  std::vector<std::string> marks;
  if (g.prev_kind == PrevKind::kNorm) {
    // The engine holds gemma norms as 1 + w: dividing the held value is the
    // exact fold of (1 + w), i.e. the plain form.
    const LayerTensorRef ref = find_layer_tensor(r, g.prev_op);
    if (ref.norm == nullptr) throw Error(ErrorKind::kInternal, "", g.prev_op, "prev_op of a norm group is not a norm");
    t.norm = ref.norm;
    t.norm_form = NormForm::kPlain;
    marks.push_back(g.prev_op);
  } else {
    t.prev = &r.linear(g.prev_op);
    t.prev_row_offset = g.prev_row_offset;
    if (!t.prev->bias.empty()) marks.push_back(g.prev_op + ".bias");
    if (!s.quantized(g.prev_op) && !is_pending(s.pending(), g.prev_op)) marks.push_back(g.prev_op + ".weight");
  }
  for (const std::string& l : g.linears) t.readers.push_back(&r.linear(l));
  for (const std::string& l : g.fold_only) t.readers.push_back(&r.linear(l));
  fold_scales(t, scales);
  for (const std::string& m : marks) s.mark_modified(m);
}

std::string inspect_output_module(engine::LayerRunner& runner, const ScalingGroup& g) {
  if (has_linear(runner, g.inspect)) return g.inspect;
  for (const char* leaf : {".o_proj", ".down_proj"})
    if (has_linear(runner, g.inspect + leaf)) return g.inspect + leaf;
  return "";
}

namespace {

int stage_of(engine::LayerRunner& r, const std::string& module) {
  for (const engine::LayerLinear& l : r.linears())
    if (l.name == module) return l.stage;
  return -1;
}

}  // namespace

engine::LayerPart inspect_part(engine::LayerRunner& runner, const std::string& module) {
  const int st = stage_of(runner, module);
  return st >= 0 && st <= 1 ? engine::LayerPart::kAttention : engine::LayerPart::kFull;
}

bool feed_forward_group(engine::LayerRunner& runner, const ScalingGroup& g) {
  for (const std::vector<std::string>* v : {&g.linears, &g.fold_only})
    for (const std::string& l : *v)
      if (stage_of(runner, l) < 2) return false;
  return g.prev_kind == PrevKind::kNorm || stage_of(runner, g.prev_op) >= 2;
}

std::vector<SearchGroup> plan_search_groups(
    LayerSession& s, const std::function<bool(const ScalingGroup&, const ScalingLayerEntry&)>& selected,
    UnscaledGroups& unscaled) {
  engine::LayerRunner& r = s.runner();
  const int layer = static_cast<int>(s.layer());
  std::vector<SearchGroup> groups;
  for (const ScalingGroup& g : layer_scaling_groups(r.config(), layer)) {
    const ScalingLayerEntry e = scaling_entry_of(g, layer);
    if (!selected(g, e)) continue;
    if (const std::string why = fold_blocker(s, g); !why.empty()) {
      unscaled.note(e, why);
      continue;
    }
    std::string out_module = inspect_output_module(r, g);
    if (out_module.empty()) {
      unscaled.note(e, "the inspected block " + g.inspect + " has no single output linear");
      continue;
    }
    SearchGroup sg{g, e, out_module, inspect_part(r, out_module), false, {}};
    sg.ff = sg.part == engine::LayerPart::kFull && feed_forward_group(r, g);
    groups.push_back(std::move(sg));
  }
  return groups;
}

void fold_search_groups(LayerSession& s, const std::string& stage, const std::vector<SearchGroup>& groups,
                        ScalingLayersRecord& record) {
  std::vector<std::string> unrouted;
  for (const SearchGroup& sg : groups) {
    if (sg.scales.empty()) {
      ++s.summary().unscaled_groups;
      unrouted.push_back(sg.g.input_site);
      continue;
    }
    fold_into_layer(s, sg.g, sg.scales);
    ++s.summary().scaled_groups;
    record.add(sg.entry);
  }
  if (unrouted.empty()) return;
  std::string msg = stage + ": " + std::to_string(unrouted.size()) + " scaling group(s) of layer " +
                    std::to_string(s.layer()) +
                    " received no calibration token (MoE experts no sample was routed to) and were left unscaled: ";
  for (size_t i = 0; i < unrouted.size() && i < 4; ++i) msg += (i ? ", " : "") + unrouted[i];
  if (unrouted.size() > 4) msg += ", ...";
  s.warn(msg);
}

}  // namespace qloom::quant
