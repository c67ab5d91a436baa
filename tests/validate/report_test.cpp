// Tests for the report writers: golden Markdown for a small report, the JSON
// form, the files on disk, and byte-identical output for identical inputs.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "qloom/core/error.h"
#include "qloom/validate/report.h"
#include "qloom/validate/validator.h"
#include "validate/validate_fixture.h"

namespace {

namespace fs = std::filesystem;
using namespace qloom::validate;
using qloom::test::read_file;
using qloom::test::ValidateFixture;
using oj = nlohmann::ordered_json;

ValidationReport small_report() {
  ValidationReport r;
  r.source = "models/src";
  r.quantized = "out/q";
  StepResult s4{4, "fuzzy tensor names", StepResult::kOk, "all 2 source patterns present", {}, {}};
  s4.details = {"patterns: 3, mixed-dtype patterns: 0", "| pattern | count |", "|---|---:|",
                "| `a.*.w` | 2 |", "after the table"};
  StepResult s1{1, "auxiliary files", StepResult::kFail, "1 missing, 0 differing, 0 of 1 identical",
                {"missing: 1, mismatched: 0, extra: 0", "missing: tokenizer.json"}, {}};
  s1.data["missing"] = {"tokenizer.json"};
  StepResult s3{3, "config.json", StepResult::kOk, "equal", {"mismatches: 0"}, {}};
  StepResult s2{2, "MD5 spot-check", StepResult::kOk, "", {}, {}};
  StepResult s5{5, "numeric checks", StepResult::kSkipped, "no numeric checker", {}, {}};
  r.steps = {s4, s1, s3, s2, s5};
  return r;
}

TEST(Report, GoldenMarkdown) {
  const std::string expected =
      "## Validation Report — qloom validate\n"
      "\n"
      "- source: `models/src`\n"
      "- quantized: `out/q`\n"
      "- order: 4 → 1 → 3 → 2 → 5\n"
      "\n"
      "**Step 4 — fuzzy tensor names**: ok — all 2 source patterns present\n"
      "  - patterns: 3, mixed-dtype patterns: 0\n"
      "\n"
      "| pattern | count |\n"
      "|---|---:|\n"
      "| `a.*.w` | 2 |\n"
      "\n"
      "  - after the table\n"
      "\n"
      "**Step 1 — auxiliary files**: FAIL — 1 missing, 0 differing, 0 of 1 identical\n"
      "  - missing: 1, mismatched: 0, extra: 0\n"
      "  - missing: tokenizer.json\n"
      "\n"
      "**Step 3 — config.json**: ok — equal\n"
      "  - mismatches: 0\n"
      "\n"
      "**Step 2 — MD5 spot-check**: ok\n"
      "\n"
      "**Step 5 — numeric checks**: skipped — no numeric checker\n"
      "\n"
      "**Verdict**: FAIL — failed: Step 1 (ok: 3, FAIL: 1, skipped: 1)\n";
  EXPECT_EQ(render_markdown(small_report()), expected);
}

TEST(Report, VerdictAndEdgeCases) {
  ValidationReport r = small_report();
  r.steps[1].status = StepResult::kOk;
  r.source.clear();
  r.quantized = "a`b";
  const std::string md = render_markdown(r);
  EXPECT_NE(md.find("- source: (none given)\n"), std::string::npos);
  EXPECT_NE(md.find("- quantized: `` a`b ``\n"), std::string::npos);
  EXPECT_TRUE(md.ends_with("\n**Verdict**: PASS — ok: 4, FAIL: 0, skipped: 1\n"));
  EXPECT_TRUE(r.passed());

  ValidationReport empty;
  empty.quantized = "q";
  EXPECT_TRUE(empty.passed());
  EXPECT_EQ(render_markdown(empty),
            "## Validation Report — qloom validate\n\n- source: (none given)\n- quantized: `q`\n"
            "\n**Verdict**: PASS — ok: 0, FAIL: 0, skipped: 0\n");
  EXPECT_EQ(empty.step(4), nullptr);
}

TEST(Report, Json) {
  const oj j = report_to_json(small_report());
  EXPECT_EQ(j["report"], "validation_report");
  EXPECT_EQ(j["source"], "models/src");
  EXPECT_EQ(j["quantized"], "out/q");
  EXPECT_EQ(j["passed"], false);
  EXPECT_EQ(j["verdict"], "FAIL");
  EXPECT_EQ(j["order"], (oj{4, 1, 3, 2, 5}));
  EXPECT_EQ(j["counts"], (oj{{"ok", 3}, {"FAIL", 1}, {"skipped", 1}}));
  ASSERT_EQ(j["steps"].size(), 5u);
  const oj& s1 = j["steps"][1];
  EXPECT_EQ(s1["step"], 1);
  EXPECT_EQ(s1["title"], "auxiliary files");
  EXPECT_EQ(s1["status"], "FAIL");
  EXPECT_EQ(s1["ok"], false);
  EXPECT_EQ(s1["details"][1], "missing: tokenizer.json");
  EXPECT_EQ(s1["data"]["missing"], (oj{"tokenizer.json"}));
  EXPECT_EQ(j["steps"][4]["status"], "skipped");
  EXPECT_EQ(j["steps"][4]["data"], oj::object());
  // Key order is part of the format.
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"report", "heading", "source", "quantized", "passed", "verdict",
                                            "target", "deployable", "order", "counts", "steps"}));
  // A report without a vLLM step (the self-test's) has no deployability.
  EXPECT_EQ(j["target"], "none");
  EXPECT_EQ(j["deployable"], oj::object());
}

