// report.html from the fixtures' facts: self-contained (no scripts, links,
// imports or URLs), balanced markup, the three plots with their marks and
// tooltips, "not run" / "not applicable" sections, escaping of a hostile
// model name, deterministic bytes apart from generated_at.
#include "qloom/perf/report_html.h"

#include <cmath>
#include <regex>
#include <vector>

#include <gtest/gtest.h>

#include "perf/report_fixture.h"
#include "qloom/perf/svg_plot.h"

namespace qloom::perf {
namespace {

using Json = nlohmann::ordered_json;

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }
size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string html_of(const Json& state, const std::string& generated_at = "2026-12-02T05:30:00Z") {
  return render_report_html(build_session_breakdown(state, test::perf_context(generated_at)));
}

// Every start tag has its end tag in order (void and self-closed elements
// aside): a string that escaped its escaping would break this.
std::string unbalanced(const std::string& html) {
  static const std::regex tag(R"(<(/?)([a-zA-Z][a-zA-Z0-9]*)[^>]*?(/?)>)");
  std::vector<std::string> open;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), tag); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[2];
    if ((*it)[3] == "/" || name == "meta") continue;
    if ((*it)[1] == "/") {
      if (open.empty() || open.back() != name) return "unexpected </" + name + ">";
      open.pop_back();
    } else {
      open.push_back(name);
    }
  }
  return open.empty() ? "" : "unclosed <" + open.back() + ">";
}

TEST(ReportHtml, SelfContainedAndBalanced) {
  static const std::regex external(R"((src|href|xlink:href|action)\s*=|@import|url\(|<script|<link|<img|<iframe|<object|<embed|https?:|file:)",
                                   std::regex::icase);
  for (const char* name : {"search", "fixed", "failed"}) {
    const std::string html = html_of(test::perf_state(name));
    EXPECT_FALSE(std::regex_search(html, external)) << name;
    EXPECT_EQ(unbalanced(html), "") << name;
    EXPECT_TRUE(html.rfind("<!DOCTYPE html>\n", 0) == 0) << name;
    EXPECT_TRUE(has(html, "<meta charset=\"utf-8\">")) << name;
  }
}

TEST(ReportHtml, SearchSessionHasThePlots) {
  const std::string html = html_of(test::perf_state("search"));
  EXPECT_EQ(count(html, "<svg "), 3u);
  // (a) every candidate as a proxy circle with its tooltip, the real gate as
  // diamonds, the winner ring and label, the threshold line.
  EXPECT_TRUE(has(html, "<title>rank 3 · self_attn=fp8 dense_mlp=int4_wo_128 kv_cache=native · 5.094 bits/weight · "
                        "proxy gap 1.40% · real gap 1.12% (passed) · accepted</title>"))
      << html;
  EXPECT_EQ(count(html, "<circle cx=") - count(html, "r=\"2.5\"") - count(html, "r=\"10.0\""), 8u + 3u);  // 8 points + 3 legend dots
  EXPECT_EQ(count(html, "font-weight=\"bold\">winner</text>"), 1u);
  EXPECT_EQ(count(html, "stroke=\"#f59e0b\" stroke-width=\"2.5\"><title>rank 3 "), 1u);
  EXPECT_TRUE(has(html, ">threshold 2.00%</text>"));
  EXPECT_EQ(count(html, "fill=\"#dc2626\"><title>rank 2"), 1u);  // the rejected candidate's real gate
  // (b) 2 x 4 cells with their values; the native column is the grey reference.
  EXPECT_TRUE(has(html, "<title>self_attn @ int4_wo_128: KLD 0.0142 ± 0.000852, top-1 agreement 0.9148</title>")) << html;
  EXPECT_EQ(count(html, "<title>dense_mlp @ "), 4u);
  EXPECT_EQ(count(html, "fill=\"#e5e7eb\" stroke=\"#ffffff\""), 2u);
  EXPECT_TRUE(has(html, ">0.0187</text>"));
  // (c) both bars with their whiskers and runs, and the gain.
  EXPECT_TRUE(has(html, "<title>baseline: 400.4 tokens/s (geometric mean of 2 measurements; runs 397.9–403.0)</title>")) << html;
  EXPECT_TRUE(has(html, ">gain 2.10x (target 2.00x: met) · runtime simulate · ABBA order</text>")) << html;
  EXPECT_EQ(count(html, "r=\"2.5\""), 12u);  // 2 roles x 2 measurements x 3 timed runs
  EXPECT_TRUE(has(html, "<tr class=\"winner\"><td class=\"num\">3</td>"));
  EXPECT_TRUE(has(html, "<span class=\"result result-success\">success</span>"));
}

