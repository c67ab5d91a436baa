// Text helpers shared by the perf reports (report_markdown, report_html,
// svg_plot): locale-independent number formatting (std::to_chars, so the
// bytes never depend on the process locale), escaping for HTML / SVG and for
// Markdown, and the one-line label of a precision config.
//
// Inputs: plain values. Errors: none (non-finite numbers print as "nan" /
// "inf"; JSON never holds them). Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace qloom::perf {

// 0.01234 with 3 decimals -> "0.012"; -0 prints as "0".
std::string fmt_fixed(double v, int decimals);
// Shortest of fixed / scientific with `significant` digits: 0.0123 -> "0.0123",
// 4e-05 -> "4e-05".
std::string fmt_sig(double v, int significant);
// A ratio as a percentage: 0.0112 with 2 decimals -> "1.12%".
std::string fmt_percent(double ratio, int decimals);
// A JSON scalar for a table cell: null -> "—", true/false -> "yes"/"no",
// numbers with 6 significant digits, strings as they are, containers as
// compact JSON.
std::string display(const nlohmann::ordered_json& v);

// &, <, >, " and ' as character references: safe in HTML / SVG text and in
// double- or single-quoted attribute values.
std::string html_escape(std::string_view s);

// A Markdown code span that shows `s` literally, also inside a GFM table
// cell: a backtick run longer than any in `s`, '|' as "\|", newlines as
// spaces. "" -> "—".
std::string md_code(std::string_view s);
// A fenced code block (fence longer than any backtick run in `s`).
std::string md_code_block(std::string_view s, std::string_view info = "");
// Prose: backslash-escapes the characters Markdown or embedded HTML would
// interpret (\ ` * [ ] < > | & #; not '_', literal inside words),
// newlines as spaces.
std::string md_text(std::string_view s);

// {"self_attn":"fp8","dense_mlp":"int4_wo_128"} -> "self_attn=fp8 dense_mlp=int4_wo_128"
// in the object's key order; non-string values as compact JSON; null -> "—".
std::string config_label(const nlohmann::ordered_json& config);

// A GitHub-flavoured Markdown table (lm-eval's layout): `align` holds one of
// 'l', 'r', 'c' per column; cells are inserted as given (escape them with
// md_code / md_text first). str() pads nothing, so the bytes do not depend
// on display widths.
struct MdTable {
  std::vector<std::string> head;
  std::string align;
  std::vector<std::vector<std::string>> rows;
  std::string str() const;
};

// A table cell for a JSON value: strings and containers (compact JSON) as
// md_code, other scalars through display() and md_text.
std::string md_cell(const nlohmann::ordered_json& v);
// A number with `decimals` decimals, or "—" for null.
std::string md_num(const nlohmann::ordered_json& v, int decimals);

}  // namespace qloom::perf
