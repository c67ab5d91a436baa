#include "qloom/validate/step_util.h"

#include <algorithm>

namespace qloom::validate::detail {

std::string dtype_label(DType t) {
  const auto& info = dtype_info(t);
  return std::string(info.safetensors_name.empty() ? info.name : info.safetensors_name);
}

std::string shape_label(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) s += sep;
    s += items[i];
  }
  return s;
}

std::string plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

nlohmann::ordered_json capped_array(const std::vector<std::string>& items, size_t cap) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (size_t i = 0; i < items.size() && i < cap; ++i) a.push_back(items[i]);
  return a;
}

void list_items(StepResult& r, const std::string& label, const std::string& key,
                const std::vector<std::string>& items, size_t max_listed) {
  r.data[key] = capped_array(items, 10 * max_listed);
  r.data[key + "_count"] = items.size();
  if (items.empty()) return;
  std::string line = label + ": ";
  const size_t shown = std::min(items.size(), std::max<size_t>(max_listed, 1));
  for (size_t i = 0; i < shown; ++i) {
    if (i) line += ", ";
    line += items[i];
  }
  if (shown < items.size()) line += " … and " + std::to_string(items.size() - shown) + " more";
  r.details.push_back(std::move(line));
}

std::string json_brief(const nlohmann::json& v) {
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 120) {
    size_t cut = 117;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
    s = s.substr(0, cut) + "...";
  }
  return s;
}

nlohmann::ordered_json add_drift(StepResult& r, const std::vector<DriftItem>& drift,
                                 size_t max_listed, const std::string& prefix) {
  nlohmann::ordered_json items = nlohmann::ordered_json::array();
  const size_t shown = std::min(drift.size(), std::max<size_t>(max_listed, 1));
  for (size_t i = 0; i < drift.size(); ++i) {
    items.push_back(drift_json(drift[i]));
    if (i < shown)
      r.details.push_back("benign drift: " + (prefix.empty() ? "" : prefix + ": ") + drift_line(drift[i]));
  }
  if (shown < drift.size())
    r.details.push_back("benign drift: … and " + std::to_string(drift.size() - shown) + " more");
  return items;
}

std::string drift_keys(const std::vector<DriftItem>& drift) {
  std::vector<std::string> keys;
  for (const auto& d : drift) keys.push_back(d.key);
  return join(keys, ", ");
}

StepResult skipped(StepResult r, std::string summary, const char* reason) {
  r.status = StepResult::kSkipped;
  r.summary = std::move(summary);
  r.data["reason"] = reason;
  return r;
}

}  // namespace qloom::validate::detail
