// Tests for validate_checkpoint() and its steps on the demo model: a correct
// fake Quark checkpoint passes; each planted defect fails exactly the step
// meant to catch it; steps that cannot run say skipped and why.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "qloom/core/error.h"
#include "qloom/io/model_dir.h"
#include "qloom/validate/checks.h"
#include "qloom/validate/validator.h"
#include "support/expect_error.h"
#include "validate/validate_fixture.h"

namespace {

namespace fs = std::filesystem;
using namespace qloom::validate;
using qloom::ErrorKind;
using qloom::io::TensorSpec;
using qloom::test::catch_error;
using qloom::test::status_of;
using qloom::test::statuses;
using qloom::test::ValidateFixture;
using oj = nlohmann::ordered_json;

bool has_line(const StepResult& s, const std::string& needle) {
  return std::any_of(s.details.begin(), s.details.end(),
                     [&](const std::string& d) { return d.find(needle) != std::string::npos; });
}

std::vector<std::string> strings(const oj& a) {
  std::vector<std::string> v;
  for (const auto& e : a) v.push_back(e.get<std::string>());
  return v;
}

const oj* pattern_row(const StepResult& s, const std::string& pattern) {
  for (const auto& row : s.data["patterns"])
    if (row["pattern"] == pattern) return &row;
  return nullptr;
}

// Edits that drop every tensor whose name starts with `prefix`.
FakeQuarkOptions dropping(const std::string& prefix) {
  FakeQuarkOptions o;
  o.edit = [prefix](TensorSpec& spec, std::vector<std::byte>&) {
    return !spec.name.starts_with(prefix);
  };
  return o;
}

FakeQuarkOptions flipping(const std::string& name, size_t at = 3) {
  FakeQuarkOptions o;
  o.edit = [name, at](TensorSpec& spec, std::vector<std::byte>& b) {
    if (spec.name == name) b[at] ^= std::byte{0x80};
    return true;
  };
  return o;
}

// ---- the correct checkpoint ------------------------------------------------

TEST(Validate, CorrectCheckpointPassesEveryStep) {
  ValidateFixture f;
  const auto q = f.make("q");
  const ValidationReport r = f.run(q);
  EXPECT_EQ(statuses(r), "ok ok ok ok skipped");
  EXPECT_TRUE(r.passed());
  ASSERT_EQ(r.steps.size(), 6u);
  EXPECT_EQ(r.steps[0].number, 4);
  EXPECT_EQ(r.steps[1].number, 1);
  EXPECT_EQ(r.steps[2].number, 3);
  EXPECT_EQ(r.steps[3].number, 2);
  EXPECT_EQ(r.steps[4].number, 5);
  EXPECT_EQ(r.steps[5].number, 6);
  EXPECT_EQ(status_of(r, 6), "ok") << r.steps[5].summary;  // the fake fp8 export loads in vLLM
  EXPECT_EQ(r.source, ValidateFixture::demo().string());
  EXPECT_EQ(r.quantized, q.string());

  const StepResult& fuzzy = *r.step(4);
  EXPECT_EQ(fuzzy.title, "fuzzy tensor names");
  // 11 source patterns; 7 linears x (weight_scale, input_scale) added.
  EXPECT_EQ(fuzzy.data["source_pattern_count"], 11);
  EXPECT_EQ(fuzzy.data["pattern_count"], 11 + 14);
  EXPECT_TRUE(fuzzy.data["mixed_dtype_patterns"].empty());
  const oj* q_proj = pattern_row(fuzzy, "model.layers.*.self_attn.q_proj.weight");
  ASSERT_NE(q_proj, nullptr);
  EXPECT_EQ((*q_proj)["count"], 5);
  EXPECT_EQ((*q_proj)["dtype_counts"], (oj{{"F8_E4M3", 5}}));
  EXPECT_EQ((*q_proj)["source_dtype_counts"], (oj{{"BF16", 5}}));
  EXPECT_EQ((*q_proj)["check"], "ok");
  const oj* scale = pattern_row(fuzzy, "model.layers.*.self_attn.q_proj.weight_scale");
  ASSERT_NE(scale, nullptr);
  EXPECT_EQ((*scale)["check"], "quantization");
  EXPECT_EQ((*scale)["dtype_counts"], (oj{{"BF16", 5}}));
  EXPECT_TRUE(has_line(fuzzy, "| `model.layers.*.self_attn.q_proj.weight` | 5 | F8_E4M3: 5 | BF16: 5 | ok |"));
  EXPECT_TRUE(has_line(fuzzy, "quantization (5 of 5)"));
  EXPECT_TRUE(has_line(fuzzy, "patterns: 25, mixed-dtype patterns: 0"));

  const StepResult& aux = *r.step(1);
  EXPECT_EQ(aux.data["source_file_count"], 5);  // config.json is step 3's
  EXPECT_EQ(aux.summary, "all 5 files present and byte-identical (size and MD5)");

  const StepResult& cfg = *r.step(3);
  EXPECT_EQ(cfg.data["mismatch_count"], 0);
  EXPECT_EQ(cfg.data["quant_method"], "quark");
  EXPECT_NE(cfg.data["scheme_summary"].get<std::string>().find(
                "weight fp8_e4m3 per_tensor static; input_tensors fp8_e4m3 per_tensor static"),
            std::string::npos);

  const StepResult& md5 = *r.step(2);
  EXPECT_EQ(md5.title, "MD5 spot-check");
  // embed_tokens + 2 norms x 5 layers + final norm; the 35 linears are quantized.
  EXPECT_EQ(md5.data["checked_count"], 12);
  EXPECT_EQ(md5.data["quantized_weight_count"], 35);
  EXPECT_EQ(md5.data["sampled"], false);
  EXPECT_EQ(md5.data["bytes_hashed_per_checkpoint"], 512 * 64 * 2 + 11 * 64 * 2);
  EXPECT_TRUE(has_line(md5, "candidates: 12, checked: 12, sampled: false"));

  EXPECT_EQ(r.step(5)->status, StepResult::kSkipped);
  EXPECT_EQ(r.step(5)->data["reason"], "no_numeric_checker");
}

TEST(Validate, ShardedCheckpointPasses) {
  ValidateFixture f;
  FakeQuarkOptions o;
  o.max_shard_bytes = 32 * 1024;
  const auto q = f.make("q", o);
  ASSERT_TRUE(fs::exists(q / "model.safetensors.index.json"));
  EXPECT_EQ(statuses(f.run(q)), "ok ok ok ok skipped");
}

TEST(Validate, PerLayerExclusionIsMixedPrecisionNotAFailure) {
  ValidateFixture f;
  FakeQuarkOptions o;
  o.exclude = {"model.layers.0.*"};
  const auto r = f.run(f.make("q", o));
  EXPECT_EQ(statuses(r), "ok ok ok ok skipped");
  const StepResult& fuzzy = *r.step(4);
  EXPECT_EQ(fuzzy.data["mixed_dtype_patterns"].size(), 7u);
  const oj* q_proj = pattern_row(fuzzy, "model.layers.*.self_attn.q_proj.weight");
  EXPECT_EQ((*q_proj)["dtype_counts"], (oj{{"F8_E4M3", 4}, {"BF16", 1}}));
  EXPECT_TRUE(has_line(fuzzy, "Notable: model.layers.*.self_attn.q_proj.weight → F8_E4M3: 4, BF16: 1"));
  EXPECT_TRUE(has_line(fuzzy, "quantization (4 of 5)"));
  // Layer 0's seven linears are now unquantized and compared.
  EXPECT_EQ(r.step(2)->data["checked_count"], 12 + 7);
}

TEST(Validate, UnquantizedCopyOfTheSourceFailsOnlyTheConfigStep) {
  ValidateFixture f;
  const auto r = f.run(f.copy_demo("copy"));
  EXPECT_EQ(statuses(r), "ok ok FAIL ok skipped");
  EXPECT_EQ(r.step(3)->summary, "no quantization_config");
  EXPECT_EQ(r.step(2)->data["checked_count"], 47);
}

// ---- step 4 -------------------------------------------------------------------

TEST(FuzzyStep, MissingLayerTensorIsACountMismatch) {
  ValidateFixture f;
  const auto r = f.run(f.make("q", dropping("model.layers.2.self_attn.k_proj.")));
  EXPECT_EQ(statuses(r), "FAIL ok ok ok skipped");
  const StepResult& s = *r.step(4);
  ASSERT_EQ(s.data["count_mismatches"].size(), 1u);
  EXPECT_EQ(s.data["count_mismatches"][0]["pattern"], "model.layers.*.self_attn.k_proj.weight");
  EXPECT_EQ(s.data["count_mismatches"][0]["source_count"], 5);
  EXPECT_EQ(s.data["count_mismatches"][0]["quantized_count"], 4);
  EXPECT_EQ(strings(s.data["missing_tensors"]),
            std::vector<std::string>{"model.layers.2.self_attn.k_proj.weight"});
  EXPECT_EQ(s.summary, "1 count mismatch, 1 missing tensor");
  EXPECT_TRUE(has_line(s, "| `model.layers.*.self_attn.k_proj.weight` | 4 | F8_E4M3: 4 | BF16: 5 | count 4 ≠ 5 in the source |"));
  // Step 2 leaves the missing tensor to step 4.
  EXPECT_EQ(strings(r.step(2)->data["missing"]),
            std::vector<std::string>{"model.layers.2.self_attn.k_proj.weight"});
}

TEST(FuzzyStep, MissingPattern) {
  ValidateFixture f;
  FakeQuarkOptions o;
  o.edit = [](TensorSpec& spec, std::vector<std::byte>&) {
    return spec.name.find("post_attention_layernorm") == std::string::npos;
  };
  const auto r = f.run(f.make("q", o));
  EXPECT_EQ(statuses(r), "FAIL ok ok ok skipped");
  EXPECT_EQ(strings(r.step(4)->data["missing_patterns"]),
            std::vector<std::string>{"model.layers.*.post_attention_layernorm.weight"});
  EXPECT_EQ(r.step(4)->data["missing_tensors_count"], 5);
  EXPECT_EQ(r.step(2)->data["missing_count"], 5);
}

TEST(FuzzyStep, UnexpectedPatterns) {
  ValidateFixture f;
  FakeQuarkOptions o;
  o.extra_tensors.push_back({{"model.layers.0.self_attn.rotary_emb.inv_freq", qloom::DType::kF32, {4}},
                             std::vector<std::byte>(16)});
  // A quantization suffix whose module has no weight in the source.
  o.extra_tensors.push_back({{"model.layers.0.self_attn.rotary_emb.weight_scale", qloom::DType::kBF16, {}},
                             std::vector<std::byte>(2)});
  const auto r = f.run(f.make("q", o));
  EXPECT_EQ(statuses(r), "FAIL ok ok ok skipped");
  EXPECT_EQ(strings(r.step(4)->data["unexpected_patterns"]),
            (std::vector<std::string>{"model.layers.*.self_attn.rotary_emb.inv_freq",
                                      "model.layers.*.self_attn.rotary_emb.weight_scale"}));
  EXPECT_EQ(r.step(4)->summary, "2 unexpected patterns, 2 unexpected tensors");
}

TEST(FuzzyStep, QuantizationPatternWithMoreTensorsThanTheSource) {
  ValidateFixture f;
  FakeQuarkOptions o;
  o.extra_tensors.push_back({{"model.layers.9.self_attn.q_proj.weight_scale", qloom::DType::kBF16, {}},
                             std::vector<std::byte>(2)});
  const auto r = f.run(f.make("q", o));
  EXPECT_EQ(status_of(r, 4), "FAIL");
  const auto& m = r.step(4)->data["count_mismatches"];
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0]["pattern"], "model.layers.*.self_attn.q_proj.weight_scale");
  EXPECT_EQ(m[0]["quantized_count"], 6);
  EXPECT_EQ(m[0]["base_pattern"], "model.layers.*.self_attn.q_proj.weight");
  EXPECT_EQ(strings(r.step(4)->data["unexpected_tensors"]),
            std::vector<std::string>{"model.layers.9.self_attn.q_proj.weight_scale"});
}

