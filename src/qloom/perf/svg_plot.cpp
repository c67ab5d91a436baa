#include "qloom/perf/svg_plot.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "qloom/perf/report_format.h"

namespace qloom::perf {
namespace {

std::string n1(double v) { return fmt_fixed(v, 1); }

// A string-building SVG canvas: every text and title goes through
// html_escape; attribute strings come from this file only.
class Svg {
 public:
  Svg(double w, double h, const std::string& label) {
    s_ = "<svg class=\"chart\" width=\"" + n1(w) + "\" height=\"" + n1(h) + "\" viewBox=\"0 0 " + n1(w) + " " + n1(h) +
         "\" role=\"img\" aria-label=\"" + html_escape(label) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  }
  void rect(double x, double y, double w, double h, const std::string& attrs, const std::string& title = "") {
    el("rect", "x=\"" + n1(x) + "\" y=\"" + n1(y) + "\" width=\"" + n1(w) + "\" height=\"" + n1(h) + "\" " + attrs, title);
  }
  void line(double x1, double y1, double x2, double y2, const std::string& attrs) {
    el("line", "x1=\"" + n1(x1) + "\" y1=\"" + n1(y1) + "\" x2=\"" + n1(x2) + "\" y2=\"" + n1(y2) + "\" " + attrs, "");
  }
  void circle(double x, double y, double r, const std::string& attrs, const std::string& title = "") {
    el("circle", "cx=\"" + n1(x) + "\" cy=\"" + n1(y) + "\" r=\"" + n1(r) + "\" " + attrs, title);
  }
  void path(const std::string& d, const std::string& attrs, const std::string& title = "") {
    el("path", "d=\"" + d + "\" " + attrs, title);
  }
  void text(double x, double y, const std::string& t, const std::string& attrs = "") {
    s_ += "<text x=\"" + n1(x) + "\" y=\"" + n1(y) + "\"" + (attrs.empty() ? "" : " " + attrs) + ">" + html_escape(t) +
          "</text>\n";
  }
  std::string finish() { return s_ + "</svg>\n"; }

