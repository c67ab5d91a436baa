// final.md and session_report.md from the fixtures' facts: the key figures
// (gap vs threshold with n and stderr, winner, gain, checkpoint, the
// reproduction command), every table of the session report, "not run" /
// "not applicable" sections, escaping of hostile strings, determinism.
#include "qloom/perf/report_markdown.h"

#include <gtest/gtest.h>

#include "perf/report_fixture.h"
#include "qloom/core/error.h"
#include "qloom/perf/report_format.h"
#include "support/expect_error.h"

namespace qloom::perf {
namespace {

using Json = nlohmann::ordered_json;

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

std::string final_md(const Json& state) { return render_final_md(build_final_facts(state, test::perf_context())); }
std::string session_md(const Json& state) {
  return render_session_report_md(build_session_breakdown(state, test::perf_context()));
}

TEST(ReportMarkdown, FinalHasTheKeyFigures) {
  const std::string md = final_md(test::perf_state("search"));
  EXPECT_TRUE(has(md, "Result: **success** — terminal stage `done`, path `mix_precision_search`.")) << md;
  EXPECT_TRUE(has(md, "1.12% ± 0.21% (n = 20480) against a threshold of 2.00%: passed (verdict pass)")) << md;
  EXPECT_TRUE(has(md, "|`ppl`|`perplexity`|9.8712|9.9822|1.12%|±|0.21%|2.00%|20480|yes|")) << md;
  EXPECT_TRUE(has(md, "`self_attn=fp8 dense_mlp=int4_wo_128 kv_cache=native` (rank 3, 5.094 bits/weight)")) << md;
  EXPECT_TRUE(has(md, "Gain: **2.10x** (target 2.00x: met) on runtime `simulate`, ABBA order.")) << md;
  EXPECT_TRUE(has(md, "|baseline|400.4|")) << md;
  EXPECT_TRUE(has(md, "|Checkpoint|`/tmp/qloom-perf-fixture/search/quant_ckpt`|")) << md;
  EXPECT_TRUE(has(md, "```sh\nqloom perf --model /work/main/build/real/smollm2-bf16 --accuracy-gap 2%")) << md;
  EXPECT_TRUE(has(md, "qloom perf report --session /tmp/qloom-perf-fixture/search")) << md;
  EXPECT_TRUE(has(md, "8 of 31 configurations evaluated in 48.6 s, 2 of 8 queued candidates gated")) << md;
  EXPECT_TRUE(has(md, "generated 2026-12-02T05:30:00Z")) << md;
}

TEST(ReportMarkdown, SessionReportHasEveryTable) {
  const std::string md = session_md(test::perf_state("search"));
  EXPECT_TRUE(has(md, "|Rank|Config|Bits/w|Proxy KLD||Stderr|Top-1|Proxy gap|Modelled gain|Real gap|Status|Front|")) << md;
  EXPECT_TRUE(has(md, "|3|`self_attn=fp8 dense_mlp=int4_wo_128 kv_cache=native`|5.094|0.0163|±|0.0006|0.948|1.40%|2.84x|"
                      "1.12%|accepted|Pareto, **winner**|"))
      << md;
  EXPECT_TRUE(has(md, "|2|`self_attn=fp8 dense_mlp=int4_wo_128 kv_cache=fp8`|5.094|0.0197|±|0.0007|0.941|1.70%|2.91x|"
                      "2.60%|rejected||"))
      << md;
  EXPECT_TRUE(has(md, "|Unit|`native`|`fp8`|`int8`|`int4_wo_128`|")) << md;
  EXPECT_TRUE(has(md, "|`dense_mlp`|0|0.0021|0.00108|0.0187|")) << md;
  EXPECT_TRUE(has(md, "|1|2|9.8712|10.1279|2.60%|±|0.19%|2.00%|20480|no|")) << md;  // attempt 1, candidate 2
  EXPECT_TRUE(has(md, "|4|`A2`|baseline|`simulate`|398.7, 397.9, 401.2|398.7|0.002|yes|")) << md;
  EXPECT_TRUE(has(md, "`gemm_tile`")) << md;
  EXPECT_TRUE(has(md, "|`perfopt`|`2026-12-02T05:24:19.900Z`|`2026-12-02T05:35:15.100Z`|655.2|")) << md;
  EXPECT_TRUE(has(md, "|**total**|||**1215.3**|")) << md;
  EXPECT_TRUE(has(md, "|`gpu_type`|`--gpu-type`|`MI300X`|")) << md;
  EXPECT_TRUE(has(md, "|`abba`|`{\"order\":[\"A1\",\"B1\",\"B2\",\"A2\"],")) << md;
  EXPECT_FALSE(has(md, "QLOOM_NUM_THREADS")) << "the environment stays out of the report";
}

TEST(ReportMarkdown, MissingSectionsSayNotRunOrNotApplicable) {
  const std::string fixed = final_md(test::perf_state("fixed"));
  EXPECT_TRUE(has(fixed, "Gain: not applicable (--performance-mode off).")) << fixed;
  EXPECT_TRUE(has(fixed, "|Search|not applicable (fixed recipe)|")) << fixed;
  EXPECT_TRUE(has(fixed, "fixed recipe `fp8 with fp8 kv cache` → `quant_scheme=fp8 kv_cache_dtype=fp8")) << fixed;
  const std::string fixed_s = session_md(test::perf_state("fixed"));
  EXPECT_TRUE(has(fixed_s, "Search: not applicable (fixed recipe).")) << fixed_s;
  EXPECT_TRUE(has(fixed_s, "No measurements.")) << fixed_s;
  const std::string failed = final_md(test::perf_state("failed"));
  EXPECT_TRUE(has(failed, "Result: **accuracy\\_failed**") || has(failed, "Result: **accuracy_failed**")) << failed;
  EXPECT_TRUE(has(failed, "|Winner|none (no candidate passed the gate)|")) << failed;
  EXPECT_TRUE(has(failed, "|Checkpoint|none|")) << failed;
  EXPECT_TRUE(has(failed, "not run (the session ended before the throughput stage; status `pending`)")) << failed;
  EXPECT_TRUE(has(failed, "termination `mix_precision_candidates_exhausted`")) << failed;
  const std::string failed_s = session_md(test::perf_state("failed"));
  EXPECT_TRUE(has(failed_s, "### Sensitivity\n\nNot measured.")) << failed_s;
  Json st = test::perf_state("failed");
  st["accuracy_validation"] = nullptr;
  EXPECT_TRUE(has(final_md(st), "## Accuracy gate\n\nNot run: the session ended before the real accuracy gate.")) << final_md(st);
}

TEST(ReportMarkdown, HostileStringsStayLiteral) {
  Json st = test::perf_state("search");
  st["run_spec"]["model"] = "/m/<script>alert(1)</script>|`x`";
  st["warnings"] = Json::array({"<img src=x onerror=alert(1)> *bold* [link](http://e.x)"});
  const std::string md = final_md(st);
  EXPECT_TRUE(has(md, "|Model|`` /m/<script>alert(1)</script>\\|`x` ``|")) << md;
  EXPECT_TRUE(has(md, "- \\<img src=x onerror=alert(1)\\> \\*bold\\* \\[link\\](http://e.x)")) << md;
  EXPECT_EQ(md_code("a``b"), "```a``b```");
  EXPECT_EQ(md_code_block("x\n```\ny"), "````\nx\n```\ny\n````\n");
}

TEST(ReportMarkdown, DeterministicAndCheckedAgainstTheSchema) {
  const Json state = test::perf_state("search");
  EXPECT_EQ(session_md(state), session_md(state));
  EXPECT_EQ(final_md(state), final_md(state));
  Json f = build_final_facts(state, test::perf_context());
  f.erase("accuracy");
  const Error e = test::catch_error([&] { render_final_md(f); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.file(), "final.json");
}

}  // namespace
}  // namespace qloom::perf
