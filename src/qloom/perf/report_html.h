// reports/report.html of a `qloom perf` session: one self-contained page
// (inline CSS and SVG only: no scripts, fonts, images or links to anything
// outside it, so it opens offline) rendered from session_breakdown.json's
// facts alone (report_facts.h), with
//   (a) the accuracy gap vs bits per weight of every candidate: the proxy
//       estimate, the real gate where measured, the Pareto front and the
//       winner, against the --accuracy-gap threshold;
//   (b) the measured sensitivity heat map, unit x precision, KLD on a log
//       colour scale, values in each cell's tooltip;
//   (c) baseline vs quantized throughput bars with min-max whiskers over the
//       timed runs, and the gain;
// plus the facts table, the candidates table, warnings and the commands to
// reproduce. Sections a session never reached read "not run" / "not
// applicable". Every string from the facts is HTML-escaped.
//
// Inputs: the breakdown facts. Errors: facts that do not match
// schemas/perf_session_breakdown.schema.json -> qloom::Error(kInvalidInput)
// naming "session_breakdown.json". Deterministic: same facts -> same bytes
// (generated_at appears once, in the footer). Thread-safety: pure function.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace qloom::perf {

std::string render_report_html(const nlohmann::ordered_json& breakdown);

}  // namespace qloom::perf
