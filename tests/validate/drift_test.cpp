// Benign drift in steps 1 and 3: the config.json and tokenizer_config.json
// that transformers 5 writes when it re-saves a model (goldens in
// tests/data/validate/drift/, from scripts/goldens/validate_drift.py) pass
// with each drifted key listed; a real change of a value still fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>

#include "qloom/validate/checks.h"
#include "qloom/validate/drift.h"
#include "qloom/validate/validator.h"
#include "validate/validate_fixture.h"

namespace {

namespace fs = std::filesystem;
using namespace qloom::validate;
using qloom::test::statuses;
using qloom::test::ValidateFixture;
using oj = nlohmann::ordered_json;
using json = nlohmann::json;

const fs::path kDrift = fs::path(QLOOM_TEST_DATA_DIR) / "validate" / "drift";

std::set<std::string> drift_keys(const oj& items) {
  std::set<std::string> k;
  for (const auto& e : items) k.insert(e["key"].get<std::string>());
  return k;
}

const oj* drift_item(const oj& items, const std::string& key) {
  for (const auto& e : items)
    if (e["key"] == key) return &e;
  return nullptr;
}

bool has_line(const StepResult& s, const std::string& needle) {
  return std::any_of(s.details.begin(), s.details.end(),
                     [&](const std::string& d) { return d.find(needle) != std::string::npos; });
}

// The fake Quark checkpoint of the demo with `config` (its
// quantization_config kept) and `tokenizer_config` in place of its own.
class DemoResave : public ::testing::Test {
 protected:
  void SetUp() override {
    q_ = f_.make("q");
    config_ = f_.read_json(kDrift / "demo/resaved/config.json");
    tok_ = f_.read_json(kDrift / "demo/resaved/tokenizer_config.json");
  }
  ValidationReport run() {
    oj c = config_;
    c["quantization_config"] = f_.read_json(q_ / "config.json")["quantization_config"];
    f_.write_json(q_ / "config.json", c);
    f_.write_json(q_ / "tokenizer_config.json", tok_);
    return f_.run(q_);
  }
  ValidateFixture f_;
  fs::path q_;
  oj config_, tok_;
};

TEST_F(DemoResave, Transformers5ResaveIsBenignDrift) {
  const auto r = run();
  EXPECT_EQ(statuses(r), "ok ok ok ok skipped");
  EXPECT_TRUE(r.passed());

  const StepResult& s3 = *r.step(3);
  EXPECT_EQ(drift_keys(s3.data["benign_drift"]),
            (std::set<std::string>{"transformers_version", "dtype", "rope_parameters", "pad_token_id"}));
  const oj* rope = drift_item(s3.data["benign_drift"], "rope_parameters");
  ASSERT_NE(rope, nullptr);
  EXPECT_EQ((*rope)["kind"], "renamed");
  EXPECT_EQ((*rope)["source"], oj::parse(R"({"rope_scaling": null, "rope_theta": 10000.0})"));
  EXPECT_EQ((*rope)["quantized"]["rope_parameters"]["rope_theta"], 10000.0);
  EXPECT_EQ((*drift_item(s3.data["benign_drift"], "dtype"))["source"]["torch_dtype"], "bfloat16");
  EXPECT_EQ((*drift_item(s3.data["benign_drift"], "pad_token_id"))["kind"], "default");
  EXPECT_EQ(s3.summary.rfind("benign drift (4 keys:", 0), 0u) << s3.summary;

  const StepResult& s1 = *r.step(1);
  ASSERT_EQ(s1.data["benign_drift"].size(), 1u);
  EXPECT_EQ(s1.data["benign_drift"][0]["file"], "tokenizer_config.json");
  const oj& changes = s1.data["benign_drift"][0]["changes"];
  EXPECT_EQ(drift_keys(changes),
            (std::set<std::string>{"add_bos_token", "add_eos_token", "legacy", "add_prefix_space",
                                   "backend", "is_local", "local_files_only",
                                   "use_default_system_prompt"}));
  EXPECT_EQ((*drift_item(changes, "legacy"))["kind"], "superseded");
  EXPECT_EQ((*drift_item(changes, "add_eos_token"))["kind"], "default");
  EXPECT_TRUE(has_line(s1, "benign drift: tokenizer_config.json: legacy: true → (absent)"));

  const std::string md = render_markdown(r);
  EXPECT_NE(md.find("benign drift: rope_parameters: {\"rope_scaling\":null,\"rope_theta\":10000.0} → "
                    "{\"rope_parameters\":{\"rope_theta\":10000.0,\"rope_type\":\"default\"}}"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("**Verdict**: PASS"), std::string::npos);
}

TEST_F(DemoResave, ChangedRmsNormEpsFails) {
  config_["rms_norm_eps"] = 1e-6;
  const auto r = run();
  EXPECT_EQ(statuses(r), "ok ok FAIL ok skipped");
  ASSERT_EQ(r.step(3)->data["mismatch_count"], 1);
  EXPECT_EQ(r.step(3)->data["mismatches"][0]["key"], "rms_norm_eps");
  // The drift is still listed beside the real change.
  EXPECT_EQ(r.step(3)->data["benign_drift_count"], 4);
}

TEST_F(DemoResave, ChangedRopeThetaInTheNewFormFails) {
  config_["rope_parameters"]["rope_theta"] = 500000.0;
  const auto r = run();
  EXPECT_EQ(statuses(r), "ok ok FAIL ok skipped");
  EXPECT_TRUE(has_line(*r.step(3), "rope_parameters.rope_theta: 10000.0 / 500000.0"));
}

TEST_F(DemoResave, RopeScalingAddedInTheNewFormFails) {
  config_["rope_parameters"] = {{"rope_theta", 10000.0}, {"rope_type", "linear"}, {"factor", 2.0}};
  const auto r = run();
  EXPECT_EQ(statuses(r), "ok ok FAIL ok skipped");
  EXPECT_TRUE(has_line(*r.step(3), "rope_parameters.factor: (absent) / 2.0"));
  EXPECT_TRUE(has_line(*r.step(3), "rope_parameters.rope_type: \"default\" / \"linear\""));
}

TEST_F(DemoResave, ChangedEosTokenFails) {
  tok_["eos_token"] = "<s>";
  auto r = run();
  EXPECT_EQ(statuses(r), "ok FAIL ok ok skipped");
  const oj& m = r.step(1)->data["mismatched"];
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0]["file"], "tokenizer_config.json");
  ASSERT_EQ(m[0]["differences"].size(), 1u);
  EXPECT_EQ(m[0]["differences"][0]["key"], "eos_token");
  EXPECT_TRUE(has_line(*r.step(1), "eos_token: \"</s>\" / \"<s>\""));