TEST(FuzzyStep, RenamedIndexKeepsCountsButIsCaughtByName) {
  ValidateFixture f;
  FakeQuarkOptions o;
  o.edit = [](TensorSpec& spec, std::vector<std::byte>&) {
    if (spec.name == "model.layers.4.input_layernorm.weight")
      spec.name = "model.layers.7.input_layernorm.weight";
    return true;
  };
  const auto r = f.run(f.make("q", o));
  EXPECT_EQ(status_of(r, 4), "FAIL");
  EXPECT_TRUE(r.step(4)->data["count_mismatches"].empty());
  EXPECT_EQ(strings(r.step(4)->data["missing_tensors"]),
            std::vector<std::string>{"model.layers.4.input_layernorm.weight"});
  EXPECT_EQ(strings(r.step(4)->data["unexpected_tensors"]),
            std::vector<std::string>{"model.layers.7.input_layernorm.weight"});
}

TEST(FuzzyStep, QuantizedWeightsUnreadable) {
  ValidateFixture f;
  const auto q = f.make("q");
  fs::remove(q / "model.safetensors");
  const auto r = f.run(q);
  EXPECT_EQ(statuses(r), "FAIL ok ok skipped skipped");
  EXPECT_NE(r.step(4)->summary.find("no readable safetensors weights"), std::string::npos);
  EXPECT_EQ(r.step(2)->data["reason"], "quantized_weights_unreadable");
}

