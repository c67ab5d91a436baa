#include "qloom/agent/run_manifest.h"

#include <gtest/gtest.h>

#include "qloom/agent/artifact_schema.h"
#include "qloom/agent/outcomes.h"
#include "qloom/job/algo_config_file.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::agent {
namespace {

nlohmann::json plan_for(const std::string& out) {
  return {{"quant_scheme", "int4_wo_32"},  {"kv_cache_dtype", "fp8"},   {"quant_algo", "gptq"},
          {"dataset", "c4"},               {"num_calib_data", 64},      {"seq_len", 128},
          {"exclude_layers", {"lm_head", "*self_attn*"}},              {"layer_quant_scheme", {{"*mlp*", "int8"}}},
          {"output_dir", out}};
}

TEST(RunManifest, BuildWriteReadRoundTripAndValidates) {
  test::TempDir t("manifest");
  const auto out = (t / "out dir").string();
  auto cmd = command_from_plan(plan_for(out), "/models/llama 1", "llama", false);
  EXPECT_EQ(cmd.options.exclude_layers, std::vector<std::string>{"*self_attn*"});  // lm_head is llama's default
  EXPECT_TRUE(cmd.options.dataset.empty());  // the bundled c4 sample is the default
  ManifestInputs in{"./llama 1", "local", "/models/llama 1", t.path(), 1};
  const auto m = build_run_manifest(in, cmd, default_checkpoints(), {{"cpu", "x"}}, {{"peak_memory", {{"human", "1 GiB"}}}});
  EXPECT_TRUE(check_artifact("run_manifest", m).empty());
  write_run_manifest(t.path(), m);
  const auto back = read_run_manifest(t.path());
  EXPECT_EQ(back.dump(), m.dump());
  const auto args = manifest_quantize_args(back);
  const auto parsed = job::parse_quantize_args(args);
  EXPECT_EQ(parsed.options.model_dir, "/models/llama 1");
  EXPECT_EQ(parsed.options.output_dir, out);
  EXPECT_EQ(parsed.options.quant_algo, "gptq");
  EXPECT_EQ(parsed.options.layer_quant_scheme.size(), 1u);
  EXPECT_NE(back["run"]["command_line"].get<std::string>().find("'/models/llama 1'"), std::string::npos);

  // The classifier finds outputs.quantized_model_dir in the YAML.
  test::TempDir ws("manifest-ws");
  write_run_manifest(ws.path(), m);
  ws.write("last_phase.txt", "export\n");
  ws.write("model_analysis.json", "{\"a\":1}");
  ws.write("quant_plan.json", "{\"a\":1}");
  const auto c = classify_workspace(ws.path());
  ASSERT_NE(c.outcome, nullptr);
  EXPECT_EQ(c.outcome->id, "must_have_weights_missing");
  EXPECT_NE(c.reason.find(out), std::string::npos) << c.reason;
}

TEST(RunManifest, StatusUpdateKeepsTheCommandAndRefusesAChangedOne) {
  test::TempDir t("manifest2");
  auto cmd = command_from_plan(plan_for((t / "o").string()), "/m", "llama", false);
  ManifestInputs in{"/m", "local", "/m", t.path(), 1};
  auto m = build_run_manifest(in, cmd, default_checkpoints(), {}, {});
  const auto recorded = manifest_quantize_args(m);
  update_run_status(m, recorded, "succeeded", {{"exit_status", 0}, {"seconds", 1.5}, {"size_bytes", 10}});
  EXPECT_EQ(m["run"]["status"], "succeeded");
  EXPECT_TRUE(check_artifact("run_manifest", m).empty());
  auto changed = recorded;
  changed.push_back("--overwrite");
  EXPECT_EQ(test::catch_error([&] { update_run_status(m, changed, "failed", {}); }).kind(), ErrorKind::kInternal);
  set_checkpoint_decision(m, "plan", "changed: use awq");
  EXPECT_TRUE(check_artifact("run_manifest", m).empty());
  set_checkpoint_decision(m, "plan", "maybe");
  EXPECT_FALSE(check_artifact("run_manifest", m).empty());
}

// --quant_algo_config_file: the command keeps the flag, inputs record each
// file's sha256 and parsed dict, and the exec check refuses an edited file.
TEST(RunManifest, RecordsAlgoConfigFilesAndCatchesAnEditedOne) {
  test::TempDir t("manifest3");
  auto cmd = command_from_plan(plan_for((t / "o").string()), "/m", "llama", false);
  const std::string text = R"({"name": "gptq", "desc_act": false, "static_groups": false})";
  const auto file = t.write("gptq.json", text);
  cmd.options.algo_config_files = {{"gptq", file.string()}};
  ManifestInputs in{"/m", "local", "/m", t.path(), 1};
  const auto m = build_run_manifest(in, cmd, default_checkpoints(), {}, {});
  EXPECT_TRUE(check_artifact("run_manifest", m).empty());
  const auto parsed = job::parse_quantize_args(manifest_quantize_args(m));
  EXPECT_EQ(parsed.options.algo_config_files, cmd.options.algo_config_files);
  const auto& rec = m["inputs"]["algo_config_files"];
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec[0]["algo"], "gptq");
  EXPECT_EQ(rec[0]["path"], file.string());
  EXPECT_EQ(rec[0]["sha256"], job::sha256_hex(text));
  EXPECT_EQ(rec[0]["config"]["desc_act"], false);
  check_algo_config_files(m);  // unchanged: no error

  t.write("gptq.json", R"({"name": "gptq", "desc_act": true})");
  const Error e = test::catch_error([&] { check_algo_config_files(m); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.file(), file.string());
  // A manifest without config files has nothing to check.
  cmd.options.algo_config_files.clear();
  check_algo_config_files(build_run_manifest(in, cmd, default_checkpoints(), {}, {}));
}

TEST(RunManifest, PlanWithoutSchemeOrOutputIsRefused) {
  auto p = plan_for("/o");
  p.erase("quant_scheme");
  EXPECT_EQ(test::catch_error([&] { command_from_plan(p, "/m", "llama", false); }).item(), "quant_scheme");
}

}  // namespace
}  // namespace qloom::agent