  // As an AddedToken object: the same content is benign, other content is not.
  tok_["eos_token"] = {{"__type", "AddedToken"}, {"content", "</s>"}, {"lstrip", false}};
  r = run();
  EXPECT_EQ(statuses(r), "ok ok ok ok skipped");
  tok_["eos_token"]["content"] = "<unk>";
  EXPECT_EQ(statuses(run()), "ok FAIL ok ok skipped");
}

TEST_F(DemoResave, DroppedLegacyNeedsTheSameTokenizerJson) {
  // legacy is only carried by tokenizer.json when both sides hold the same one.
  oj t = f_.read_json(q_ / "tokenizer.json");
  t["normalizer"] = nullptr;
  f_.write_json(q_ / "tokenizer.json", t);
  const auto r = run();
  EXPECT_EQ(statuses(r), "ok FAIL ok ok skipped");
  std::set<std::string> files;
  for (const auto& m : r.step(1)->data["mismatched"]) files.insert(m["file"].get<std::string>());
  EXPECT_EQ(files, (std::set<std::string>{"tokenizer.json", "tokenizer_config.json"}));
}

// ---- SmolLM2: a 4.x-style config against transformers 5's re-save ------------

class SmolResave : public ::testing::Test {
 protected:
  SmolResave() : tmp_("drift") {}
  void SetUp() override {
    src_ = tmp_.mkdir("src");
    q_ = tmp_.mkdir("q");
    for (const char* f : {"config.json", "tokenizer_config.json"}) {
      fs::copy_file(kDrift / "smollm2/source" / f, src_ / f);
      fs::copy_file(kDrift / "smollm2/resaved" / f, q_ / f);
    }
    source_ = ValidateFixture::read_json(src_ / "config.json");
    resaved_ = ValidateFixture::read_json(q_ / "config.json");
  }
  // Step 3 with `source` and `quantized` (plus a Quark quantization_config).
  StepResult step3(const oj& source, oj quantized) {
    ValidateFixture::write_json(src_ / "config.json", source);
    quantized["quantization_config"] = {{"quant_method", "quark"}};
    ValidateFixture::write_json(q_ / "config.json", quantized);
    return check_config(CheckpointPair::open(src_, q_), {});
  }
  qloom::test::TempDir tmp_;
  fs::path src_, q_;
  oj source_, resaved_;
};

