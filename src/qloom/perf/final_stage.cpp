// FINAL: one reporting stage on every path. Writes the five reports
// (perf/report_writer.h) from state.json alone, records state.reporting, and
// moves the session to stage "final". A report that cannot be written is
// recorded (reporting.status failed, the error) without changing the
// session's result; `qloom perf report` retries it.
#include "qloom/core/error.h"
#include "qloom/perf/report_writer.h"
#include "qloom/perf/session_ctx.h"

namespace qloom::perf {

void final_reports_step(SessionCtx& ctx) {
  auto& s = ctx.st();
  if (s["terminal_stage"].is_null()) return;  // not reachable: every path ends terminal
  // The reports see the same reporting block on a first write and a rebuild.
  s["reporting"] = {{"status", "pending"}, {"paths", nlohmann::ordered_json::object()}, {"error", nullptr},
                    {"generated_at", utc_timestamp()}};
  try {
    WriteReportsOptions o;
    o.generated_at = s["reporting"]["generated_at"].get<std::string>();
    ReportPaths paths = write_reports(s, ctx.dir(), o);
    s["reporting"]["status"] = "written";
    s["reporting"]["paths"] = to_json(paths);
    s["reporting"]["error"] = nullptr;
  } catch (const Error& e) {
    s["reporting"]["status"] = "failed";
    s["reporting"]["error"] = e.what();
    ctx.say(std::string("reports could not be written: ") + e.what());
  }
  s["stage"] = "final";
  ctx.store.save();
  ctx.store.progress({{"stage", "final"},
                      {"stage_detail", "reports " + s["reporting"]["status"].get<std::string>()},
                      {"terminal_result", s["terminal_result"]}});
}

}  // namespace qloom::perf