TEST(FuzzyStep, SourceWithoutWeightsIsSkippedButListed) {
  ValidateFixture f;
  const auto src = f.copy_demo("src");
  fs::remove(src / "model.safetensors");
  const auto q = f.make("q");
  const auto r = validate_checkpoint(src, q);
  EXPECT_EQ(statuses(r), "skipped ok ok skipped skipped");
  EXPECT_NE(r.step(4)->summary.find("the source has no readable safetensors weights"),
            std::string::npos);
  EXPECT_EQ(r.step(4)->data["pattern_count"], 25);
  EXPECT_TRUE(has_line(*r.step(4), "| `model.norm.weight` | 1 | BF16: 1 | — | listed |"));
  EXPECT_EQ(r.step(2)->data["reason"], "source_weights_unreadable");
}

// ---- step 1 -------------------------------------------------------------------

TEST(AuxiliaryStep, MissingTokenizerFile) {
  ValidateFixture f;
  const auto q = f.make("q");
  fs::remove(q / "tokenizer.model");
  const auto r = f.run(q);
  EXPECT_EQ(statuses(r), "ok FAIL ok ok skipped");
  EXPECT_EQ(strings(r.step(1)->data["missing"]), std::vector<std::string>{"tokenizer.model"});
  EXPECT_EQ(r.step(1)->summary, "1 missing, 0 differing, 4 of 5 identical");
  EXPECT_TRUE(has_line(*r.step(1), "missing: 1, mismatched: 0, extra: 0"));
  EXPECT_TRUE(has_line(*r.step(1), "missing: tokenizer.model"));
}

