#include "qloom/quant/shared_scale_groups.h"

namespace qloom::quant {
namespace {

std::string parent_of(const std::string& m) {
  const size_t dot = m.rfind('.');
  return dot == std::string::npos ? std::string() : m.substr(0, dot);
}

std::string leaf_of(const std::string& m) {
  const size_t dot = m.rfind('.');
  return dot == std::string::npos ? m : m.substr(dot + 1);
}

bool ends_with_any(const std::string& leaf, const std::vector<std::string>& suffixes) {
  for (const auto& s : suffixes)
    if (leaf.size() >= s.size() && leaf.compare(leaf.size() - s.size(), s.size(), s) == 0) return true;
  return false;
}

}  // namespace

SharedScaleGroups default_shared_scale_groups(std::string_view scheme, std::string_view model_type) {
  if (scheme != "nvfp4" && scheme != "fp4_block16_scale_e4m3") return {};
  std::vector<std::string> gate_up = {"gate_proj", "up_proj"};
  if (model_type == "dbrx") gate_up = {"w1", "v1"};
  if (model_type == "grok-1") gate_up = {"linear", "linear_v"};
  if (model_type == "minimax_m2") gate_up = {"w1", "w3"};
  return {{"q_proj", "k_proj", "v_proj"}, gate_up};
}

std::vector<std::string> shared_scale_members(const std::string& module, const std::vector<std::string>& candidates,
                                              const SharedScaleGroups& groups) {
  const std::string parent = parent_of(module);
  // build_shared_layer_mapping: a later group that matches overrides an
  // earlier one, so the last matching group decides.
  const std::vector<std::string>* group = nullptr;
  for (const auto& g : groups)
    if (ends_with_any(leaf_of(module), g)) group = &g;
  if (group == nullptr) return {module};
  std::vector<std::string> out;
  for (const auto& c : candidates)
    if (parent_of(c) == parent && ends_with_any(leaf_of(c), *group)) out.push_back(c);
  bool has_self = false;
  for (const auto& c : out) has_self = has_self || c == module;
  if (!has_self) out.insert(out.begin(), module);
  return out;
}

}  // namespace qloom::quant
