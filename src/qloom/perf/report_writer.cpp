#include "qloom/perf/report_writer.h"

#include "qloom/perf/utc_time.h"

#include <chrono>
#include <ctime>
#include <system_error>

#include "qloom/core/error.h"
#include "qloom/io/atomic_dir.h"
#include "qloom/io/json_read.h"
#include "qloom/perf/report_facts.h"
#include "qloom/perf/report_html.h"
#include "qloom/perf/report_markdown.h"

namespace qloom::perf {
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

// progress.json's warnings (the last 50 the orchestrator kept), if the file exists.
std::vector<std::string> progress_warnings(const fs::path& session_dir) {
  const fs::path p = session_dir / "progress.json";
  std::error_code ec;
  if (!fs::exists(p, ec)) return {};
  const nlohmann::json progress = io::read_json_file(p);
  std::vector<std::string> out;
  if (!progress.is_object() || !progress.contains("warnings") || progress["warnings"].is_null()) return out;
  if (!progress["warnings"].is_array())
    throw_invalid(p.string(), "warnings", "must be an array of strings", "let the orchestrator rewrite progress.json");
  for (const auto& w : progress["warnings"]) {
    if (!w.is_string())
      throw_invalid(p.string(), "warnings", "must be an array of strings", "let the orchestrator rewrite progress.json");
    out.push_back(w.get<std::string>());
  }
  return out;
}

}  // namespace

Json to_json(const ReportPaths& p) {
  return Json{{"final_json", p.final_json.string()},
              {"final_md", p.final_md.string()},
              {"session_breakdown_json", p.session_breakdown_json.string()},
              {"session_report_md", p.session_report_md.string()},
              {"report_html", p.report_html.string()}};
}

ReportPaths write_reports(const Json& state, const fs::path& session_dir) {
  return write_reports(state, session_dir, WriteReportsOptions{});
}

ReportPaths write_reports(const Json& state, const fs::path& session_dir, const WriteReportsOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(session_dir, ec))
    throw_not_found(session_dir.string(), "", "the session directory does not exist",
                    "pass the directory the session was started with (--session-dir)");
  ReportContext ctx;
  ctx.generated_at = options.generated_at.empty() ? utc_timestamp() : options.generated_at;
  ctx.session_dir = session_dir;
  ctx.extra_warnings = progress_warnings(session_dir);
  ctx.source = (session_dir / "state.json").string();

  // Everything in memory (and checked against its schema) before any write.
  const Json final_facts = build_final_facts(state, ctx);
  const Json breakdown = build_session_breakdown(state, ctx);
  check_final_facts(final_facts, "reports/final.json");
  const std::string final_md = render_final_md(final_facts);
  const std::string session_md = render_session_report_md(breakdown);
  const std::string html = render_report_html(breakdown);

  ReportPaths p{session_dir / "reports" / "final.json", session_dir / "reports" / "final.md",
                session_dir / "session_breakdown.json", session_dir / "session_report.md",
                session_dir / "reports" / "report.html"};
  fs::create_directories(session_dir / "reports", ec);
  if (ec) throw_errno(ec.value(), (session_dir / "reports").string(), "cannot create the reports directory", true);
  io::write_file_atomic(p.report_html, html);
  io::write_file_atomic(p.final_md, final_md);
  io::write_file_atomic(p.session_report_md, session_md);
  io::write_file_atomic(p.session_breakdown_json, breakdown.dump(2) + "\n");
  io::write_file_atomic(p.final_json, final_facts.dump(2) + "\n");
  return p;
}

}  // namespace qloom::perf