TEST(AuxiliaryStep, ChangedByteAndChangedSize) {
  ValidateFixture f;
  const auto q = f.make("q");
  {
    std::string g = qloom::test::read_file(q / "generation_config.json");
    g[g.find('1')] = '7';  // same size, other bytes
    std::ofstream(q / "generation_config.json", std::ios::binary | std::ios::trunc) << g;
    std::string m = qloom::test::read_file(q / "special_tokens_map.json");
    m.replace(m.find("</s>"), 4, "</eos>");  // two bytes longer
    std::ofstream(q / "special_tokens_map.json", std::ios::binary | std::ios::trunc) << m;
  }
  const auto r = f.run(q);
  EXPECT_EQ(statuses(r), "ok FAIL ok ok skipped");
  const auto& m = r.step(1)->data["mismatched"];
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0]["file"], "generation_config.json");
  EXPECT_EQ(m[0]["reason"], "md5_mismatch");
  EXPECT_EQ(m[1]["file"], "special_tokens_map.json");
  EXPECT_EQ(m[1]["reason"], "size_mismatch");
  EXPECT_EQ(m[1]["source_size"], 71);
  EXPECT_EQ(m[1]["quantized_size"], 73);
  EXPECT_TRUE(has_line(*r.step(1),
                       "special_tokens_map.json (size 71 / 73; eos_token: \"</s>\" / \"</eos>\")"));
}