 private:
  void el(const char* name, const std::string& attrs, const std::string& title) {
    s_ += std::string("<") + name + " " + attrs;
    if (title.empty()) {
      s_ += "/>\n";
    } else {
      s_ += "><title>" + html_escape(title) + "</title></" + name + ">\n";
    }
  }
  std::string s_;
};

// Maps [d0, d1] onto [r0, r1].
struct Scale {
  double d0, d1, r0, r1;
  double operator()(double v) const { return d1 == d0 ? (r0 + r1) / 2 : r0 + (v - d0) / (d1 - d0) * (r1 - r0); }
};

int decimals_for(double step) { return std::max(0, int(-std::floor(std::log10(step) + 1e-9))); }

struct Frame {
  double left, top, right, bottom;  // plot area in pixels
};

// Grid, ticks and axis labels; `y_percent` prints y ticks as percentages.
void axes(Svg& svg, const Frame& f, const Scale& x, const std::vector<double>& xt, const Scale& y,
          const std::vector<double>& yt, bool y_percent, const std::string& xl, const std::string& yl) {
  const int xd = xt.size() > 1 ? decimals_for(xt[1] - xt[0]) : 1;
  const int yd = yt.size() > 1 ? decimals_for((yt[1] - yt[0]) * (y_percent ? 100 : 1)) : 1;
  for (double t : xt) {
    svg.line(x(t), f.top, x(t), f.bottom, "stroke=\"#e5e7eb\"");
    svg.text(x(t), f.bottom + 16, fmt_fixed(t, xd), "text-anchor=\"middle\" fill=\"#374151\"");
  }
  for (double t : yt) {
    svg.line(f.left, y(t), f.right, y(t), "stroke=\"#e5e7eb\"");
    svg.text(f.left - 6, y(t) + 4, y_percent ? fmt_percent(t, yd) : fmt_fixed(t, yd),
             "text-anchor=\"end\" fill=\"#374151\"");
  }
  svg.rect(f.left, f.top, f.right - f.left, f.bottom - f.top, "fill=\"none\" stroke=\"#6b7280\"");
  svg.text((f.left + f.right) / 2, f.bottom + 36, xl, "text-anchor=\"middle\" fill=\"#111827\"");
  const double cy = (f.top + f.bottom) / 2;
  svg.text(16, cy, yl, "text-anchor=\"middle\" fill=\"#111827\" transform=\"rotate(-90 16 " + n1(cy) + ")\"");
}

std::string diamond(double x, double y, double r) {
  return "M" + n1(x) + " " + n1(y - r) + " L" + n1(x + r) + " " + n1(y) + " L" + n1(x) + " " + n1(y + r) + " L" +
         n1(x - r) + " " + n1(y) + " Z";
}

void scatter_legend(Svg& svg, double x, double y) {
  svg.circle(x, y, 5, "fill=\"#93c5fd\" stroke=\"#1e3a8a\"");
  svg.text(x + 12, y + 4, "proxy estimate");
  svg.circle(x, y + 20, 5, "fill=\"#2563eb\" stroke=\"#1e3a8a\"");
  svg.text(x + 12, y + 24, "on the Pareto front");
  svg.line(x - 7, y + 40, x + 7, y + 40, "stroke=\"#2563eb\" stroke-width=\"2\"");
  svg.text(x + 12, y + 44, "Pareto front (proxy)");
  svg.path(diamond(x, y + 60, 6), "fill=\"#16a34a\"");
  svg.text(x + 12, y + 64, "real gate: passed");
  svg.path(diamond(x, y + 80, 6), "fill=\"#dc2626\"");
  svg.text(x + 12, y + 84, "real gate: failed");
  svg.circle(x, y + 100, 9, "fill=\"none\" stroke=\"#f59e0b\" stroke-width=\"2.5\"");
  svg.text(x + 12, y + 104, "winner");
  svg.line(x - 7, y + 120, x + 7, y + 120, "stroke=\"#dc2626\" stroke-dasharray=\"5 3\"");
  svg.text(x + 12, y + 124, "--accuracy-gap threshold");
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target_count) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(1, target_count);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  const long first = long(std::floor(lo / step + 1e-9)), last = long(std::ceil(hi / step - 1e-9));
  for (long i = first; i <= last; ++i) t.push_back(double(i) * step);
  return t;
}

std::string heat_colour(double t) {
  static constexpr std::array<std::array<int, 3>, 5> kStops = {
      {{255, 255, 204}, {254, 217, 118}, {253, 141, 60}, {227, 26, 28}, {128, 0, 38}}};
  t = std::clamp(t, 0.0, 1.0) * double(kStops.size() - 1);
  const size_t i = std::min(kStops.size() - 2, size_t(t));
  const double f = t - double(i);
  static const char* kHex = "0123456789abcdef";
  std::string out = "#";
  for (int c = 0; c < 3; ++c) {
    const int v = int(std::lround(kStops[i][c] + f * (kStops[i + 1][c] - kStops[i][c])));
    out += kHex[v / 16];
    out += kHex[v % 16];
  }
  return out;
}

std::string svg_pareto_scatter(const ScatterSpec& spec) {
  Svg svg(760, 400, "accuracy gap vs bits per weight");
  const Frame f{70, 20, 560, 340};
  if (spec.points.empty()) {
    svg.text(380, 200, "no candidates", "text-anchor=\"middle\" fill=\"#6b7280\"");
    return svg.finish();
  }
  double x0 = spec.points[0].x, x1 = x0, ymax = spec.threshold.value_or(0);
  for (const auto& p : spec.points) {
    x0 = std::min(x0, p.x), x1 = std::max(x1, p.x);
    ymax = std::max({ymax, p.y, p.y_real.value_or(0)});
  }
  const double pad = std::max(0.25, (x1 - x0) * 0.08);
  const auto xt = nice_ticks(x0 - pad, x1 + pad, 7);
  const auto yt = nice_ticks(0, ymax > 0 ? ymax * 1.1 : 0.01, 6);
  const Scale x{xt.front(), xt.back(), f.left, f.right}, y{yt.front(), yt.back(), f.bottom, f.top};
  axes(svg, f, x, xt, y, yt, true, spec.x_label, spec.y_label);
  if (spec.threshold) {
    svg.line(f.left, y(*spec.threshold), f.right, y(*spec.threshold), "stroke=\"#dc2626\" stroke-dasharray=\"5 3\"");
    svg.text(f.left + 4, y(*spec.threshold) - 5, "threshold " + fmt_percent(*spec.threshold, 2), "fill=\"#dc2626\"");
  }
  std::vector<const ScatterPoint*> front;
  for (const auto& p : spec.points)
    if (p.pareto) front.push_back(&p);
  std::sort(front.begin(), front.end(), [](auto* a, auto* b) { return a->x != b->x ? a->x < b->x : a->y > b->y; });
  std::string d;
  for (const auto* p : front) d += (d.empty() ? "M" : " L") + n1(x(p->x)) + " " + n1(y(p->y));
  if (front.size() > 1) svg.path(d, "fill=\"none\" stroke=\"#2563eb\" stroke-width=\"2\"");
  for (const auto& p : spec.points)
    if (p.y_real) svg.line(x(p.x), y(p.y), x(p.x), y(*p.y_real), "stroke=\"#9ca3af\" stroke-dasharray=\"2 2\"");
  for (const auto& p : spec.points) {
    svg.circle(x(p.x), y(p.y), 5,
               std::string("fill=\"") + (p.pareto ? "#2563eb" : "#93c5fd") + "\" stroke=\"#1e3a8a\"", p.tooltip);
    if (p.pareto || p.winner) svg.text(x(p.x) + 8, y(p.y) + 4, p.label, "fill=\"#1e3a8a\" font-size=\"11\"");
    if (p.y_real)
      svg.path(diamond(x(p.x), y(*p.y_real), 6), std::string("fill=\"") + (p.real_passed ? "#16a34a" : "#dc2626") + "\"",
               p.tooltip);
  }
  for (const auto& p : spec.points)
    if (p.winner) {
      const double wy = y(p.y_real.value_or(p.y));
      svg.circle(x(p.x), wy, 10, "fill=\"none\" stroke=\"#f59e0b\" stroke-width=\"2.5\"", p.tooltip);
      svg.text(x(p.x) - 12, wy + 4, "winner", "text-anchor=\"end\" fill=\"#b45309\" font-weight=\"bold\"");
    }
  scatter_legend(svg, 585, 40);
  return svg.finish();
}

namespace {

const HeatCell* find_cell(const HeatSpec& spec, const std::string& row, const std::string& col) {
  for (const auto& c : spec.cells)
    if (c.row == row && c.col == col) return &c;
  return nullptr;
}

// The log-scale legend: a ramp of small rectangles, the end values under it.
void heat_legend(Svg& svg, double x, double y, double lo, double hi, const std::string& caption) {
  constexpr int kSteps = 40;
  constexpr double kWidth = 240;
  for (int i = 0; i < kSteps; ++i)
    svg.rect(x + kWidth * i / kSteps, y, kWidth / kSteps + 0.5, 12, "fill=\"" + heat_colour((i + 0.5) / kSteps) + "\"");
  svg.rect(x, y, kWidth, 12, "fill=\"none\" stroke=\"#6b7280\"");
  svg.text(x, y + 26, fmt_sig(lo, 3), "fill=\"#374151\"");
  svg.text(x + kWidth / 2, y + 26, fmt_sig(std::sqrt(lo * hi), 3), "text-anchor=\"middle\" fill=\"#374151\"");
  svg.text(x + kWidth, y + 26, fmt_sig(hi, 3), "text-anchor=\"end\" fill=\"#374151\"");
  svg.text(x + kWidth + 16, y + 10, caption, "fill=\"#111827\"");
  svg.rect(x + kWidth + 16, y + 18, 12, 12, "fill=\"#e5e7eb\" stroke=\"#9ca3af\"");
  svg.text(x + kWidth + 34, y + 28, "0 / not measured", "fill=\"#374151\"");
}

}  // namespace

std::string svg_heatmap(const HeatSpec& spec) {
  // Row labels are right-aligned against the grid; ~7 px per character at 12 px.
  size_t longest = 0;
  for (const auto& r : spec.rows) longest = std::max(longest, r.size());
  const double label_w = std::max(120.0, 7.0 * double(longest) + 16), cell_w = 104, head_h = 28;
  const double cell_h = spec.rows.size() > 16 ? 16 : 40;
  const double w = std::max(label_w + cell_w * double(spec.cols.size()), label_w + 440) + 20;
  const double grid_bottom = head_h + cell_h * double(spec.rows.size());
  Svg svg(w, grid_bottom + 56, "sensitivity heat map");
  double lo = 0, hi = 0;
  for (const auto& c : spec.cells)
    if (c.value && *c.value > 0) {
      lo = lo == 0 ? *c.value : std::min(lo, *c.value);
      hi = std::max(hi, *c.value);
    }
  const double span = hi > lo ? std::log(hi) - std::log(lo) : 0;
  for (size_t j = 0; j < spec.cols.size(); ++j)
    svg.text(label_w + cell_w * (double(j) + 0.5), head_h - 10, spec.cols[j],
             "text-anchor=\"middle\" fill=\"#111827\" font-weight=\"bold\"");
  for (size_t i = 0; i < spec.rows.size(); ++i) {
    const double top = head_h + cell_h * double(i);
    svg.text(label_w - 8, top + cell_h / 2 + 4, spec.rows[i], "text-anchor=\"end\" fill=\"#111827\"");
    for (size_t j = 0; j < spec.cols.size(); ++j) {
      const HeatCell* c = find_cell(spec, spec.rows[i], spec.cols[j]);
      const bool shaded = c && c->value && *c->value > 0;
      const double t = shaded && span > 0 ? (std::log(*c->value) - std::log(lo)) / span : 1.0;
      const std::string fill = shaded ? heat_colour(t) : "#e5e7eb";
      const double left = label_w + cell_w * double(j);
      svg.rect(left, top, cell_w, cell_h, "fill=\"" + fill + "\" stroke=\"#ffffff\"",
               c ? c->tooltip : spec.rows[i] + " @ " + spec.cols[j] + ": not measured");
      if (cell_h >= 20) {
        const std::string v = !c || !c->value ? "—" : *c->value > 0 ? fmt_sig(*c->value, 3) : "0";
        svg.text(left + cell_w / 2, top + cell_h / 2 + 4, v,
                 std::string("text-anchor=\"middle\" pointer-events=\"none\" fill=\"") +
                     (shaded && t > 0.6 ? "#ffffff" : "#111827") + "\"");
      }
    }
  }
  if (hi > 0) heat_legend(svg, label_w, grid_bottom + 14, lo, hi, spec.value_label);
  return svg.finish();
}

std::string svg_bars(const BarSpec& spec) {
  const double bar_w = 90, gap = 60;
  const double w = std::max(620.0, 90 + (bar_w + gap) * double(spec.bars.size()) + 40);
  Svg svg(w, 370, "throughput");
  const Frame f{80, 20, 80 + (bar_w + gap) * double(spec.bars.size()) + 20, 300};
  double top = 0;
  for (const auto& b : spec.bars) {
    top = std::max({top, b.value, b.hi.value_or(0)});
    for (double s : b.samples) top = std::max(top, s);
  }
  const auto yt = nice_ticks(0, top > 0 ? top * 1.15 : 1, 5);
  const Scale y{yt.front(), yt.back(), f.bottom, f.top};
  const Scale x{0, 1, f.left, f.left};  // categorical: no x ticks
  axes(svg, f, x, {}, y, yt, false, "", spec.y_label);
  static constexpr const char* kFill[] = {"#9ca3af", "#2563eb", "#059669", "#7c3aed"};
  for (size_t i = 0; i < spec.bars.size(); ++i) {
    const Bar& b = spec.bars[i];
    const double left = f.left + gap / 2 + (bar_w + gap) * double(i), mid = left + bar_w / 2;
    svg.rect(left, y(b.value), bar_w, f.bottom - y(b.value), std::string("fill=\"") + kFill[i % 4] + "\"", b.tooltip);
    if (b.lo && b.hi) {
      svg.line(mid, y(*b.lo), mid, y(*b.hi), "stroke=\"#111827\" stroke-width=\"1.5\"");
      svg.line(mid - 10, y(*b.lo), mid + 10, y(*b.lo), "stroke=\"#111827\" stroke-width=\"1.5\"");
      svg.line(mid - 10, y(*b.hi), mid + 10, y(*b.hi), "stroke=\"#111827\" stroke-width=\"1.5\"");
    }
    for (size_t k = 0; k < b.samples.size(); ++k) {
      const double dx = (double(k) - double(b.samples.size() - 1) / 2) * 7;
      svg.circle(mid + 22 + dx, y(b.samples[k]), 2.5, "fill=\"#111827\" fill-opacity=\"0.6\"",
                 b.label + " run " + std::to_string(k + 1) + ": " + fmt_fixed(b.samples[k], 1));
    }
    const double label_y = y(std::max(b.value, b.hi.value_or(b.value))) - 8;
    svg.text(mid, label_y, fmt_fixed(b.value, 1), "text-anchor=\"middle\" fill=\"#111827\" font-weight=\"bold\"");
    svg.text(mid, f.bottom + 18, b.label, "text-anchor=\"middle\" fill=\"#111827\"");
  }
  if (!spec.note.empty()) svg.text(f.left, f.bottom + 52, spec.note, "fill=\"#111827\" font-size=\"14\"");
  return svg.finish();
}

}  // namespace qloom::perf
