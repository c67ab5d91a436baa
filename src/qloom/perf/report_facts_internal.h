// The pieces the perf report facts are assembled from (report_facts.cpp,
// report_facts_parts.cpp); internal to src/qloom/perf. Each reads the state
// through a Field (report_json.h), so a malformed field throws
// Error(kInvalidInput) naming its path. Pure functions.
#pragma once

#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "qloom/perf/report_facts.h"
#include "qloom/perf/report_json.h"

namespace qloom::perf::detail {

// {terminal_stage, terminal_result}, checked against each other
// (done -> success, perf_failed -> perf_below_target, failed ->
// accuracy_failed | performance_failed, base_unhealthy -> base_unhealthy).
std::pair<std::string, std::string> terminal_of(const Field& state);

// final.json's accuracy (null when the gate never ran).
nlohmann::ordered_json accuracy_facts(const Field& state);

// Every candidate of mix_precision_search.candidate_queue (else
// result.all_results) in queue order, with pareto / winner marked; [] when
// there was no search.
nlohmann::ordered_json candidates_of(const Field& state);

// final.json's best_candidate (null when there is none) and search summary
// (null on the fixed recipe or when the search never started).
nlohmann::ordered_json best_candidate_facts(const Field& state, const std::string& path,
                                            const nlohmann::ordered_json& candidates);
nlohmann::ordered_json search_facts(const Field& state, const std::string& path,
                                    const nlohmann::ordered_json& candidates);

// final.json's performance summary, warnings, versions, reproduction and timings.
nlohmann::ordered_json performance_facts(const Field& state);
nlohmann::ordered_json warnings_of(const Field& state, const nlohmann::ordered_json& performance,
                                   const ReportContext& ctx);
nlohmann::ordered_json versions_of();
nlohmann::ordered_json reproduction_of(const Field& state, const ReportContext& ctx);
nlohmann::ordered_json timings_of(const Field& state);

}  // namespace qloom::perf::detail