TEST(AuxiliaryStep, ExtraFilesAreListedNotFailed) {
  ValidateFixture f;
  const auto q = f.make("q");
  f.tmp().write("q/README.md", "quantized with qloom\n");
  const auto r = f.run(q);
  EXPECT_EQ(status_of(r, 1), "ok");
  EXPECT_EQ(strings(r.step(1)->data["extra"]), std::vector<std::string>{"README.md"});
  EXPECT_TRUE(has_line(*r.step(1), "extra (not a failure): README.md"));
}

TEST(AuxiliaryStep, EveryTopLevelNonWeightFileCounts) {
  ValidateFixture f;
  const auto src = f.copy_demo("src");
  f.tmp().write("src/README.md", "# model card\n");
  f.tmp().write("src/LICENSE", "license text\n");
  f.tmp().write("src/chat_template.jinja", "{{ messages }}\n");
  const auto q = f.tmp() / "q";
  write_fake_quark_checkpoint(src, q);
  EXPECT_EQ(statuses(validate_checkpoint(src, q)), "ok ok ok ok skipped");
  fs::remove(q / "LICENSE");
  fs::remove(q / "chat_template.jinja");
  const auto r = validate_checkpoint(src, q);
  EXPECT_EQ(statuses(r), "ok FAIL ok ok skipped");
  EXPECT_EQ(strings(r.step(1)->data["missing"]),
            (std::vector<std::string>{"LICENSE", "chat_template.jinja"}));
}

// ---- step 3 -------------------------------------------------------------------

TEST(ConfigStep, ChangedAddedAndRemovedKeys) {
  ValidateFixture f;
  const auto q = f.make("q");
  oj c = f.read_json(q / "config.json");
  c["rms_norm_eps"] = 1e-06;
  c["architectures"][0] = "MistralForCausalLM";
  c.erase("num_hidden_layers");  // 5 here, transformers' default is 32
  c["new_key"] = {{"a", 1}};
  f.write_json(q / "config.json", c);
  const auto r = f.run(q);
  EXPECT_EQ(statuses(r), "ok ok FAIL ok skipped");
  const StepResult& s = *r.step(3);
  EXPECT_EQ(s.data["mismatch_count"], 4);
  EXPECT_EQ(s.summary, "4 keys differ from the source");
  EXPECT_TRUE(has_line(s, "architectures[0]: \"LlamaForCausalLM\" / \"MistralForCausalLM\""));
  EXPECT_TRUE(has_line(s, "new_key: (absent) / {\"a\":1}"));
  EXPECT_TRUE(has_line(s, "rms_norm_eps: 1e-05 / 1e-06"));
  EXPECT_TRUE(has_line(s, "num_hidden_layers: 5 / (absent)"));
  EXPECT_EQ(s.data["mismatches"][1]["key"], "new_key");
  EXPECT_EQ(s.data["mismatches"][1]["only_in"], "quantized");
}

TEST(ConfigStep, SemanticEqualityIgnoresKeyOrderFormattingAndNumberSpelling) {
  ValidateFixture f;
  const auto q = f.make("q");
  oj c = f.read_json(q / "config.json");
  oj reordered = oj::object();
  std::vector<std::string> keys;
  for (auto it = c.begin(); it != c.end(); ++it) keys.push_back(it.key());
  std::reverse(keys.begin(), keys.end());
  for (const auto& k : keys) reordered[k] = c[k];
  reordered["rope_theta"] = 10000;  // an integer where the source has 10000.0
  std::ofstream(q / "config.json", std::ios::binary | std::ios::trunc) << reordered.dump();
  EXPECT_EQ(statuses(f.run(q)), "ok ok ok ok skipped");
}

