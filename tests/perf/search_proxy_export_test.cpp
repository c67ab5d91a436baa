// The proxy score of whole candidates on the demo model, and candidates
// turned into `qloom quantize` jobs: the patterns, their verification
// against the exporter's own layer selection, and real mixed-precision
// checkpoints that `qloom validate` accepts.
#include <gtest/gtest.h>

#include "qloom/job/quantize_job.h"
#include "qloom/export/quark_config.h"
#include "qloom/io/model_dir.h"
#include "qloom/perf/candidate_export.h"
#include "qloom/perf/candidates.h"
#include "qloom/perf/proxy.h"
#include "qloom/perf/sensitivity.h"
#include "support/expect_error.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace qloom::perf {
namespace {

using test::catch_error;

const io::ModelDir& demo() {
  static const io::ModelDir d = io::ModelDir::open(QLOOM_DEMO_MODEL_DIR, true);
  return d;
}

const PartitionPlan& plan(Granularity g = Granularity::kPartition) {
  static const PartitionPlan p = plan_partitions(demo(), {});
  static const PartitionPlan l = plan_partitions(demo(), {Granularity::kLayer, {}});
  return g == Granularity::kLayer ? l : p;
}

const Reference& reference() {
  static const auto r = Reference::build(demo(), plan(), {"", 3, 96, 1});
  return *r;
}

CandidateConfig config(const std::string& attn, const std::string& mlp, const std::string& kv = "native") {
  CandidateConfig c;
  c.partitions = {{"self_attn", attn}, {"dense_mlp", mlp}};
  c.kv_cache = kv;
  return c;
}

// fp8 attention and int8 MLP with one native layer in each, fp8 KV cache.
CandidateConfig holes_config() {
  CandidateConfig c = config("fp8", "int8", "fp8");
  c.layers = {{"layers.1.self_attn", "native"}, {"layers.4.dense_mlp", "native"}};
  return c;
}

TEST(SearchProxy, NativeScoresZeroAndSingleUnitMatchesSensitivity) {
  const ProxyScore native = score_candidate(demo(), plan(), reference(), config("native", "native"), 1);
  EXPECT_EQ(native.kld, 0.0);
  EXPECT_EQ(native.top1, 1.0);
  EXPECT_EQ(native.tokens, reference().scored_tokens());
  const ProxyScore one = score_candidate(demo(), plan(), reference(), config("fp8", "native"), 1);
  const SensitivityEntry e = measure_unit(demo(), plan(), reference(), "self_attn", get_precision("fp8"), 1);
  EXPECT_EQ(one.kld, e.kld_mean);
  EXPECT_EQ(one.ppl_ratio, e.ppl_ratio);
  const ProxyScore kv = score_candidate(demo(), plan(), reference(), config("native", "native", "fp8"), 1);
  EXPECT_EQ(kv.kld, measure_unit(demo(), plan(), reference(), "kv_cache", get_precision("fp8"), 1).kld_mean);
  // Both partitions + KV hurt more than either alone.
  const ProxyScore all = score_candidate(demo(), plan(), reference(), config("fp8", "fp8", "fp8"), 2);
  EXPECT_GT(all.kld, one.kld);
  EXPECT_GT(all.kld, kv.kld);
  EXPECT_GT(all.seconds, 0.0);
  EXPECT_FALSE(all.stopped);
  // Same answer from 1 thread.
  EXPECT_EQ(score_candidate(demo(), plan(), reference(), config("fp8", "fp8", "fp8"), 1).kld, all.kld);
}

TEST(SearchProxy, ApplyProxyFillsTheEntry) {
  CandidateEntry e;
  e.config = config("int8", "int8");
  const ProxyScore s = score_candidate(demo(), plan(), reference(), e.config, 1);
  apply_proxy(e, s, "ppl");
  EXPECT_EQ(e.search_metrics.proxy_kld, s.kld);
  EXPECT_EQ(e.search_metrics.proxy_kld_stderr, s.kld_stderr);
  EXPECT_EQ(e.search_metrics.proxy_top1, s.top1);
  EXPECT_EQ(e.search_metrics.proxy_ppl_ratio, s.ppl_ratio);
  EXPECT_EQ(e.search_metrics.proxy_seconds, s.seconds);
  EXPECT_EQ(*e.relative_change, std::max(0.0, s.ppl_ratio - 1));
  apply_proxy(e, s, "kld");
  EXPECT_EQ(*e.relative_change, s.kld);
  ProxyScore stopped = s;
  stopped.stopped = true;
  EXPECT_EQ(catch_error([&] { apply_proxy(e, stopped, "ppl"); }).kind(), ErrorKind::kUsage);
}

TEST(SearchProxy, BadConfigsAreUsageErrors) {
  CandidateConfig c = config("fp8", "fp8");
  c.partitions.push_back({"routed_moe", "fp8"});
  EXPECT_EQ(catch_error([&] { (void)assignment_of(plan(), c); }).item(), "config.routed_moe");
  c = config("fp8", "fp9");
  EXPECT_EQ(catch_error([&] { (void)assignment_of(plan(), c); }).kind(), ErrorKind::kUsage);
  c = config("fp8", "fp8");
  c.partitions.pop_back();
  EXPECT_EQ(catch_error([&] { (void)assignment_of(plan(), c); }).item(), "config.dense_mlp");
  c = config("fp8", "fp8");
  c.layers = {{"layers.0.self_attn", "native"}};
  EXPECT_EQ(catch_error([&] { (void)assignment_of(plan(), c); }).item(), "config.layers.layers.0.self_attn");
  EXPECT_NO_THROW((void)assignment_of(plan(Granularity::kLayer), c));
}

ExportSettings settings(const std::filesystem::path& out) {
  ExportSettings s;
  s.output_dir = out;
  s.num_calib_data = 4;
  s.seq_len = 64;
  s.threads = 1;
  return s;
}

TEST(SearchExport, PartitionConfigUsesCompactPatterns) {
  const job::QuantizeOptions o =
      export_options(demo(), plan(), config("ptpc_fp8", "int8", "fp8"), settings("/tmp/unused"));
  EXPECT_EQ(o.quant_scheme, "int8");  // the MLP holds more parameters
  // Under an fp8 KV cache k/v take their spec from Quark's *k_proj / *v_proj
  // entries (based on the first attention pattern): ours must not match them.
  EXPECT_EQ(o.layer_quant_scheme, (std::vector<std::pair<std::string, std::string>>{
                                      {"*.self_attn.o_proj", "ptpc_fp8"}, {"*.self_attn.q_proj", "ptpc_fp8"}}));
  EXPECT_TRUE(o.exclude_layers.empty());
  EXPECT_EQ(o.kv_cache_dtype, "fp8");
  EXPECT_EQ(o.num_calib_data, 4u);
  EXPECT_EQ(o.seq_len, 64u);
  EXPECT_EQ(selected_schemes(demo(), o), intended_schemes(demo(), plan(), config("ptpc_fp8", "int8", "fp8")));
  EXPECT_EQ(selected_schemes(demo(), o).at("model.layers.1.self_attn.k_proj"), "ptpc_fp8");
  // Without the fp8 cache one container pattern does.
  const job::QuantizeOptions nokv =
      export_options(demo(), plan(), config("ptpc_fp8", "int8"), settings("/tmp/unused"));
  EXPECT_EQ(nokv.layer_quant_scheme, (std::vector<std::pair<std::string, std::string>>{{"*.self_attn.*", "ptpc_fp8"}}));
  // A native partition becomes exclusions; the user's exclusions pass through.
  ExportSettings s = settings("/tmp/unused");
  s.exclude_layers = {"*.layers.4.*"};
  PartitionRequest req;
  req.exclude_layers = s.exclude_layers;
  const PartitionPlan excl = plan_partitions(demo(), req);
  const job::QuantizeOptions n = export_options(demo(), excl, config("native", "fp8"), s);
  EXPECT_EQ(n.quant_scheme, "fp8");
  EXPECT_TRUE(n.layer_quant_scheme.empty());
  EXPECT_EQ(n.exclude_layers, (std::vector<std::string>{"*.layers.4.*", "*.self_attn.*"}));
  EXPECT_EQ(n.kv_cache_dtype, "");
  const auto sel = selected_schemes(demo(), n);
  EXPECT_EQ(sel, intended_schemes(demo(), excl, config("native", "fp8")));
  EXPECT_EQ(sel.at("model.layers.4.mlp.up_proj"), "");
  EXPECT_EQ(sel.at("model.layers.3.mlp.up_proj"), "fp8");
  EXPECT_EQ(catch_error([&] { (void)export_options(demo(), plan(), config("native", "native"), s); }).kind(),
            ErrorKind::kUsage);
}

TEST(SearchExport, LayerOverridesUseDisjointLayerPatterns) {
  CandidateConfig c = config("int8", "fp8");
  c.layers = {{"layers.1.self_attn", "native"}, {"layers.2.dense_mlp", "int8"}, {"layers.3.self_attn", "ptpc_fp8"}};
  const job::QuantizeOptions o = export_options(demo(), plan(Granularity::kLayer), c, settings("/tmp/unused"));
  EXPECT_EQ(o.quant_scheme, "fp8");
  // No module matches two patterns: Quark (insertion order) and qloom's
  // config reader (key order) then agree.
  EXPECT_EQ(o.layer_quant_scheme, (std::vector<std::pair<std::string, std::string>>{
                                      {"*.layers.0.self_attn.*", "int8"},
                                      {"*.layers.2.self_attn.*", "int8"},
                                      {"*.layers.3.self_attn.*", "ptpc_fp8"},
                                      {"*.layers.4.self_attn.*", "int8"},
                                      {"*.layers.2.mlp.down_proj", "int8"},
                                      {"*.layers.2.mlp.gate_proj", "int8"},
                                      {"*.layers.2.mlp.up_proj", "int8"}}));
  EXPECT_EQ(o.exclude_layers, (std::vector<std::string>{"*.layers.1.self_attn.*"}));
  const auto sel = selected_schemes(demo(), o);
  EXPECT_EQ(sel, intended_schemes(demo(), plan(Granularity::kLayer), c));
  EXPECT_EQ(sel.at("model.layers.1.self_attn.q_proj"), "");
  EXPECT_EQ(sel.at("model.layers.3.self_attn.q_proj"), "ptpc_fp8");
  EXPECT_EQ(sel.at("model.layers.0.self_attn.q_proj"), "int8");
  EXPECT_EQ(sel.at("model.layers.2.mlp.up_proj"), "int8");
  EXPECT_EQ(sel.at("model.layers.0.mlp.up_proj"), "fp8");
  // A native partition with one quantized layer: the other layers are excluded one by one.
  CandidateConfig reopen = config("native", "fp8");
  reopen.layers = {{"layers.2.self_attn", "fp8"}};
  const job::QuantizeOptions r = export_options(demo(), plan(Granularity::kLayer), reopen, settings("/tmp/x"));
  EXPECT_EQ(selected_schemes(demo(), r), intended_schemes(demo(), plan(Granularity::kLayer), reopen));
  EXPECT_EQ(r.exclude_layers, (std::vector<std::string>{"*.layers.0.self_attn.*", "*.layers.1.self_attn.*",
                                                        "*.layers.3.self_attn.*", "*.layers.4.self_attn.*"}));
  EXPECT_TRUE(r.layer_quant_scheme.empty());
  // Native layers inside a quantized partition keep the partition's pattern.
  const CandidateConfig holes = holes_config();
  const job::QuantizeOptions h = export_options(demo(), plan(Granularity::kLayer), holes, settings("/tmp/x"));
  EXPECT_EQ(h.quant_scheme, "int8");
  EXPECT_EQ(h.layer_quant_scheme, (std::vector<std::pair<std::string, std::string>>{
                                      {"*.self_attn.o_proj", "fp8"}, {"*.self_attn.q_proj", "fp8"}}));
  EXPECT_EQ(h.exclude_layers, (std::vector<std::string>{"*.layers.1.self_attn.*", "*.layers.4.mlp.down_proj",
                                                        "*.layers.4.mlp.gate_proj", "*.layers.4.mlp.up_proj"}));
  EXPECT_EQ(selected_schemes(demo(), h), intended_schemes(demo(), plan(Granularity::kLayer), holes));
  // Per-layer k/v precisions cannot be written under an fp8 KV cache.
  CandidateConfig kv = c;
  kv.kv_cache = "fp8";
  const Error e = catch_error([&] { (void)export_options(demo(), plan(Granularity::kLayer), kv, settings("/tmp/x")); });
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_NE(e.remedy().find("k/v projection"), std::string::npos) << e.remedy();
}

// Every candidate the enumeration proposes (layer granularity, measured
// sensitivities) can be written as a Quark config that means what it says.
TEST(SearchExport, EveryEnumeratedCandidateExports) {
  const auto ref = Reference::build(demo(), plan(Granularity::kLayer), {"", 2, 64, 1});
  SensitivityOptions so;
  so.precisions = parse_precision_candidates({"native", "fp8", "int8", "int4_wo_32"});
  so.kv_fp8 = true;
  so.threads = 1;
  const SensitivityTable t = measure_sensitivity(demo(), plan(Granularity::kLayer), *ref, so).table;
  EnumerationOptions eo;
  eo.precisions = so.precisions;
  const Enumeration e = enumerate_candidates(plan(Granularity::kLayer), t, eo);
  EXPECT_GT(e.queue.size(), 10u);
  size_t with_layers = 0;
  for (const CandidateEntry& c : e.queue) {
    with_layers += c.config.layers.empty() ? 0 : 1;
    const job::QuantizeOptions o = export_options(demo(), plan(Granularity::kLayer), c.config, settings("/tmp/x"));
    EXPECT_EQ(selected_schemes(demo(), o), intended_schemes(demo(), plan(Granularity::kLayer), c.config))
        << c.config.canonical();
  }
  EXPECT_EQ(with_layers, e.layer_variants);
}

// Quantizes the demo model with a candidate, checks what the checkpoint's
// quantization_config gives every linear, and runs `qloom validate` on it.
void export_and_validate(const CandidateConfig& c, Granularity g) {
  SCOPED_TRACE(c.canonical());
  test::TempDir tmp("search-export");
  const job::QuantizeOptions o = export_options(demo(), plan(g), c, settings(tmp / "ckpt"));
  const job::QuantizeSummary sum = job::quantize_model(o);
  const auto intended = intended_schemes(demo(), plan(g), c);
  const nlohmann::json cfg = nlohmann::json::parse(test::read_file(tmp / "ckpt" / "config.json"));
  const nlohmann::json& qc = cfg["quantization_config"];
  size_t quantized = 0;
  for (const auto& [module, scheme] : intended) {
    const auto spec = exporter::resolve_layer_quant_spec(qc, module);
    const bool kv = c.kv_cache == "fp8" && (module.ends_with("k_proj") || module.ends_with("v_proj"));
    if (scheme.empty()) {
      EXPECT_TRUE(!spec || !spec->weight) << module;
    } else {
      ++quantized;
      ASSERT_TRUE(spec && spec->weight) << module;
      EXPECT_EQ(*spec->weight, *get_precision(scheme).spec->weight) << module;
      EXPECT_EQ(spec->input, get_precision(scheme).spec->input) << module;
    }
    EXPECT_EQ(spec && spec->output.has_value(), kv) << module;
  }
  EXPECT_EQ(sum.layers_quantized, quantized);
  const test::CommandResult v = test::run_qloom(
      {"validate", "--source", QLOOM_DEMO_MODEL_DIR, "--quantized", (tmp / "ckpt").string(), "--threads", "1"});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

TEST(SearchExport, MixedCheckpointsQuantizeAndValidate) {
  // Dynamic per-token fp8 attention, static int8 MLP, fp8 KV cache.
  export_and_validate(config("ptpc_fp8", "int8", "fp8"), Granularity::kPartition);
  // A weight-only scheme (int4 g32 on attention) mixed with a static-activation one.
  export_and_validate(config("int4_wo_32", "fp8"), Granularity::kPartition);
  export_and_validate(config("int4_wo_32", "fp8", "fp8"), Granularity::kPartition);
  // Native attention, quantized MLP, fp8 KV cache (excluded k/v keep the cache spec).
  export_and_validate(config("native", "int8", "fp8"), Granularity::kPartition);
  // Layer overrides, with and without the fp8 cache.
  CandidateConfig c = config("fp8", "fp8");
  c.layers = {{"layers.0.self_attn", "int8"}, {"layers.3.self_attn", "native"}, {"layers.4.dense_mlp", "ptpc_fp8"}};
  export_and_validate(c, Granularity::kLayer);
  export_and_validate(holes_config(), Granularity::kLayer);
  CandidateConfig k = config("fp8", "fp8", "fp8");
  k.layers = {{"layers.1.dense_mlp", "int8"}, {"layers.4.dense_mlp", "ptpc_fp8"}};
  export_and_validate(k, Granularity::kLayer);
}

}  // namespace
}  // namespace qloom::perf