TEST(ReportHtml, MissingSectionsSayNotRunOrNotApplicable) {
  const std::string fixed = html_of(test::perf_state("fixed"));
  EXPECT_EQ(count(fixed, "<svg "), 0u);
  EXPECT_TRUE(has(fixed, "Not applicable: a fixed recipe has no candidates."));
  EXPECT_TRUE(has(fixed, "Not applicable: a fixed recipe measures no sensitivity."));
  EXPECT_TRUE(has(fixed, "Not applicable: --performance-mode off."));
  const std::string failed = html_of(test::perf_state("failed"));
  EXPECT_EQ(count(failed, "<svg "), 1u);  // the gap plot: three rejected candidates
  EXPECT_EQ(count(failed, "fill=\"#dc2626\"><title>rank"), 3u);
  EXPECT_FALSE(has(failed, "font-weight=\"bold\">winner</text>"));
  EXPECT_FALSE(has(failed, "stroke=\"#f59e0b\" stroke-width=\"2.5\"><title>"));
  EXPECT_TRUE(has(failed, "Not measured in this session."));
  EXPECT_TRUE(has(failed, "Not run: no throughput measurement was recorded (status pending)."));
  EXPECT_TRUE(has(failed, "<span class=\"result result-fail\">accuracy_failed</span>"));
}

TEST(ReportHtml, HostileStringsAreEscaped) {
  Json st = test::perf_state("search");
  st["run_spec"]["model"] = "<script>alert('x')</script>";
  st["mix_precision_search"]["candidate_queue"][0]["config"]["self_attn"] = "\"><b>x</b>";
  st["mix_precision_search"]["sensitivity"]["entries"][0]["unit"] = "<svg onload=alert(1)>";
  st["warnings"] = Json::array({"a & b < c"});
  const std::string html = html_of(st);
  EXPECT_FALSE(has(html, "<script"));
  EXPECT_FALSE(has(html, "<b>x</b>"));
  EXPECT_FALSE(has(html, "<svg onload"));
  EXPECT_TRUE(has(html, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
  EXPECT_TRUE(has(html, "&quot;&gt;&lt;b&gt;x&lt;/b&gt;"));
  EXPECT_TRUE(has(html, "<li>a &amp; b &lt; c</li>"));
  EXPECT_EQ(unbalanced(html), "");
}

TEST(ReportHtml, DeterministicApartFromGeneratedAt) {
  const Json st = test::perf_state("search");
  const std::string a = html_of(st, "2026-12-02T05:30:00Z");
  EXPECT_EQ(a, html_of(st, "2026-12-02T05:30:00Z"));
  std::string b = html_of(st, "2031-01-01T00:00:00Z");
  EXPECT_NE(a, b);
  EXPECT_EQ(count(b, "2031-01-01T00:00:00Z"), 1u);
  b.replace(b.find("2031-01-01T00:00:00Z"), 20, "2026-12-02T05:30:00Z");
  EXPECT_EQ(a, b);
}

TEST(SvgPlot, TicksAndColours) {
  // Steps of 1, 2 or 5 x 10^k no finer than range / target: 0.036 / 6 = 0.006 -> 0.01.
  const auto near = [](const std::vector<double>& got, const std::vector<double>& want) {
    if (got.size() != want.size()) return false;
    for (size_t i = 0; i < got.size(); ++i)
      if (std::abs(got[i] - want[i]) > 1e-12) return false;
    return true;
  };
  EXPECT_TRUE(near(nice_ticks(0, 0.036, 6), {0, 0.01, 0.02, 0.03, 0.04}));
  EXPECT_TRUE(near(nice_ticks(3.5, 8.6, 7), {3, 4, 5, 6, 7, 8, 9}));
  EXPECT_TRUE(near(nice_ticks(0, 1000, 5), {0, 200, 400, 600, 800, 1000}));
  EXPECT_TRUE(near(nice_ticks(2, 2, 5), {2, 2.2, 2.4, 2.6, 2.8, 3}));  // empty range -> [lo, lo + 1]
  EXPECT_EQ(heat_colour(0), "#ffffcc");
  EXPECT_EQ(heat_colour(1), "#800026");
  EXPECT_EQ(heat_colour(0.5), "#fd8d3c");
  EXPECT_EQ(heat_colour(-3), heat_colour(0));
  EXPECT_TRUE(has(svg_pareto_scatter({"x", "y", std::nullopt, {}}), "no candidates"));
}

}  // namespace
}  // namespace qloom::perf