// small_report() with steps 1-5 ok and a vLLM step 6 of `status`, its
// deployability as validate_checkpoint states it.
ValidationReport report_with_vllm_step(StepResult::Status status, DeployTarget target) {
  ValidationReport r = small_report();
  r.steps[1].status = StepResult::kOk;
  r.steps[4].status = StepResult::kOk;
  StepResult s6{6, "loads in vLLM", status, "vLLM 0.33.0 would refuse or misload this checkpoint: 2 findings", {}, {}};
  r.steps.push_back(s6);
  r.target = target;
  Deployability d;
  d.step = 6;
  d.engine = "vLLM";
  d.version = "0.33";
  d.answer = status == StepResult::kOk ? Deployability::kYes : Deployability::kNo;
  if (status == StepResult::kFail) d.reason = "global_quant_config: group_size must be a positive int (and 1 more finding)";
  r.vllm = d;
  return r;
}

TEST(Report, DeployabilityLines) {
  Deployability d;
  d.step = 6;
  d.engine = "vLLM";
  d.version = "0.33";
  d.answer = Deployability::kYes;
  EXPECT_EQ(deployability_line(d), "deployable on vLLM 0.33: yes");
  d.answer = Deployability::kNo;
  d.reason = "x: refused";
  EXPECT_EQ(deployability_line(d), "deployable on vLLM 0.33: no — x: refused");
  d.answer = Deployability::kUnknown;
  d.reason = "step 6 skipped: no Quark config";
  EXPECT_EQ(deployability_line(d), "deployable on vLLM 0.33: unknown — step 6 skipped: no Quark config");
}

TEST(Report, DeployTargetNames) {
  EXPECT_EQ(parse_deploy_target("none"), DeployTarget::kNone);
  EXPECT_EQ(parse_deploy_target("vllm"), DeployTarget::kVllm);
  EXPECT_STREQ(target_name(DeployTarget::kNone), "none");
  EXPECT_STREQ(target_name(DeployTarget::kVllm), "vllm");
  try {
    parse_deploy_target("sglang");
    ADD_FAILURE() << "no error for an unknown target";
  } catch (const qloom::Error& e) {
    EXPECT_EQ(e.kind(), qloom::ErrorKind::kUsage);
    EXPECT_EQ(e.item(), "--target");
    EXPECT_NE(e.message().find("sglang"), std::string::npos) << e.message();
  }
}

