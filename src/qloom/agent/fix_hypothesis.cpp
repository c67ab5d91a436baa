#include "qloom/agent/fix_hypothesis.h"

#include <sstream>

#include "qloom/core/strings.h"
#include "qloom/core/error.h"

namespace qloom::agent {
namespace {


// Text between "## <title>" and the next "## " heading.
std::string section(const std::string& text, const std::string& title, const std::string& file) {
  const std::string head = "## " + title + "\n";
  const auto at = text.find(head);
  if (at == std::string::npos) throw_invalid(file, title, "section '## " + title + "' is missing", "rewrite the file");
  const auto start = at + head.size();
  const auto next = text.find("\n## ", start);
  return trim(text.substr(start, next == std::string::npos ? std::string::npos : next - start));
}

void check_overrides(const nlohmann::ordered_json& o, const std::string& file) {
  if (!o.is_object()) throw_invalid(file, "plan_overrides", "must be a JSON object", "rewrite the fix block");
  for (const auto& [k, v] : o.items()) {
    bool ok = false;
    if (k == "num_calib_data" || k == "seq_len") ok = v.is_number_unsigned() && v.get<uint64_t>() > 0;
    else if (k == "threads") ok = v.is_number_unsigned();
    else if (k == "quant_algo") ok = v.is_string();
    else if (k == "exclude_layers") {
      ok = v.is_array();
      for (const auto& e : v) ok = ok && e.is_string();
    } else if (k == "eval_time_budget_s") ok = v.is_number() && v.get<double>() > 0;
    else if (k == "overwrite_output") ok = v.is_boolean();
    else throw_invalid(file, "plan_overrides." + k, "unknown override key",
                       "use num_calib_data, seq_len, quant_algo, exclude_layers, threads, eval_time_budget_s or overwrite_output");
    if (!ok) throw_invalid(file, "plan_overrides." + k, "wrong type or value: " + v.dump(), "fix the fix block");
  }
}

}  // namespace

std::string fix_hypothesis_file_name(int attempt) { return "fix_hypothesis_attempt_" + std::to_string(attempt) + ".md"; }

std::string render_fix_hypothesis(const FixHypothesis& f) {
  std::string s = "# Fix hypothesis for attempt " + std::to_string(f.attempt) + "\n\n## Root cause\n" + f.root_cause +
                  "\n\n## Concrete fix\n";
  for (const auto& a : f.actions) s += "- " + a + "\n";
  s += "\n## Risk\n" + f.risk + "\n\n## Fix block\n```json\n";
  nlohmann::ordered_json block;
  block["plan_overrides"] = f.plan_overrides;
  s += block.dump(2) + "\n```\n";
  return s;
}

FixHypothesis parse_fix_hypothesis(const std::string& text, const std::string& file) {
  FixHypothesis f;
  const std::string head = "# Fix hypothesis for attempt ";
  if (text.rfind(head, 0) != 0) throw_invalid(file, "", "does not start with '" + head + "N'", "rewrite the file");
  try {
    f.attempt = std::stoi(text.substr(head.size()));
  } catch (const std::exception&) {
    throw_invalid(file, "", "the title has no attempt number", "rewrite the file");
  }
  f.root_cause = section(text, "Root cause", file);
  std::istringstream actions(section(text, "Concrete fix", file));
  for (std::string line; std::getline(actions, line);) {
    line = trim(line);
    if (line.rfind("- ", 0) == 0) f.actions.push_back(line.substr(2));
  }
  if (f.actions.empty()) throw_invalid(file, "Concrete fix", "lists no action", "add '- <action>' lines");
  f.risk = section(text, "Risk", file);
  std::string block = section(text, "Fix block", file);
  const auto open = block.find("```json");
  const auto close = block.rfind("```");
  if (open == std::string::npos || close == std::string::npos || close <= open)
    throw_invalid(file, "Fix block", "no ```json fenced block", "add the machine-readable block");
  const auto j = nlohmann::ordered_json::parse(block.substr(open + 7, close - open - 7), nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw_invalid(file, "Fix block", "not a JSON object", "fix the JSON");
  for (const auto& [k, _] : j.items())
    if (k != "plan_overrides") throw_invalid(file, "Fix block." + k, "unknown key", "only plan_overrides is read");
  if (j.contains("plan_overrides")) f.plan_overrides = j["plan_overrides"];
  check_overrides(f.plan_overrides, file);
  return f;
}

}  // namespace qloom::agent
