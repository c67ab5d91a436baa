// Inline SVG charts for the perf session's report.html (report_html.h):
// a scatter of accuracy gap vs bits per weight with the Pareto front, the
// real gate and the winner; a heat map with a logarithmic colour scale; and
// bars with min-max whiskers and the individual samples. Plain-data inputs,
// no JSON. Every label and tooltip is escaped (html_escape), every
// coordinate printed with fixed decimals, so the same input gives the same
// bytes and a hostile name stays text. Each chart is one <svg> element with
// a <title> per mark (the browser's tooltip) and no external references.
//
// Errors: none (empty inputs draw an empty frame with a note).
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace qloom::perf {

struct ScatterPoint {
  double x = 0;                   // bits per weight
  double y = 0;                   // proxy gap (ratio)
  std::optional<double> y_real;   // the real gate's gap, where measured
  bool real_passed = false;
  bool pareto = false;
  bool winner = false;
  std::string label;              // short mark label ("#3")
  std::string tooltip;            // full text for <title>
};

struct ScatterSpec {
  std::string x_label, y_label;
  std::optional<double> threshold;  // horizontal line (ratio)
  std::vector<ScatterPoint> points;
};

// Gap axis in percent; the Pareto front joins the `pareto` points by x.
std::string svg_pareto_scatter(const ScatterSpec& spec);

struct HeatCell {
  std::string row, col;
  std::optional<double> value;  // missing -> grey "—"; <= 0 -> grey "0" (the reference)
  std::string tooltip;
};

struct HeatSpec {
  std::vector<std::string> rows, cols;
  std::vector<HeatCell> cells;
  std::string value_label;  // legend caption ("KLD (nats), log scale")
};

std::string svg_heatmap(const HeatSpec& spec);

struct Bar {
  std::string label;
  double value = 0;
  std::optional<double> lo, hi;  // whisker
  std::vector<double> samples;   // drawn as dots
  std::string tooltip;
};

struct BarSpec {
  std::string y_label;
  std::vector<Bar> bars;
  std::string note;  // a line under the bars ("gain 2.10x ...")
};

std::string svg_bars(const BarSpec& spec);

// The colour for t in [0, 1] on the heat map's ramp ("#rrggbb").
std::string heat_colour(double t);
// "Nice" axis ticks (steps of 1, 2 or 5 x 10^k) covering [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int target_count);

}  // namespace qloom::perf
