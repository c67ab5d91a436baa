// Shared pieces of the perf report tests: the state.json fixtures
// (tests/data/perf/state_{search,fixed,failed}.json, the shape the
// orchestrator stores) and a report context with a fixed generation time.
#pragma once

#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qloom/perf/report_facts.h"

namespace qloom::test {

inline nlohmann::ordered_json perf_state(const std::string& name) {
  const std::string path = std::string(QLOOM_TEST_DATA_DIR) + "/perf/state_" + name + ".json";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::ordered_json::parse(in);
}

inline perf::ReportContext perf_context(const std::string& generated_at = "2026-12-02T05:30:00Z") {
  perf::ReportContext ctx;
  ctx.generated_at = generated_at;
  return ctx;
}

}  // namespace qloom::test