TEST(Report, WithoutATargetAFailedVllmStepIsDeployabilityOnly) {
  const ValidationReport r = report_with_vllm_step(StepResult::kFail, DeployTarget::kNone);
  EXPECT_TRUE(r.passed());
  EXPECT_FALSE(r.decides(r.steps[5]));
  EXPECT_TRUE(r.decides(r.steps[0]));
  const std::string md = render_markdown(r);
  // The step keeps its own status line (the agent's classifier reads it).
  EXPECT_NE(md.find("\n**Step 6 — loads in vLLM**: FAIL — vLLM 0.33.0 would refuse"), std::string::npos) << md;
  EXPECT_TRUE(md.ends_with("\n**Verdict**: PASS — ok: 5, FAIL: 1, skipped: 0; Step 6 reports deployability only "
                           "(deployment target: none)\n"
                           "  - deployable on vLLM 0.33: no — global_quant_config: group_size must be a positive int "
                           "(and 1 more finding)\n"))
      << md;
  const oj j = report_to_json(r);
  EXPECT_EQ(j["passed"], true);
  EXPECT_EQ(j["verdict"], "PASS");
  EXPECT_EQ(j["target"], "none");
  EXPECT_EQ(j["counts"], (oj{{"ok", 5}, {"FAIL", 1}, {"skipped", 0}}));  // every step's status, as before
  EXPECT_EQ(j["deployable"], (oj{{"vllm",
                                  {{"version", "0.33"},
                                   {"step", 6},
                                   {"ok", false},
                                   {"reason", "global_quant_config: group_size must be a positive int (and 1 more "
                                              "finding)"}}}}));
  EXPECT_EQ(j["steps"][5]["status"], "FAIL");
}

TEST(Report, TargetVllmMakesAFailedVllmStepFailTheVerdict) {
  const ValidationReport r = report_with_vllm_step(StepResult::kFail, DeployTarget::kVllm);
  EXPECT_FALSE(r.passed());
  EXPECT_TRUE(r.decides(r.steps[5]));
  const std::string md = render_markdown(r);
  EXPECT_TRUE(md.ends_with("\n**Verdict**: FAIL — failed: Step 6 (ok: 5, FAIL: 1, skipped: 0)\n"
                           "  - deployable on vLLM 0.33: no — global_quant_config: group_size must be a positive int "
                           "(and 1 more finding)\n"))
      << md;
  const oj j = report_to_json(r);
  EXPECT_EQ(j["passed"], false);
  EXPECT_EQ(j["verdict"], "FAIL");
  EXPECT_EQ(j["target"], "vllm");
  EXPECT_EQ(j["deployable"]["vllm"]["ok"], false);
}

TEST(Report, AFailedCheckpointStepStillFailsWithoutATarget) {
  ValidationReport r = report_with_vllm_step(StepResult::kFail, DeployTarget::kNone);
  r.steps[1].status = StepResult::kFail;
  EXPECT_FALSE(r.passed());
  EXPECT_TRUE(render_markdown(r).ends_with(
      "\n**Verdict**: FAIL — failed: Step 1 (ok: 4, FAIL: 2, skipped: 0); Step 6 reports deployability only "
      "(deployment target: none)\n"
      "  - deployable on vLLM 0.33: no — global_quant_config: group_size must be a positive int (and 1 more finding)\n"));
}

TEST(Report, LoadableCheckpointSaysDeployableYes) {
  for (DeployTarget t : {DeployTarget::kNone, DeployTarget::kVllm}) {
    const ValidationReport r = report_with_vllm_step(StepResult::kOk, t);
    EXPECT_TRUE(r.passed());
    EXPECT_TRUE(render_markdown(r).ends_with("\n**Verdict**: PASS — ok: 6, FAIL: 0, skipped: 0\n"
                                             "  - deployable on vLLM 0.33: yes\n"))
        << render_markdown(r);
    const oj j = report_to_json(r);
    EXPECT_EQ(j["deployable"]["vllm"]["ok"], true);
    EXPECT_EQ(j["deployable"]["vllm"]["reason"], "");
  }
}

