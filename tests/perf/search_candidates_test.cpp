// Candidate enumeration on hand-made plans and sensitivity tables: counts,
// hierarchy and unfit drops, the bytes model, predicted KLD, the order, the
// layer-granularity variants, and the CandidateEntry JSON.
#include <gtest/gtest.h>

#include <set>

#include "qloom/perf/candidates.h"
#include "support/expect_error.h"

namespace qloom::perf {
namespace {

using test::catch_error;

SearchUnit unit(const std::string& part, int layer, std::vector<std::pair<uint64_t, uint64_t>> shapes) {
  SearchUnit u;
  u.partition = part;
  u.layer = layer;
  u.name = layer < 0 ? part : "layers." + std::to_string(layer) + "." + part;
  int i = 0;
  for (const auto& [r, c] : shapes) {
    const std::string prefix = "model.layers." + std::to_string(std::max(layer, 0)) + "." + part + ".";
    u.modules.push_back({prefix + "m" + std::to_string(i++), r, c, DType::kBF16});
    u.params += r * c;
  }
  return u;
}

ModelGeometry geometry() {
  ModelGeometry g;
  g.model_type = "llama";
  g.num_layers = 2;
  g.hidden_size = 256;
  g.num_kv_heads = 2;
  g.head_dim = 64;
  g.fixed_bits_per_token = 1000 * 16;
  return g;
}

// Two partitions at partition granularity: self_attn 2 x [256,256], dense_mlp 3 x [512,256].
PartitionPlan two_partitions() {
  PartitionPlan p;
  p.partitions = {"self_attn", "dense_mlp"};
  p.units = {unit("self_attn", -1, {{256, 256}, {256, 256}}), unit("dense_mlp", -1, {{512, 256}, {512, 256}, {256, 512}})};
  p.geometry = geometry();
  return p;
}

SensitivityEntry entry(const std::string& u, const std::string& p, double kld) {
  SensitivityEntry e;
  e.unit = u;
  e.precision = p;
  e.kld_mean = kld;
  return e;
}

SensitivityTable table_for(const std::vector<SensitivityEntry>& entries) {
  SensitivityTable t;
  t.entries = entries;
  t.complete = true;
  return t;
}

const SensitivityTable& two_table() {
  static const SensitivityTable t = table_for({entry("self_attn", "fp8", 0.01), entry("self_attn", "int4_wo_128", 0.2),
                                               entry("dense_mlp", "fp8", 0.02), entry("dense_mlp", "int4_wo_128", 0.1),
                                               entry("kv_cache", "fp8", 0.005)});
  return t;
}

EnumerationOptions opts(std::vector<std::string> precisions) {
  EnumerationOptions o;
  o.precisions = parse_precision_candidates(precisions);
  return o;
}

TEST(SearchCandidates, CountsAndHierarchyDrops) {
  const Enumeration e = enumerate_candidates(two_partitions(), two_table(), opts({"native", "fp8", "int4_wo_128"}));
  EXPECT_EQ(e.combinations, 3u * 3 * 2);
  EXPECT_EQ(e.dropped_nothing_quantized, 2u);
  // self_attn less precise than dense_mlp: (fp8, native), (int4, native), (int4, fp8), x 2 KV.
  EXPECT_EQ(e.dropped_hierarchy, 6u);
  EXPECT_EQ(e.dropped_unfit, 0u);
  ASSERT_EQ(e.queue.size(), 10u);
  for (size_t i = 0; i < e.queue.size(); ++i) {
    const CandidateEntry& c = e.queue[i];
    EXPECT_EQ(c.rank, int(i) + 1);
    EXPECT_EQ(c.status, "pending");
    EXPECT_FALSE(c.proxied());
    EXPECT_TRUE(c.real_gate.is_null());
    EXPECT_EQ(hierarchy_violation(two_partitions(), c.config), "");
    if (i) {
      EXPECT_GE(e.queue[i - 1].search_metrics.modelled_gain, c.search_metrics.modelled_gain);
    }
  }
  EXPECT_EQ(e.queue.front().config.canonical(), "self_attn=int4_wo_128,dense_mlp=int4_wo_128,kv_cache=fp8");
  // The slowest keeps the (larger) MLP at fp8 and attention native: (fp8, native) breaks the hierarchy.
  EXPECT_EQ(e.queue.back().config.canonical(), "self_attn=native,dense_mlp=fp8,kv_cache=native");
  EXPECT_DOUBLE_EQ(e.queue.front().search_metrics.predicted_kld, 0.2 + 0.1 + 0.005);
  CandidateConfig bad;
  bad.partitions = {{"self_attn", "int4_wo_128"}, {"dense_mlp", "fp8"}};
  EXPECT_EQ(hierarchy_violation(two_partitions(), bad), "self_attn (int4_wo_128) is less precise than dense_mlp (fp8)");
}

TEST(SearchCandidates, BytesModelByHand) {
  const PartitionPlan plan = two_partitions();
  CandidateConfig c;
  c.partitions = {{"self_attn", "fp8"}, {"dense_mlp", "int4_wo_128"}};
  c.kv_cache = "fp8";
  const BytesEstimate b = estimate_bytes(plan, c, {1024, 1024, 1});
  // fp8 per-tensor: 8-bit codes + one bf16 scale; int4 g128: 4 bits + 16/128 + 4/128.
  const double attn_bits = 2 * (256.0 * 256 * 8 + 16);
  const double mlp_bits = 2 * (512.0 * 256 * 4 + 2 * 512 * 16 + 2 * 64 * 32) + (256.0 * 512 * 4 + 4 * 256 * 16 + 4 * 32 * 32);
  EXPECT_DOUBLE_EQ(b.weight_bytes, (16000 + attn_bits + mlp_bits) / 8);
  EXPECT_DOUBLE_EQ(b.kv_bytes, 2.0 * 2 * 2 * 64 * (1024 + 512) * 1);
  // inputs: attention at 8 bits, MLP at 16; outputs at 16 bits.
  const double act_bits = 2 * (256 * 8 + 256 * 16) + 2 * (256 * 16 + 512 * 16) + (512 * 16 + 256 * 16);
  EXPECT_DOUBLE_EQ(b.activation_bytes, act_bits / 8);
  EXPECT_DOUBLE_EQ(b.bytes_per_token, b.weight_bytes + b.kv_bytes + b.activation_bytes);
  EXPECT_DOUBLE_EQ(b.bits_per_weight, (attn_bits + mlp_bits) / double(plan.unit_params()));
  // Concurrency divides the weights only; sliding layers cap the context.
  const BytesEstimate b64 = estimate_bytes(plan, c, {1024, 1024, 64});
  EXPECT_DOUBLE_EQ(b64.weight_bytes * 64, b.weight_bytes);
  EXPECT_DOUBLE_EQ(b64.kv_bytes, b.kv_bytes);
  PartitionPlan sliding = plan;
  sliding.geometry.sliding_window = 100;
  sliding.geometry.layer_sliding = {1, 0};
  EXPECT_DOUBLE_EQ(estimate_bytes(sliding, c, {1024, 1024, 1}).kv_bytes, 2.0 * 2 * 64 * (100 + 1536));
  EXPECT_EQ(catch_error([&] { (void)estimate_bytes(plan, c, {1024, 1024, 0}); }).kind(), ErrorKind::kUsage);
}

TEST(SearchCandidates, GainIsBaselineOverCandidate) {
  const PartitionPlan plan = two_partitions();
  const Enumeration e = enumerate_candidates(plan, two_table(), opts({"native", "fp8"}));
  CandidateConfig native;
  native.partitions = {{"self_attn", "native"}, {"dense_mlp", "native"}};
  EXPECT_DOUBLE_EQ(e.baseline_bytes_per_token, estimate_bytes(plan, native, {}).bytes_per_token);
  for (const CandidateEntry& c : e.queue) {
    const BytesEstimate b = estimate_bytes(plan, c.config, {});
    EXPECT_DOUBLE_EQ(c.search_metrics.modelled_gain, std::round(e.baseline_bytes_per_token / b.bytes_per_token * 1e4) / 1e4);
    EXPECT_NEAR(c.search_metrics.modelled_gain, e.baseline_bytes_per_token / b.bytes_per_token, 5e-5);
    EXPECT_EQ(c.search_metrics.bytes_per_token, uint64_t(std::llround(b.bytes_per_token)));
    EXPECT_GT(c.search_metrics.modelled_gain, 1.0);
  }
}

TEST(SearchCandidates, UnfitPairsAreDropped) {
  SensitivityTable t = two_table();
  t.entries[3].status = "unfit";  // dense_mlp int4_wo_128
  t.entries[3].reason = "model.layers.0.dense_mlp.m2: group size 128 does not divide 100";
  const Enumeration e = enumerate_candidates(two_partitions(), t, opts({"native", "fp8", "int4_wo_128"}));
  EXPECT_EQ(e.dropped_unfit, 6u);  // (native|fp8|int4, int4) x 2 KV
  EXPECT_EQ(e.queue.size(), 4u);
  for (const CandidateEntry& c : e.queue) EXPECT_NE(c.config.precision_of("dense_mlp"), "int4_wo_128");
}

TEST(SearchCandidates, SharedExpertIsNativeOrFollowsRoutedMoe) {
  PartitionPlan p;
  p.partitions = {"self_attn", "routed_moe", "shared_expert"};
  p.units = {unit("self_attn", -1, {{256, 256}}), unit("routed_moe", -1, {{512, 256}, {512, 256}}),
             unit("shared_expert", -1, {{512, 256}})};
  p.geometry = geometry();
  const SensitivityTable t = table_for({entry("self_attn", "fp8", 0.01), entry("self_attn", "int8", 0.02),
                                        entry("routed_moe", "fp8", 0.03), entry("routed_moe", "int8", 0.04),
                                        entry("shared_expert", "fp8", 0.05), entry("shared_expert", "int8", 0.06)});
  EnumerationOptions o = opts({"native", "fp8", "int8"});
  o.kv = {"native"};
  const Enumeration e = enumerate_candidates(p, t, o);
  EXPECT_EQ(e.combinations, 27u);
  std::set<std::string> got;
  for (const CandidateEntry& c : e.queue) {
    const std::string s = c.config.precision_of("shared_expert"), r = c.config.precision_of("routed_moe");
    EXPECT_TRUE(s == "native" || s == r) << c.config.canonical();
    got.insert(c.config.canonical());
  }
  // attn in {fp8,int8} x routed in {fp8,int8} x shared in {native, =routed}: 8;
  // attn native x routed in {fp8,int8} x shared in {native, =routed}: 4 (routed
  // native leaves only all-native, or a quantized shared expert: both dropped).
  EXPECT_EQ(e.queue.size(), 12u);
  EXPECT_TRUE(got.count("self_attn=native,routed_moe=native,shared_expert=native,kv_cache=native") == 0);
  EXPECT_TRUE(got.count("self_attn=fp8,routed_moe=int8,shared_expert=int8,kv_cache=native"));
  EXPECT_FALSE(got.count("self_attn=fp8,routed_moe=int8,shared_expert=fp8,kv_cache=native"));
  EXPECT_TRUE(got.count("self_attn=native,routed_moe=native,shared_expert=fp8,kv_cache=native") == 0);
}

TEST(SearchCandidates, SchemesOfOneWidthTieOnGain) {
  // fp8 and int8 store different scale bytes (bf16 vs f32 + an int8 zero
  // point), the rounded gain ties them, and the predicted KLD orders them.
  SensitivityTable t = two_table();
  t.entries.push_back(entry("self_attn", "int8", 0.005));  // int8 attention: less damage than fp8 here
  t.entries.push_back(entry("dense_mlp", "int8", 0.03));
  EnumerationOptions o = opts({"fp8", "int8"});
  o.kv = {"native"};
  const Enumeration e = enumerate_candidates(two_partitions(), t, o);
  ASSERT_EQ(e.queue.size(), 4u);
  for (const CandidateEntry& c : e.queue) EXPECT_EQ(c.search_metrics.modelled_gain, e.queue[0].search_metrics.modelled_gain);
  EXPECT_EQ(e.queue[0].config.canonical(), "self_attn=int8,dense_mlp=fp8,kv_cache=native");   // 0.025
  EXPECT_EQ(e.queue[1].config.canonical(), "self_attn=fp8,dense_mlp=fp8,kv_cache=native");    // 0.03
  EXPECT_EQ(e.queue[2].config.canonical(), "self_attn=int8,dense_mlp=int8,kv_cache=native");  // 0.035
  EXPECT_NE(e.queue[0].search_metrics.bytes_per_token, e.queue[1].search_metrics.bytes_per_token);
}

TEST(SearchCandidates, TiesOrderByPredictedKldThenCanonical) {
  std::vector<CandidateEntry> q(3);
  for (auto& c : q) c.search_metrics.modelled_gain = 2.0;
  q[0].config.partitions = {{"self_attn", "int8"}};
  q[0].search_metrics.predicted_kld = 0.3;
  q[1].config.partitions = {{"self_attn", "fp8"}};
  q[1].search_metrics.predicted_kld = 0.1;
  q[2].config.partitions = {{"self_attn", "b"}};
  q[2].search_metrics.predicted_kld = 0.3;
  rank_candidates(q);
  EXPECT_EQ(q[0].config.precision_of("self_attn"), "fp8");
  EXPECT_EQ(q[1].config.precision_of("self_attn"), "b");
  EXPECT_EQ(q[2].config.precision_of("self_attn"), "int8");
  EXPECT_EQ(q[2].rank, 3);
}

TEST(SearchCandidates, TooManyCombinationsOrNoSurvivorIsAUsageError) {
  EnumerationOptions o = opts({"native", "fp8", "int4_wo_128"});
  o.max_combinations = 10;
  EXPECT_EQ(catch_error([&] { (void)enumerate_candidates(two_partitions(), two_table(), o); }).kind(),
            ErrorKind::kUsage);
  SensitivityTable t = two_table();
  for (auto& e : t.entries) e.status = "unfit";
  EXPECT_EQ(catch_error([&] { (void)enumerate_candidates(two_partitions(), t, opts({"fp8", "int4_wo_128"})); }).kind(),
            ErrorKind::kUsage);
}

// Layer granularity: layer 0's MLP carries most of the int4 damage.
TEST(SearchCandidates, LayerGranularityProtectsTheSensitiveLayers) {
  PartitionPlan p;
  p.granularity = Granularity::kLayer;
  p.partitions = {"self_attn", "dense_mlp"};
  for (int l = 0; l < 4; ++l) {
    p.units.push_back(unit("self_attn", l, {{256, 256}}));
    p.units.push_back(unit("dense_mlp", l, {{512, 256}}));
  }
  p.geometry = geometry();
  std::vector<SensitivityEntry> es;
  for (int l = 0; l < 4; ++l) {
    const std::string a = "layers." + std::to_string(l) + ".self_attn", m = "layers." + std::to_string(l) + ".dense_mlp";
    es.push_back(entry(a, "fp8", 0.001));
    es.push_back(entry(a, "int4_wo_128", 0.01));
    es.push_back(entry(m, "fp8", 0.002));
    es.push_back(entry(m, "int4_wo_128", l == 0 ? 0.5 : 0.02));
  }
  EnumerationOptions o = opts({"native", "fp8", "int4_wo_128"});
  o.kv = {"native"};
  const Enumeration e = enumerate_candidates(p, table_for(es), o);
  EXPECT_LE(e.queue.size(), 2 * (e.combinations - e.dropped_hierarchy - e.dropped_nothing_quantized));
  EXPECT_EQ(e.layer_variants, 3u);  // (native|fp8|int4 attention) x int4 MLP
  EXPECT_EQ(e.queue.size(), 5u + 3);
  std::map<std::string, const CandidateEntry*> by;
  for (const CandidateEntry& c : e.queue) by[c.config.canonical()] = &c;
  // fp8 attention + int4 MLP: layer 0's MLP goes to fp8 (next more precise).
  const auto* v = by["self_attn=fp8,dense_mlp=int4_wo_128,kv_cache=native,layers.0.dense_mlp=fp8"];
  ASSERT_NE(v, nullptr);
  EXPECT_DOUBLE_EQ(v->search_metrics.predicted_kld, 4 * 0.001 + 0.002 + 3 * 0.02);
  // int4 everywhere: layer 0's MLP -> fp8 forces layer 0's attention to fp8
  // (hierarchy); the attention's damage is spread evenly, so it protects nothing itself.
  const auto* w = by["self_attn=int4_wo_128,dense_mlp=int4_wo_128,kv_cache=native,layers.0.self_attn=fp8,layers.0.dense_mlp=fp8"];
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(hierarchy_violation(p, w->config), "");
  EXPECT_GT(by["self_attn=int4_wo_128,dense_mlp=int4_wo_128,kv_cache=native"]->search_metrics.modelled_gain,
            w->search_metrics.modelled_gain);
  // Under an fp8 KV cache attention keeps one precision: where the MLP's
  // protection would need layer 0's attention raised, it is dropped.
  std::vector<SensitivityEntry> with_kv = es;
  with_kv.push_back(entry("kv_cache", "fp8", 0.003));
  o.kv = {"native", "fp8"};
  const Enumeration k = enumerate_candidates(p, table_for(with_kv), o);
  std::set<std::string> got;
  for (const CandidateEntry& c : k.queue) {
    got.insert(c.config.canonical());
    if (c.config.kv_cache != "fp8") continue;
    for (const auto& [unit, prec] : c.config.layers) {
      EXPECT_EQ(unit.find("self_attn"), std::string::npos) << unit;
    }
  }
  EXPECT_TRUE(got.count("self_attn=fp8,dense_mlp=int4_wo_128,kv_cache=fp8,layers.0.dense_mlp=fp8"));
  EXPECT_FALSE(got.count("self_attn=int4_wo_128,dense_mlp=int4_wo_128,kv_cache=fp8,layers.0.self_attn=fp8,layers.0.dense_mlp=fp8"));
  EXPECT_EQ(k.layer_variants, 3u + 2);  // the int4-attention variant exists only with the native cache
  CandidateConfig broken = w->config;
  broken.layers = {{"layers.2.dense_mlp", "fp8"}};
  EXPECT_EQ(hierarchy_violation(p, broken),
            "self_attn (int4_wo_128) is less precise than dense_mlp (fp8) in layer 2");
}

TEST(SearchCandidates, EntryJsonRoundTrip) {
  const Enumeration e = enumerate_candidates(two_partitions(), two_table(), opts({"native", "fp8", "int4_wo_128"}));
  std::vector<CandidateEntry> q = e.queue;
  q[1].relative_change = 0.011;
  q[1].search_metrics.proxy_kld = 0.0123;
  q[1].search_metrics.proxy_seconds = 1.5;
  q[1].status = "rejected";
  q[1].real_gate = nlohmann::ordered_json::parse(R"({"passed": false, "gap": 0.05, "baseline": 1})");
  q[2].config.layers = {{"layers.3.dense_mlp", "fp8"}};
  const nlohmann::ordered_json j = to_json(q);
  EXPECT_EQ(j[0]["config"].dump(), R"({"self_attn":"int4_wo_128","dense_mlp":"int4_wo_128","kv_cache":"fp8"})");
  EXPECT_TRUE(j[0]["search_metrics"]["proxy_kld"].is_null());
  EXPECT_TRUE(j[0]["relative_change"].is_null());
  EXPECT_EQ(j[1]["real_gate"].dump(), R"({"passed":false,"gap":0.05,"baseline":1})");
  EXPECT_TRUE(j[0]["search_metrics"]["bytes_per_token"].is_number_unsigned());
  const auto back = candidate_queue_from_json(nlohmann::ordered_json::parse(j.dump()));
  EXPECT_EQ(back, q);
  EXPECT_EQ(to_json(back).dump(), j.dump());
  nlohmann::json bad = nlohmann::json::parse(j.dump());
  bad[2]["status"] = "done";
  Error err = catch_error([&] { (void)candidate_queue_from_json(bad); });
  EXPECT_EQ(err.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(err.item(), "mix_precision_search.candidate_queue[2].status");
  bad = nlohmann::json::parse(j.dump());
  bad[0]["config"]["attention"] = "fp8";
  err = catch_error([&] { (void)candidate_queue_from_json(bad); });
  EXPECT_EQ(err.item(), "mix_precision_search.candidate_queue[0].config.attention");
}

}  // namespace
}  // namespace qloom::perf