TEST_F(SmolResave, RopeParametersTorchDtypeAndVersionAreBenign) {
  const auto s = step3(source_, resaved_);
  EXPECT_EQ(s.status, StepResult::kOk) << s.summary;
  EXPECT_EQ(drift_keys(s.data["benign_drift"]),
            (std::set<std::string>{"transformers_version", "dtype", "rope_parameters"}));
  const oj* rope = drift_item(s.data["benign_drift"], "rope_parameters");
  EXPECT_EQ((*rope)["source"]["rope_theta"], 100000.0);
  EXPECT_EQ((*rope)["quantized"]["rope_parameters"]["rope_theta"], 100000.0);
  const auto aux = check_auxiliary_files(CheckpointPair::open(src_, q_), {});
  EXPECT_EQ(aux.status, StepResult::kOk) << aux.summary;
}

TEST_F(SmolResave, ChangedRopeThetaInEitherFormFails) {
  oj src = source_;
  src["rope_theta"] = 10000.0;  // the 4.x form changed
  auto s = step3(src, resaved_);
  EXPECT_EQ(s.status, StepResult::kFail);
  EXPECT_TRUE(has_line(s, "rope_parameters.rope_theta: 10000.0 / 100000.0"));

  oj q = resaved_;
  q["rope_parameters"]["rope_theta"] = 10000.0;  // the 5.x form changed
  s = step3(source_, q);
  EXPECT_EQ(s.status, StepResult::kFail);

  // The 4.x form on the quantized side, the 5.x form on the source's.
  oj q4 = source_;
  q4["rope_theta"] = 200000.0;
  s = step3(resaved_, q4);
  EXPECT_EQ(s.status, StepResult::kFail);
  EXPECT_TRUE(has_line(s, "rope_parameters.rope_theta: 100000.0 / 200000.0"));

  // No theta at all is the architecture's default, 10000, not SmolLM2's.
  oj none = source_;
  none.erase("rope_theta");
  s = step3(none, resaved_);
  EXPECT_EQ(s.status, StepResult::kFail);
  none["rope_parameters"] = {{"rope_type", "default"}};
  s = step3(source_, none);
  EXPECT_EQ(s.status, StepResult::kFail);
}

TEST_F(SmolResave, DroppedDefaultValuedKeysAreBenignOthersFail) {
  // What 4.x wrote with every attribute: twelve keys at their defaults.
  oj src = source_;
  const oj defaults = oj::parse(R"({"output_attentions": false, "output_hidden_states": false,
      "return_dict": true, "torchscript": false, "use_bfloat16": false, "is_decoder": false,
      "chunk_size_feed_forward": 0, "pruned_heads": {}, "max_length": 20, "num_beams": 1,
      "top_k": 50, "temperature": 1.0})");
  for (auto it = defaults.begin(); it != defaults.end(); ++it) src[it.key()] = it.value();
  auto s = step3(src, resaved_);
  EXPECT_EQ(s.status, StepResult::kOk) << s.summary;
  EXPECT_EQ(s.data["benign_drift_count"], 15);

  // head_dim is derived (576 / 9 = 64): dropping it is benign; at 32 it is not.
  oj q = resaved_;
  q.erase("head_dim");
  EXPECT_EQ(step3(source_, q).status, StepResult::kOk);
  src = source_;
  src["head_dim"] = 32;
  EXPECT_EQ(step3(src, q).status, StepResult::kFail);

  // A value that is not the default: rms_norm_eps 1e-5 dropped loads as 1e-6.
  q = resaved_;
  q.erase("rms_norm_eps");
  s = step3(source_, q);
  EXPECT_EQ(s.status, StepResult::kFail);
  EXPECT_EQ(s.data["mismatches"][0]["key"], "rms_norm_eps");
  EXPECT_EQ(s.data["mismatches"][0]["only_in"], "source");
  // num_key_value_heads dropped loads as num_attention_heads (9), not 3.
  q = resaved_;
  q.erase("num_key_value_heads");
  EXPECT_EQ(step3(source_, q).status, StepResult::kFail);
}