TEST(Report, UnknownDeployabilityIsNullInTheJson) {
  ValidationReport r = report_with_vllm_step(StepResult::kSkipped, DeployTarget::kVllm);
  r.vllm->answer = Deployability::kUnknown;
  r.vllm->reason = "step 6 skipped: no Quark config";
  EXPECT_TRUE(r.passed());
  EXPECT_TRUE(render_markdown(r).ends_with("  - deployable on vLLM 0.33: unknown — step 6 skipped: no Quark config\n"));
  EXPECT_TRUE(report_to_json(r)["deployable"]["vllm"]["ok"].is_null());
}

TEST(Report, WritesBothFilesAtomically) {
  ValidateFixture f;
  const auto dir = f.tmp() / "workspace" / "nested";
  const ValidationReport r = small_report();
  write_validation_report(r, dir);
  EXPECT_EQ(read_file(dir / "validation_report.md"), render_markdown(r));
  const oj j = oj::parse(read_file(dir / "validation_report.json"));
  EXPECT_EQ(j, report_to_json(r));
  EXPECT_TRUE(read_file(dir / "validation_report.json").ends_with("}\n"));
  // Overwrites; leaves no temporary files behind.
  write_validation_report(r, dir);
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  EXPECT_EQ(n, 2u);
}

TEST(Report, InvalidUtf8DoesNotBreakTheJsonWriter) {
  ValidateFixture f;
  ValidationReport r = small_report();
  r.steps[0].details.push_back(std::string("bad \xff name"));
  r.steps[0].data["names"] = {std::string("bad \xff name")};
  write_validation_report(r, f.tmp() / "out");
  const oj j = oj::parse(read_file(f.tmp() / "out" / "validation_report.json"));
  EXPECT_NE(j["steps"][0]["details"].back().get<std::string>().find("bad "), std::string::npos);
}

TEST(Report, SameInputsGiveIdenticalBytes) {
  ValidateFixture f;
  FakeQuarkOptions o;
  o.exclude = {"model.layers.1.*"};
  o.edit = [](qloom::io::TensorSpec& spec, std::vector<std::byte>& b) {
    if (spec.name == "model.norm.weight") b[0] ^= std::byte{1};
    return spec.name != "model.layers.3.mlp.up_proj.weight";
  };
  const auto q = f.make("q", o);
  fs::remove(q / "tokenizer.json");
  ValidateOptions one, many;
  one.threads = 1;
  many.threads = 8;
  const auto a = f.run(q, one), b = f.run(q, many);
  write_validation_report(a, f.tmp() / "ra");
  write_validation_report(b, f.tmp() / "rb");
  EXPECT_EQ(read_file(f.tmp() / "ra" / "validation_report.md"),
            read_file(f.tmp() / "rb" / "validation_report.md"));
  EXPECT_EQ(read_file(f.tmp() / "ra" / "validation_report.json"),
            read_file(f.tmp() / "rb" / "validation_report.json"));
  EXPECT_EQ(qloom::test::statuses(a), "FAIL FAIL ok FAIL skipped");

  // A second, independently written checkpoint of the same inputs reports the
  // same, apart from its path.
  const auto q2 = f.make("q2", o);
  fs::remove(q2 / "tokenizer.json");
  std::string md2 = render_markdown(f.run(q2));
  std::string md1 = render_markdown(a);
  EXPECT_EQ(md1.replace(md1.find(q.string()), q.string().size(), "Q"),
            md2.replace(md2.find(q2.string()), q2.string().size(), "Q"));
}

}  // namespace