TEST(ConfigStep, NestedQuantizationConfigIsIgnoredTooButTypesCount) {
  ValidateFixture f;
  const auto q = f.make("q");
  oj c = f.read_json(q / "config.json");
  c["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  f.write_json(q / "config.json", c);
  auto r = f.run(q);
  EXPECT_EQ(status_of(r, 3), "FAIL");
  EXPECT_TRUE(has_line(*r.step(3), "rope_scaling: null / {\"factor\":2.0,\"type\":\"linear\"}"));

  c["rope_scaling"] = nullptr;
  c["tie_word_embeddings"] = 1;  // true in the source: a bool is not a number
  f.write_json(q / "config.json", c);
  r = f.run(q);
  EXPECT_TRUE(has_line(*r.step(3), "tie_word_embeddings: true / 1"));
}

TEST(ConfigStep, QuantizationConfigMustBeQuark) {
  ValidateFixture f;
  const auto q = f.make("q");
  oj c = f.read_json(q / "config.json");
  c["quantization_config"]["quant_method"] = "awq";
  f.write_json(q / "config.json", c);
  auto r = f.run(q);
  EXPECT_EQ(statuses(r), "ok ok FAIL ok skipped");
  EXPECT_EQ(r.step(3)->summary,
            "quantization_config.quant_method is \"awq\", expected \"quark\"");

  c["quantization_config"] = "quark";
  f.write_json(q / "config.json", c);
  r = f.run(q);
  EXPECT_EQ(r.step(3)->summary, "quantization_config is not a JSON object");

  c.erase("quantization_config");
  c["rms_norm_eps"] = 0.5;
  f.write_json(q / "config.json", c);
  r = f.run(q);
  EXPECT_EQ(r.step(3)->summary, "1 key differs from the source; no quantization_config");
}

TEST(ConfigStep, MissingOrMalformedQuantizedConfig) {
  ValidateFixture f;
  const auto q = f.make("q");
  fs::remove(q / "config.json");
  ValidateOptions o;
  o.numeric_step = [](const qloom::io::ModelDir&, const qloom::io::ModelDir&) {
    return StepResult{};
  };
  auto r = f.run(q, o);
  // Weights are still read directly, so steps 4 and 2 run.
  EXPECT_EQ(statuses(r), "ok ok FAIL ok skipped");
  EXPECT_NE(r.step(3)->summary.find("config.json"), std::string::npos);
  EXPECT_EQ(r.step(5)->data["reason"], "quantized_unreadable");
  // No model dir: extra files cannot be listed.
  EXPECT_TRUE(r.step(1)->data["extra"].is_null());

  f.tmp().write("q/config.json", "{\"model_type\": ");
  r = f.run(q);
  EXPECT_EQ(statuses(r), "ok ok FAIL ok skipped");
  EXPECT_NE(r.step(3)->summary.find("missing or unreadable"), std::string::npos);
}

// ---- step 2 -------------------------------------------------------------------

TEST(Md5Step, FlippedByteOfAnUnquantizedTensor) {
  ValidateFixture f;
  const auto r = f.run(f.make("q", flipping("model.layers.3.post_attention_layernorm.weight")));
  EXPECT_EQ(statuses(r), "ok ok ok FAIL skipped");
  const StepResult& s = *r.step(2);
  ASSERT_EQ(s.data["mismatches"].size(), 1u);
  EXPECT_EQ(s.data["mismatches"][0]["name"], "model.layers.3.post_attention_layernorm.weight");
  EXPECT_EQ(s.data["mismatches"][0]["reason"], "md5_mismatch");
  EXPECT_EQ(s.data["identical_count"], 11);
  EXPECT_EQ(s.summary, "1 of 12 unquantized tensors differ from the source");
  EXPECT_TRUE(has_line(s, "model.layers.3.post_attention_layernorm.weight: MD5 "));
  EXPECT_TRUE(has_line(s, "mismatches: 1"));
}

TEST(Md5Step, FlippedEmbeddingByte) {
  ValidateFixture f;
  const auto r = f.run(f.make("q", flipping("model.embed_tokens.weight", 65535)));
  EXPECT_EQ(statuses(r), "ok ok ok FAIL skipped");
  EXPECT_EQ(r.step(2)->data["mismatches"][0]["name"], "model.embed_tokens.weight");
}

TEST(Md5Step, DtypeOrShapeChange) {
  ValidateFixture f;
  FakeQuarkOptions o;
  o.edit = [](TensorSpec& spec, std::vector<std::byte>& b) {
    if (spec.name == "model.norm.weight") spec.dtype = qloom::DType::kF16;  // same size
    if (spec.name == "model.layers.0.input_layernorm.weight") {
      spec.shape = {32};
      b.resize(64);
    }
    return true;
  };
  const auto r = f.run(f.make("q", o));
  EXPECT_EQ(statuses(r), "ok ok ok FAIL skipped");
  const StepResult& s = *r.step(2);
  EXPECT_TRUE(has_line(s, "model.norm.weight: dtype BF16 / F16"));
  EXPECT_TRUE(has_line(s, "model.layers.0.input_layernorm.weight: shape [64] / [32]"));
  EXPECT_EQ(s.data["mismatches"][0]["reason"], "header_mismatch");
}

TEST(Md5Step, ExcludedModuleThatWasQuantizedAnyway) {
  ValidateFixture f;
  FakeQuarkOptions o;
  o.exclude = {};
  const auto q = f.make("q", o);
  oj c = f.read_json(q / "config.json");
  c["quantization_config"]["exclude"] = {"lm_head", "model.layers.0.self_attn.q_proj"};
  f.write_json(q / "config.json", c);
  const auto r = f.run(q);
  EXPECT_EQ(statuses(r), "ok ok ok FAIL skipped");
  EXPECT_EQ(r.step(2)->data["mismatches"][0]["reason"], "excluded_but_quantized");
  EXPECT_TRUE(has_line(*r.step(2),
                       "model.layers.0.self_attn.q_proj.weight: listed in "
                       "quantization_config.exclude but quantized"));
}

TEST(Md5Step, ExemptTensorsMayChangeBytes) {
  ValidateFixture f;
  const auto q = f.make("q", flipping("model.layers.1.input_layernorm.weight"));
  ValidateOptions o;
  o.md5_exempt = {"*.input_layernorm.*"};
  const auto r = f.run(q, o);
  EXPECT_EQ(status_of(r, 2), "ok");
  EXPECT_EQ(strings(r.step(2)->data["exempt_changed"]),
            std::vector<std::string>{"model.layers.1.input_layernorm.weight"});
}

TEST(Md5Step, ScalesFoldedByAnAlgorithmAreExempt) {
  ValidateFixture f;
  const auto q = f.make("q", flipping("model.layers.1.input_layernorm.weight"));
  oj c = f.read_json(q / "config.json");
  c["quantization_config"]["algo_config"] = oj::array(
      {{{"name", "awq"},
        {"model_decoder_layers", "model.layers"},
        {"scaling_layers",
         {{{"prev_op", "input_layernorm"},
           {"layers", {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}},
           {"inp", "self_attn.q_proj"}}}}}});
  f.write_json(q / "config.json", c);
  auto r = f.run(q);
  EXPECT_EQ(statuses(r), "ok ok ok ok skipped");
  EXPECT_EQ(strings(r.step(2)->data["exempt_patterns"]),
            std::vector<std::string>{"model.layers.*.input_layernorm.*"});
  EXPECT_NE(r.step(3)->data["scheme_summary"].get<std::string>().find("algorithms: awq"),
            std::string::npos);

  ValidateOptions strict;
  strict.exempt_folded_scales = false;
  r = f.run(q, strict);
  EXPECT_EQ(status_of(r, 2), "FAIL");
}

TEST(Md5Step, ThreadCountDoesNotChangeTheReport) {
  ValidateFixture f;
  const auto q = f.make("q", flipping("model.norm.weight"));
  ValidateOptions one, many;
  one.threads = 1;
  many.threads = 16;
  EXPECT_EQ(report_to_json(f.run(q, one)).dump(), report_to_json(f.run(q, many)).dump());
}

// ---- step 5 and the framework ------------------------------------------------

TEST(NumericStep, HookResultIsReportedAsStep5) {
  ValidateFixture f;
  const auto q = f.make("q");
  ValidateOptions o;
  fs::path seen_src, seen_q;
  o.numeric_step = [&](const qloom::io::ModelDir& s, const qloom::io::ModelDir& qd) {
    seen_src = s.path();
    seen_q = qd.path();
    StepResult r;
    r.status = StepResult::kOk;
    r.summary = "35 tensors within band";
    return r;
  };
  auto r = f.run(q, o);
  EXPECT_EQ(seen_src, ValidateFixture::demo());
  EXPECT_EQ(seen_q, q);
  EXPECT_EQ(status_of(r, 5), "ok");
  EXPECT_EQ(r.step(5)->title, "numeric checks");
  EXPECT_EQ(r.step(5)->summary, "35 tensors within band");

  o.numeric_step = [](const qloom::io::ModelDir&, const qloom::io::ModelDir&) -> StepResult {
    qloom::throw_invalid("x.safetensors", "w", "cannot dequantize");
  };
  r = f.run(q, o);
  EXPECT_EQ(status_of(r, 5), "FAIL");
  EXPECT_FALSE(r.passed());
  EXPECT_NE(r.step(5)->summary.find("cannot dequantize"), std::string::npos);
}

TEST(Validate, EmptyQuantizedDirectory) {
  ValidateFixture f;
  const auto q = f.tmp().mkdir("empty");
  const auto r = f.run(q);
  EXPECT_EQ(statuses(r), "FAIL FAIL FAIL skipped skipped");
  EXPECT_EQ(r.step(1)->data["missing_count"], 5);
}

TEST(Validate, NoSourceGiven) {
  ValidateFixture f;
  const auto r = validate_checkpoint("", f.make("q"));
  EXPECT_EQ(statuses(r), "ok skipped skipped skipped skipped");
  EXPECT_EQ(r.step(4)->data["pattern_count"], 25);
  EXPECT_NE(r.step(4)->summary.find("no source given"), std::string::npos);
  EXPECT_EQ(r.step(1)->summary, "no source model given");
}

TEST(Validate, BadPathsAreErrorsNotFindings) {
  ValidateFixture f;
  const auto q = f.make("q");
  EXPECT_EQ(catch_error([&] { validate_checkpoint(f.tmp() / "nope", q); }).kind(),
            ErrorKind::kNotFound);
  EXPECT_EQ(catch_error([&] { validate_checkpoint(ValidateFixture::demo(), f.tmp() / "nope"); })
                .kind(),
            ErrorKind::kNotFound);
  EXPECT_EQ(catch_error([&] {
              validate_checkpoint(ValidateFixture::demo(), q / "config.json");
            }).kind(),
            ErrorKind::kInvalidInput);
}

TEST(Validate, NeverWritesIntoEitherDirectory) {
  ValidateFixture f;
  const auto src = f.copy_demo("src");
  const auto q = f.tmp() / "q";
  write_fake_quark_checkpoint(src, q);
  auto listing = [](const fs::path& d) {
    std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> m;
    for (const auto& e : fs::recursive_directory_iterator(d))
      m[e.path().string()] = {e.is_regular_file() ? e.file_size() : 0, e.last_write_time()};
    return m;
  };
  const auto before_src = listing(src), before_q = listing(q);
  ValidateOptions o;
  o.numeric_step = [](const qloom::io::ModelDir&, const qloom::io::ModelDir&) {
    return StepResult{};
  };
  (void)validate_checkpoint(src, q, o);
  EXPECT_EQ(listing(src), before_src);
  EXPECT_EQ(listing(q), before_q);
}

}  // namespace
