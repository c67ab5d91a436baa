// Step 6 ("loads in vLLM"): qloom's own exports of the demo model pass it for
// every scheme vLLM 0.33.0 implements; for each rule, an export edited to
// break it fails with the layer / field named, and the report says so.
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "qloom/core/error.h"
#include "qloom/job/quantize_job.h"
#include "qloom/io/safetensors_writer.h"
#include "qloom/io/weight_index.h"
#include "qloom/quant/scheme_registry.h"
#include "qloom/validate/validator.h"
#include "qloom/validate/vllm_rules.h"
#include "support/temp_dir.h"

namespace qloom::validate {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

fs::path export_demo(const fs::path& out, const std::string& scheme, const std::string& kv = "",
                     const std::vector<std::string>& exclude = {}, const std::string& pack = "reorder") {
  job::QuantizeOptions o;
  o.model_dir = QLOOM_DEMO_MODEL_DIR;
  o.output_dir = out;
  o.quant_scheme = scheme;
  o.kv_cache_dtype = kv;
  o.exclude_layers = exclude;
  o.pack_method = pack;
  o.exclude_unsupported = true;
  o.num_calib_data = 8;  // static fp8 / int8 / KV scales: a short calibration
  o.seq_len = 64;
  job::quantize_model(o);
  return out;
}

json read_config(const fs::path& dir) { return json::parse(test::read_file(dir / "config.json")); }
void write_config(const fs::path& dir, const json& j) {
  std::ofstream(dir / "config.json", std::ios::binary | std::ios::trunc) << j.dump(2) << "\n";
}
// Applies `edit` to the checkpoint's quantization_config.
template <class F>
void edit_qc(const fs::path& dir, F edit) {
  json c = read_config(dir);
  edit(c["quantization_config"]);
  write_config(dir, c);
}

// Rewrites the checkpoint's model.safetensors without `drop`, and with
// `widen` stored twice (shape [2] instead of a scalar).
void rewrite_tensors(const fs::path& dir, const std::string& drop, const std::string& widen) {
  const fs::path tmp_file = dir / "rewritten.tmp";
  {
    const io::WeightIndex w = io::WeightIndex::open(dir);
    std::vector<std::vector<std::byte>> keep;
    std::vector<std::pair<io::TensorSpec, std::span<const std::byte>>> out;
    for (const std::string& name : w.tensor_names()) {
      if (name == drop) continue;
      const io::TensorView t = w.view(name);
      io::TensorSpec spec{name, t.dtype(), t.shape()};
      if (name == widen) {
        keep.emplace_back(t.data.begin(), t.data.end());
        keep.back().insert(keep.back().end(), t.data.begin(), t.data.end());
        spec.shape = {2};
        out.emplace_back(spec, std::span<const std::byte>(keep.back()));
        continue;
      }
      out.emplace_back(spec, t.data);
    }
    io::write_safetensors_file(tmp_file, out);
  }
  fs::rename(tmp_file, dir / "model.safetensors");
}

ValidationReport validate(const fs::path& q) { return validate_checkpoint(QLOOM_DEMO_MODEL_DIR, q); }

// A copy: callers pass the temporary report of validate().
StepResult step6(const ValidationReport& r) {
  const StepResult* s = r.step(6);
  if (s == nullptr) throw std::runtime_error("no step 6 in the report");
  return *s;
}

// The findings of rule `id` in step 6's data.
json findings_of(const StepResult& s, const std::string& id) {
  for (const auto& r : s.data["rules"])
    if (r["id"] == id) return r["findings"];
  return json::array();
}
bool any_finding(const StepResult& s, const std::string& id, const std::string& where, const std::string& what) {
  for (const auto& f : findings_of(s, id))
    if (f["where"].get<std::string>().find(where) != std::string::npos &&
        f["what"].get<std::string>().find(what) != std::string::npos)
      return true;
  return false;
}

TEST(VllmCheck, QloomExportsOfEverySchemeVllmImplementsPass) {
  test::TempDir tmp("vllm");
  size_t passed = 0;
  for (const std::string& scheme : quant::scheme_names()) {
    const fs::path q = tmp / scheme;
    try {
      export_demo(q, scheme);
    } catch (const Error& e) {
      // int4_wo_128: no linear of the 64-wide demo model fits the layout.
      ASSERT_EQ(e.kind(), ErrorKind::kUnsupported) << scheme << ": " << e.what();
      continue;
    }
    const StepResult& s = step6(validate(q));
    if (scheme.rfind("amdfp4", 0) == 0) {
      // vLLM 0.33.0 has no scheme for e5m3-scaled fp4 (QuarkOCP_MX wants e8m0;
      // two-stage lists are NVFP4 only).
      EXPECT_EQ(s.status, StepResult::kFail) << scheme;
      EXPECT_TRUE(any_finding(s, "scheme_pairs", "global_quant_config",
                              scheme.find("global") != std::string::npos ? "only supported for NVFP4"
                                                                          : "No quark compatible scheme"))
          << scheme << "\n" << render_markdown(validate(q));
      continue;
    }
    const bool per_channel_int4 = scheme.find("wo_per_channel") != std::string::npos;
    if (per_channel_int4) {
      // vLLM 0.33.0's W4A16 path requires a positive integer group_size.
      EXPECT_EQ(s.status, StepResult::kFail) << scheme;
      EXPECT_TRUE(any_finding(s, "scheme_pairs", "global_quant_config", "group_size must be a positive int")) << scheme;
      continue;
    }
    if (scheme == "int4_fp8" || scheme == "int4_wa_64") {
      // vLLM 0.33.0 loads a multi-entry (progressive) weight config only for
      // NVFP4, and has no W4A4 int4 (dynamic int4 activations) scheme.
      EXPECT_EQ(s.status, StepResult::kFail) << scheme;
      EXPECT_TRUE(any_finding(s, "scheme_pairs", "global_quant_config",
                              scheme == "int4_fp8" ? "Multi-entry" : "No quark compatible scheme"))
          << scheme << "\n" << render_markdown(validate(q));
      continue;
    }
    EXPECT_EQ(s.status, StepResult::kOk) << scheme << "\n" << render_markdown(validate(q));
    EXPECT_EQ(s.details.size(), 6u) << scheme;  // one line per rule
    ++passed;
  }
  EXPECT_GE(passed, 8u);  // int4/uint4 g32/g64, int8, fp8, ptpc_fp8, mxfp4, mxfp4_weight_only
}

TEST(VllmCheck, Fp8WithFp8KvCachePassesWithOneLinePerRule) {
  test::TempDir tmp("vllm");
  const fs::path q = export_demo(tmp / "q", "fp8", "fp8");
  const ValidationReport rep = validate(q);
  const StepResult& s = step6(rep);
  ASSERT_EQ(s.status, StepResult::kOk) << render_markdown(rep);
  EXPECT_EQ(s.data["vllm_version"], "0.33.0");
  const std::string md = render_markdown(rep);
  EXPECT_NE(md.find("**Step 6 — loads in vLLM**: ok — vLLM 0.33.0's Quark loader accepts this checkpoint (6 rules checked)"),
            std::string::npos) << md;
  EXPECT_NE(md.find("KV cache: ok — kv_cache_group [\"*k_proj\",\"*v_proj\"] → 2 layer_quant_config entries"),
            std::string::npos) << md;
  EXPECT_NE(md.find("10 scalar output_scale tensors"), std::string::npos) << md;
  EXPECT_NE(md.find("global_quant_config → QuarkW8A8Fp8"), std::string::npos) << md;
  EXPECT_NE(md.find("vLLM ≥ 0.7.0"), std::string::npos) << md;
  EXPECT_NE(md.find("5 qkv_proj and 5 gate_up_proj groups"), std::string::npos) << md;
}

TEST(VllmCheck, LookupOrderLayerTypeConfigIsNeverUsedByVllm) {
  test::TempDir tmp("vllm");
  const fs::path q = export_demo(tmp / "q", "fp8");
  edit_qc(q, [](json& qc) { qc["layer_type_quant_config"]["Linear"] = qc["global_quant_config"]; });
  const StepResult& s = step6(validate(q));
  EXPECT_EQ(s.status, StepResult::kFail);
  EXPECT_TRUE(any_finding(s, "lookup_order", "layer_type_quant_config['Linear']", "type(module)"));
}

TEST(VllmCheck, LookupOrderExcludeGlobIsNotExpandedByVllm) {
  test::TempDir tmp("vllm");
  const fs::path q = export_demo(tmp / "q", "fp8", "", {"lm_head", "model.layers.0.*"});
  ASSERT_EQ(step6(validate(q)).status, StepResult::kOk);  // exclude holds the module names, as Quark writes it
  edit_qc(q, [](json& qc) { qc["exclude"] = json::array({"lm_head", "model.layers.0.*"}); });
  const ValidationReport rep = validate(q);
  const StepResult& s = step6(rep);
  EXPECT_EQ(s.status, StepResult::kFail);
  EXPECT_TRUE(any_finding(s, "lookup_order", "model.layers.0.self_attn.o_proj", "'model.layers.0.*' is a glob"));
  EXPECT_EQ(findings_of(s, "lookup_order").size(), 7u);  // the 7 linears of layer 0
  const std::string md = render_markdown(rep);
  EXPECT_NE(md.find("layer-config lookup order: FAIL — model.layers.0.self_attn.q_proj: stored unquantized"),
            std::string::npos) << md;
  EXPECT_NE(md.find("→ list 'model.layers.0.self_attn.q_proj' (or a 're:' regex) in quantization_config.exclude"),
            std::string::npos) << md;
  // Deployability names the first refusal and counts the rest.
  ASSERT_TRUE(rep.vllm.has_value());
  EXPECT_EQ(rep.vllm->answer, Deployability::kNo);
  const size_t findings = s.data["findings_count"].get<size_t>();
  ASSERT_GE(findings, 7u);
  const json first = findings_of(s, "lookup_order")[0];
  EXPECT_TRUE(rep.vllm->reason.starts_with(first["where"].get<std::string>() + ": " + first["what"].get<std::string>()))
      << rep.vllm->reason;
  EXPECT_TRUE(rep.vllm->reason.starts_with("model.layers.0.")) << rep.vllm->reason;
  EXPECT_TRUE(rep.vllm->reason.ends_with("(and " + std::to_string(findings - 1) + " more findings)"))
      << rep.vllm->reason;
  // The same exclusion as a regex is what vLLM understands.
  edit_qc(q, [](json& qc) { qc["exclude"] = json::array({"lm_head", "re:model\\.layers\\.0\\."}); });
  EXPECT_EQ(step6(validate(q)).status, StepResult::kOk) << render_markdown(validate(q));
}

TEST(VllmCheck, LookupOrderExcludedButStoredQuantized) {
  test::TempDir tmp("vllm");
  const fs::path q = export_demo(tmp / "q", "int8");
  edit_qc(q, [](json& qc) { qc["exclude"].push_back("model.layers.2.mlp.down_proj"); });
  const StepResult& s = step6(validate(q));
  EXPECT_EQ(s.status, StepResult::kFail);
  EXPECT_TRUE(any_finding(s, "lookup_order", "model.layers.2.mlp.down_proj", "stores it quantized"));
}

TEST(VllmCheck, FusedModulesHalfExcludedQkvRaisesInVllm) {
  test::TempDir tmp("vllm");
  const fs::path q = export_demo(tmp / "q", "fp8", "", {"lm_head", "model.layers.1.self_attn.k_proj"});
  const StepResult& s = step6(validate(q));
  EXPECT_EQ(s.status, StepResult::kFail);
  EXPECT_TRUE(any_finding(s, "fused_modules", "model.layers.1.self_attn.qkv_proj",
                          "model.layers.1.self_attn.k_proj excluded"));
}

TEST(VllmCheck, FusedModulesShardsWithDifferentConfigs) {
  test::TempDir tmp("vllm");
  const fs::path q = export_demo(tmp / "q", "ptpc_fp8");
  edit_qc(q, [](json& qc) {
    json up = qc["global_quant_config"];
    up["weight"]["qscheme"] = "per_tensor";
    qc["layer_quant_config"]["*up_proj"] = up;
  });
  const ValidationReport rep = validate(q);
  const StepResult& s = step6(rep);
  EXPECT_EQ(s.status, StepResult::kFail);
  EXPECT_TRUE(any_finding(s, "fused_modules", "model.layers.0.mlp.gate_up_proj",
                          "weight.qscheme: \"per_channel\" / \"per_tensor\""));
  EXPECT_NE(render_markdown(rep).find("fused modules: FAIL — model.layers.0.mlp.gate_up_proj: vLLM raises ValueError"),
            std::string::npos);
}

TEST(VllmCheck, KvCacheGroupWithoutMatchingEntry) {
  test::TempDir tmp("vllm");
  const fs::path q = export_demo(tmp / "q", "fp8", "fp8");
  edit_qc(q, [](json& qc) { qc["export"]["kv_cache_group"] = json::array({"*kv_b_proj"}); });
  const StepResult& s = step6(validate(q));
  EXPECT_EQ(s.status, StepResult::kFail);
  EXPECT_TRUE(any_finding(s, "kv_cache", "layer_quant_config", "no layer_quant_config key matches"));
}

TEST(VllmCheck, KvCacheSpecsMustBeEqualAndFp8PerTensor) {
  test::TempDir tmp("vllm");
  const fs::path q = export_demo(tmp / "q", "fp8", "fp8");
  edit_qc(q, [](json& qc) { qc["layer_quant_config"]["*v_proj"]["output_tensors"]["qscheme"] = "per_channel"; });
  StepResult s = step6(validate(q));
  EXPECT_EQ(s.status, StepResult::kFail);
  EXPECT_TRUE(any_finding(s, "kv_cache", "layer_quant_config['*v_proj'].output_tensors",
                          "output_tensors.qscheme: \"per_tensor\" / \"per_channel\""));
  edit_qc(q, [](json& qc) {
    for (const char* k : {"*k_proj", "*v_proj"}) qc["layer_quant_config"][k]["output_tensors"]["dtype"] = "int8";
    qc["layer_quant_config"]["*v_proj"]["output_tensors"]["qscheme"] = "per_tensor";
  });
  s = step6(validate(q));
  EXPECT_EQ(findings_of(s, "kv_cache").size(), 1u);
  EXPECT_TRUE(any_finding(s, "kv_cache", "layer_quant_config['*k_proj'].output_tensors", "fp8_e4m3 per_tensor only"));
}

TEST(VllmCheck, KvCacheScalesMustBeScalarsAndPresent) {
  test::TempDir tmp("vllm");
  const fs::path q = export_demo(tmp / "q", "fp8", "fp8");
  rewrite_tensors(q, "model.layers.2.self_attn.v_proj.output_scale", "model.layers.1.self_attn.k_proj.output_scale");
  const StepResult s = step6(validate(q));
  EXPECT_EQ(s.status, StepResult::kFail);
  EXPECT_EQ(findings_of(s, "kv_cache").size(), 2u);
  EXPECT_TRUE(any_finding(s, "kv_cache", "model.layers.2.self_attn.v_proj.output_scale", "default 1.0"));
  EXPECT_TRUE(any_finding(s, "kv_cache", "model.layers.1.self_attn.k_proj.output_scale",
                          "shape [2]: vLLM raises ValueError"));
}

TEST(VllmCheck, OutputTensorsOutsideTheKvCacheRaiseInVllm) {
  test::TempDir tmp("vllm");
  const fs::path q = export_demo(tmp / "q", "fp8", "fp8");
  edit_qc(q, [](json& qc) { qc["global_quant_config"]["output_tensors"] = qc["global_quant_config"]["input_tensors"]; });
  const StepResult& s = step6(validate(q));
  EXPECT_EQ(s.status, StepResult::kFail);
  // q_proj resolves to global too, but the k/v entries are cleared by the KV group.
  EXPECT_TRUE(any_finding(s, "output_and_bias", "and 24 more)", "sets output_tensors"));  // q, o, gate, up, down x 5
  EXPECT_EQ(findings_of(s, "output_and_bias").size(), 1u);
}

TEST(VllmCheck, BiasSpecRaisesInVllm) {
  test::TempDir tmp("vllm");
  const fs::path q = export_demo(tmp / "q", "int8");
  edit_qc(q, [](json& qc) { qc["global_quant_config"]["bias"] = qc["global_quant_config"]["weight"]; });
  const StepResult& s = step6(validate(q));
  EXPECT_EQ(s.status, StepResult::kFail);
  EXPECT_TRUE(any_finding(s, "output_and_bias", "global_quant_config", "sets bias"));
}

TEST(VllmCheck, PackMethodMustMatchTheStoredWords) {
  test::TempDir tmp("vllm");
  const fs::path q = export_demo(tmp / "q", "int4_wo_32", "", {}, "order");
  ASSERT_EQ(step6(validate(q)).status, StepResult::kOk);  // declared "order", packed "order"
  edit_qc(q, [](json& qc) { qc["export"]["pack_method"] = "reorder"; });
  const ValidationReport rep = validate(q);
  const StepResult& s = step6(rep);
  EXPECT_EQ(s.status, StepResult::kFail);
  EXPECT_TRUE(any_finding(s, "pack_method", ".weight", "its int32 words are packed 'order'"));
  EXPECT_NE(render_markdown(rep).find("→ set quantization_config.export.pack_method to \"order\" or re-export"),
            std::string::npos);
  edit_qc(q, [](json& qc) { qc["export"]["pack_method"] = "interleave"; });
  EXPECT_TRUE(any_finding(step6(validate(q)), "pack_method", "export.pack_method", "accepts \"order\" or \"reorder\" only"));
  // Without a source the declared value is still checked; the words are not.
  edit_qc(q, [](json& qc) { qc["export"]["pack_method"] = "reorder"; });
  EXPECT_EQ(step6(validate_checkpoint("", q)).status, StepResult::kOk);
}

TEST(VllmCheck, SchemePairVllmDoesNotImplement) {
  test::TempDir tmp("vllm");
  const fs::path q = export_demo(tmp / "q", "int8");
  edit_qc(q, [](json& qc) { qc["global_quant_config"]["input_tensors"]["dtype"] = "uint8"; });
  const ValidationReport rep = validate(q);
  const StepResult& s = step6(rep);
  EXPECT_EQ(s.status, StepResult::kFail);
  EXPECT_TRUE(any_finding(s, "scheme_pairs", "global_quant_config", "No quark compatible scheme was found"));
  EXPECT_NE(render_markdown(rep).find("**Step 6 — loads in vLLM**: FAIL — vLLM 0.33.0 would refuse or misload this "
                                      "checkpoint: 1 finding ((weight, input) scheme pairs)"),
            std::string::npos) << render_markdown(rep);
}

TEST(VllmCheck, SkippedWithoutAQuarkConfig) {
  test::TempDir tmp("vllm");
  const ValidationReport rep = validate_checkpoint(QLOOM_DEMO_MODEL_DIR, QLOOM_DEMO_MODEL_DIR);
  EXPECT_EQ(step6(rep).status, StepResult::kSkipped);
  EXPECT_EQ(step6(rep).data["reason"], "no_quark_config");
  ASSERT_TRUE(rep.vllm.has_value());
  EXPECT_EQ(rep.vllm->answer, Deployability::kUnknown);
  EXPECT_EQ(deployability_line(*rep.vllm),
            "deployable on vLLM 0.33: unknown — step 6 skipped: config.json has no Quark quantization_config (see "
            "step 3)");
}

// The issue's case: a valid per-channel W4A16 checkpoint (transformers and
// amd-quark load it) passes validation; vLLM 0.33's refusal is reported as
// deployability, and fails the verdict only with target vLLM.
TEST(VllmCheck, PerChannelW4A16PassesAndIsNotDeployableOnVllm) {
  test::TempDir tmp("vllm");
  const fs::path q = export_demo(tmp / "q", "int4_wo_per_channel");
  const ValidationReport rep = validate(q);  // the default target: none
  EXPECT_EQ(rep.target, DeployTarget::kNone);
  for (int n : {4, 1, 3, 2}) EXPECT_EQ(rep.step(n)->status, StepResult::kOk) << n << "\n" << render_markdown(rep);
  EXPECT_EQ(step6(rep).status, StepResult::kFail);
  EXPECT_TRUE(rep.passed()) << render_markdown(rep);
  ASSERT_TRUE(rep.vllm.has_value());
  EXPECT_EQ(rep.vllm->step, 6);
  EXPECT_EQ(rep.vllm->version, "0.33");
  EXPECT_EQ(rep.vllm->answer, Deployability::kNo);
  EXPECT_EQ(rep.vllm->reason.rfind("global_quant_config", 0), 0u) << rep.vllm->reason;
  EXPECT_NE(rep.vllm->reason.find("group_size must be a positive int"), std::string::npos) << rep.vllm->reason;
  const std::string md = render_markdown(rep);
  EXPECT_NE(md.find("**Verdict**: PASS"), std::string::npos) << md;
  EXPECT_NE(md.find("\n  - deployable on vLLM 0.33: no — global_quant_config"), std::string::npos) << md;
  const json j = report_to_json(rep);
  EXPECT_EQ(j["passed"], true);
  EXPECT_EQ(j["deployable"]["vllm"]["ok"], false);
  EXPECT_EQ(j["deployable"]["vllm"]["reason"], rep.vllm->reason);

  ValidateOptions o;
  o.target = DeployTarget::kVllm;
  const ValidationReport for_vllm = validate_checkpoint(QLOOM_DEMO_MODEL_DIR, q, o);
  EXPECT_FALSE(for_vllm.passed());
  EXPECT_NE(render_markdown(for_vllm).find("**Verdict**: FAIL — failed: Step 6 ("), std::string::npos)
      << render_markdown(for_vllm);
  EXPECT_EQ(report_to_json(for_vllm)["target"], "vllm");
}

TEST(VllmCheck, LoadableExportIsDeployableOnVllmForEitherTarget) {
  test::TempDir tmp("vllm");
  const fs::path q = export_demo(tmp / "q", "int4_wo_32");
  for (DeployTarget t : {DeployTarget::kNone, DeployTarget::kVllm}) {
    ValidateOptions o;
    o.target = t;
    const ValidationReport rep = validate_checkpoint(QLOOM_DEMO_MODEL_DIR, q, o);
    EXPECT_TRUE(rep.passed()) << render_markdown(rep);
    ASSERT_TRUE(rep.vllm.has_value());
    EXPECT_EQ(rep.vllm->answer, Deployability::kYes);
    EXPECT_TRUE(render_markdown(rep).ends_with("\n  - deployable on vLLM 0.33: yes\n")) << render_markdown(rep);
  }
}

TEST(VllmSemantics, DeepCompareAndLookupFollowPython) {
  EXPECT_FALSE(vllm::deep_compare(nlohmann::json(1), nlohmann::json(1.0)));  // int vs float
  EXPECT_FALSE(vllm::deep_compare(nlohmann::json(true), nlohmann::json(1)));
  EXPECT_TRUE(vllm::deep_compare(nlohmann::json::parse(R"({"a":[1,{"b":null}]})"),
                                 nlohmann::json::parse(R"({"a":[1,{"b":null}]})")));
  const auto qc = nlohmann::json::parse(R"({"layer_quant_config": {"model.layers.10.mlp.down_proj": {"w": 1},
      "*up_proj": {"w": 2}}, "global_quant_config": {"w": 0}, "exclude": ["lm_head", "re:.*\\.3\\."]})");
  // A key without '*' matches when the layer name is a substring of it.
  EXPECT_EQ(vllm::vllm_lookup(qc, "layers.10.mlp.down_proj").source, "layer_quant_config['model.layers.10.mlp.down_proj']");
  EXPECT_EQ(vllm::quark_lookup(qc, "layers.10.mlp.down_proj").source, "global_quant_config");
  EXPECT_EQ(vllm::vllm_lookup(qc, "model.layers.1.mlp.up_proj").source, "layer_quant_config['*up_proj']");
  EXPECT_EQ(vllm::excluded_by(qc, "model.layers.3.mlp.up_proj").value_or(""), "re:.*\\.3\\.");
  EXPECT_FALSE(vllm::excluded_by(qc, "model.lm_head"));
}

}  // namespace
}  // namespace qloom::validate
