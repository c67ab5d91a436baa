#include "qloom/perf/report_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace qloom::perf {
namespace {

std::string non_finite(double v) {
  if (std::isnan(v)) return "nan";
  return v > 0 ? "inf" : "-inf";
}

std::string to_chars_str(double v, std::chars_format f, int precision) {
  if (!std::isfinite(v)) return non_finite(v);
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, f, precision);
  std::string s(buf, r.ptr);
  // "-0", "-0.00": a sign on a zero is noise in a report.
  if (s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
  return s;
}

size_t longest_backtick_run(std::string_view s) {
  size_t best = 0, run = 0;
  for (char c : s) {
    run = c == '`' ? run + 1 : 0;
    best = std::max(best, run);
  }
  return best;
}

}  // namespace

std::string fmt_fixed(double v, int decimals) { return to_chars_str(v, std::chars_format::fixed, decimals); }

std::string fmt_sig(double v, int significant) {
  return to_chars_str(v, std::chars_format::general, std::max(1, significant));
}

std::string fmt_percent(double ratio, int decimals) { return fmt_fixed(ratio * 100.0, decimals) + "%"; }

std::string display(const nlohmann::ordered_json& v) {
  if (v.is_null()) return "—";
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_number_integer()) return v.dump();
  if (v.is_number()) return fmt_sig(v.get<double>(), 6);
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string md_code(std::string_view s) {
  if (s.empty()) return "—";
  std::string body;
  for (char c : s) {
    if (c == '|') body += "\\|";
    else if (c == '\n' || c == '\r') body += ' ';
    else body += c;
  }
  const std::string ticks(longest_backtick_run(s) + 1, '`');
  // A span that starts or ends with a backtick needs a space inside.
  const bool pad = body.front() == '`' || body.back() == '`';
  return ticks + (pad ? " " : "") + body + (pad ? " " : "") + ticks;
}

std::string md_code_block(std::string_view s, std::string_view info) {
  const std::string fence(std::max<size_t>(3, longest_backtick_run(s) + 1), '`');
  std::string out = fence + std::string(info) + "\n" + std::string(s);
  if (out.back() != '\n') out += '\n';
  return out + fence + "\n";
}

std::string md_text(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\n' || c == '\r') {
      out += ' ';
      continue;
    }
    if (std::string_view("\\`*[]<>|&#").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

std::string config_label(const nlohmann::ordered_json& config) {
  if (config.is_null()) return "—";
  if (!config.is_object()) return config.dump();
  std::string out;
  for (const auto& [k, v] : config.items()) {
    if (!out.empty()) out += ' ';
    out += k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  }
  return out.empty() ? "—" : out;
}

std::string MdTable::str() const {
  auto line = [](const std::vector<std::string>& cells) {
    std::string s = "|";
    for (const auto& c : cells) s += c + "|";
    return s + "\n";
  };
  std::vector<std::string> rule;
  for (size_t i = 0; i < head.size(); ++i) {
    const char a = i < align.size() ? align[i] : 'l';
    rule.push_back(a == 'r' ? "---:" : a == 'c' ? ":---:" : "---");
  }
  std::string out = line(head) + line(rule);
  for (const auto& r : rows) out += line(r);
  return out;
}

std::string md_cell(const nlohmann::ordered_json& v) {
  if (v.is_string()) return md_code(v.get<std::string>());
  if (v.is_structured()) return md_code(v.dump());
  return md_text(display(v));
}

std::string md_num(const nlohmann::ordered_json& v, int decimals) {
  if (!v.is_number()) return v.is_null() ? "—" : md_cell(v);
  return fmt_fixed(v.get<double>(), decimals);
}

}  // namespace qloom::perf