TEST_F(SmolResave, ChangedRmsNormEpsFails) {
  oj q = resaved_;
  q["rms_norm_eps"] = 1e-5;  // 9.999999747378752e-06 in the source
  const auto s = step3(source_, q);
  EXPECT_EQ(s.status, StepResult::kFail);
  EXPECT_EQ(s.data["mismatch_count"], 1);
}

// ---- tokenizer_config.json rules ----------------------------------------------

TEST(TokenizerDrift, AddedTokensDecoderReserialisedIsBenignChangedContentIsNot) {
  const json src = json::parse(R"({"added_tokens_decoder": {"0": {"content": "<unk>",
      "lstrip": false, "normalized": false, "rstrip": false, "single_word": false, "special": true}},
      "eos_token": "</s>"})");
  json q = json::parse(R"({"eos_token": "</s>", "added_tokens_decoder":
      {"0": {"special": true, "content": "<unk>", "normalized": false}}})");
  auto c = compare_json_files("tokenizer_config.json", src, q, false);
  EXPECT_TRUE(c.real.empty());
  ASSERT_EQ(c.drift.size(), 1u);
  EXPECT_EQ(c.drift[0].key, "added_tokens_decoder");
  EXPECT_EQ(c.drift[0].kind, "equivalent");

  q["added_tokens_decoder"]["0"]["content"] = "<pad>";
  c = compare_json_files("tokenizer_config.json", src, q, false);
  ASSERT_EQ(c.real.size(), 1u);
  EXPECT_EQ(c.real[0].path, "added_tokens_decoder.0.content");

  // Dropped: superseded only by an identical tokenizer.json.
  q.erase("added_tokens_decoder");
  EXPECT_EQ(compare_json_files("tokenizer_config.json", src, q, false).real.size(), 1u);
  EXPECT_TRUE(compare_json_files("tokenizer_config.json", src, q, true).real.empty());
}

TEST(TokenizerDrift, KeyOrderAndSpacingAreReserialisationAnyFile) {
  const json a = json::parse(R"({"a": 1, "b": [1, 2.0]})");
  const json b = json::parse(R"({"b": [1.0, 2], "a": 1.0})");
  auto c = compare_json_files("special_tokens_map.json", a, b, false);
  EXPECT_TRUE(c.real.empty());
  ASSERT_EQ(c.drift.size(), 1u);
  EXPECT_EQ(c.drift[0].kind, "reserialised");
  // generation_config.json: the version is metadata, a token id is not.
  c = compare_json_files("generation_config.json", json::parse(R"({"bos_token_id": 1,
      "transformers_version": "4.46.0"})"), json::parse(R"({"bos_token_id": 2,
      "transformers_version": "5.24.0"})"), false);
  ASSERT_EQ(c.real.size(), 1u);
  EXPECT_EQ(c.real[0].path, "bos_token_id");
  ASSERT_EQ(c.drift.size(), 1u);
  EXPECT_EQ(c.drift[0].kind, "metadata");
}

TEST(TokenizerDrift, FastClassNameIsTheSameTokenizer) {
  const json src = json::parse(R"({"tokenizer_class": "LlamaTokenizerFast"})");
  EXPECT_TRUE(compare_json_files("tokenizer_config.json", src,
                                 json::parse(R"({"tokenizer_class": "LlamaTokenizer"})"), false)
                  .real.empty());
  EXPECT_EQ(compare_json_files("tokenizer_config.json", src,
                               json::parse(R"({"tokenizer_class": "GPT2Tokenizer"})"), false)
                .real.size(),
            1u);
}

}  // namespace
