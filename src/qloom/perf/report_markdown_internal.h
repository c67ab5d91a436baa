// Sections shared by final.md and session_report.md (report_markdown.cpp,
// report_session_md.cpp); internal to src/qloom/perf. Each takes a part of
// facts already checked against its schema and returns Markdown ending in a
// blank line (the *_line functions: one line without a newline). Pure.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace qloom::perf::mdr {

std::string heading(const std::string& text, int level);
std::string accuracy_table(const nlohmann::ordered_json& accuracy);
std::string winner_line(const nlohmann::ordered_json& final_facts);
std::string search_line(const nlohmann::ordered_json& final_facts);
std::string throughput_table(const nlohmann::ordered_json& performance);
std::string reproduce_block(const nlohmann::ordered_json& reproduction);
std::string warnings_list(const nlohmann::ordered_json& warnings);
std::string summary_table(const nlohmann::ordered_json& final_facts);

}  // namespace qloom::perf::mdr
