// write_reports: the five files under the session directory, equal to the
// in-memory facts, byte-identical when rewritten, nothing written for a
// malformed state, progress.json's warnings merged, typed errors.
#include "qloom/perf/report_writer.h"
#include "qloom/perf/utc_time.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "perf/report_fixture.h"
#include "qloom/agent/artifact_schema.h"
#include "qloom/core/error.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::perf {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ReportWriter, WritesTheFiveFilesFromTheFacts) {
  test::TempDir dir("perf-report");
  const Json state = test::perf_state("search");
  const ReportPaths p = write_reports(state, dir.path(), {"2026-12-02T05:30:00Z"});
  EXPECT_EQ(p.final_json, dir / "reports/final.json");
  EXPECT_EQ(p.final_md, dir / "reports/final.md");
  EXPECT_EQ(p.session_breakdown_json, dir / "session_breakdown.json");
  EXPECT_EQ(p.session_report_md, dir / "session_report.md");
  EXPECT_EQ(p.report_html, dir / "reports/report.html");
  ReportContext ctx = test::perf_context();
  ctx.session_dir = dir.path();
  ctx.source = (dir / "state.json").string();
  const Json f = build_final_facts(state, ctx);
  EXPECT_EQ(slurp(p.final_json), f.dump(2) + "\n");
  EXPECT_EQ(slurp(p.session_breakdown_json), build_session_breakdown(state, ctx).dump(2) + "\n");
  EXPECT_TRUE(agent::check_artifact("perf_final", nlohmann::json::parse(slurp(p.final_json))).empty());
  EXPECT_TRUE(
      agent::check_artifact("perf_session_breakdown", nlohmann::json::parse(slurp(p.session_breakdown_json))).empty());
  EXPECT_NE(slurp(p.final_md).find("**2.10x**"), std::string::npos);
  EXPECT_NE(slurp(p.report_html).find("</html>"), std::string::npos);
  const Json paths = to_json(p);
  EXPECT_EQ(paths["report_html"], (dir / "reports/report.html").string());
  EXPECT_EQ(paths.size(), 5u);
  // Rebuilding (qloom perf report) gives the same bytes.
  const std::string html = slurp(p.report_html), md = slurp(p.session_report_md);
  write_reports(state, dir.path(), {"2026-12-02T05:30:00Z"});
  EXPECT_EQ(slurp(p.report_html), html);
  EXPECT_EQ(slurp(p.session_report_md), md);
}

TEST(ReportWriter, MalformedStateWritesNothing) {
  test::TempDir dir("perf-report");
  Json state = test::perf_state("search");
  state["performance_validation"]["trials"][1] = "tile";
  const Error e = test::catch_error([&] { write_reports(state, dir.path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.file(), (dir / "state.json").string());
  EXPECT_EQ(e.item(), "performance_validation.trials[1]");
  EXPECT_FALSE(fs::exists(dir / "reports"));
  EXPECT_FALSE(fs::exists(dir / "session_breakdown.json"));
}

TEST(ReportWriter, ProgressWarningsJoinTheStateOnes) {
  test::TempDir dir("perf-report");
  dir.write("progress.json", R"({"stage": "final", "warnings": ["resumed after an interruption"]})");
  const ReportPaths p = write_reports(test::perf_state("fixed"), dir.path(), {"2026-12-02T05:30:00Z"});
  const Json f = Json::parse(slurp(p.final_json));
  EXPECT_EQ(f["warnings"].back(), "resumed after an interruption");
  EXPECT_EQ(f["reproduction"]["resume"].get<std::string>().substr(f["reproduction"]["command"].get<std::string>().size()),
            " --session-dir " + dir.path().string());
  dir.write("progress.json", R"({"warnings": "oops"})");
  const Error e = test::catch_error([&] { write_reports(test::perf_state("fixed"), dir.path()); });
  EXPECT_EQ(e.item(), "warnings");
  EXPECT_EQ(e.file(), (dir / "progress.json").string());
}

TEST(ReportWriter, MissingSessionDirAndTimestamp) {
  const Error e = test::catch_error([] { write_reports(test::perf_state("fixed"), "/nonexistent/qloom-session"); });
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  const std::string now = utc_timestamp();
  EXPECT_EQ(now.size(), 20u);
  EXPECT_EQ(now[10], 'T');
  EXPECT_EQ(now.back(), 'Z');
}

}  // namespace
}  // namespace qloom::perf
