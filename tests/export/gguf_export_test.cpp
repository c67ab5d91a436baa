// export_gguf on the demo model: quantized with job::quantize_model into
// a temp dir, exported, read back with qloom's own GGUF reader and
// dequantizer. Q4_0 / Q4_1 / Q8_0 tensors equal qloom's dequantized Quark
// weights exactly (after llama.cpp's Q/K row order is undone with
// model::unpermute_qk_rows), F16 tensors the source rounded to fp16, norms
// the source; the metadata keys llama.cpp reads; qloom's GGUF -> HF reader
// maps the file back to the same config and tensor names; determinism; a
// K-quant re-fit on a synthetic model whose rows are whole super-blocks; and
// the refusals (no output, no staging left behind).
#include "qloom/export/gguf_export.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/export/checkpoint_runtime.h"
#include "qloom/job/quantize_job.h"
#include "qloom/io/gguf.h"
#include "qloom/io/gguf_dequant.h"
#include "qloom/io/json_read.h"
#include "qloom/io/model_dir.h"
#include "qloom/model/gguf_config.h"
#include "qloom/model/gguf_tensors.h"
#include "support/expect_error.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace qloom::exporter {
namespace {

namespace fs = std::filesystem;
using io::GgmlType;
using test::catch_error;

// One quantized demo checkpoint per scheme, shared by the tests.
const fs::path& quantized(const std::string& scheme) {
  static test::TempDir tmp("gguf-export");
  static std::map<std::string, fs::path> done;
  if (!done.count(scheme)) {
    job::QuantizeOptions o;
    o.model_dir = QLOOM_DEMO_MODEL_DIR;
    o.output_dir = tmp.path() / scheme;
    o.quant_scheme = scheme;
    o.exclude_unsupported = true;  // int4 gate/up: out 172; down: in 172
    o.threads = 1;
    job::quantize_model(o);
    done[scheme] = o.output_dir;
  }
  return done[scheme];
}

std::vector<float> host_floats(const engine::HostTensor& t) {
  std::vector<float> out(t.bytes.size() / (t.dtype == DType::kF32 ? 4 : 2));
  to_f32(t.dtype, t.bytes.data(), out.data(), out.size());
  return out;
}

float f16_round(float x) {
  uint16_t h;
  f32_to_f16(&x, &h, 1);
  float y;
  f16_to_f32(&h, &y, 1);
  return y;
}

// GGUF tensor name -> HF name, Q/K head count (for the un-permutation).
std::pair<std::string, int64_t> hf_of(const std::string& g, const model::GgufModelInfo& info,
                                      const std::vector<model::GgufTensorPlan>& plan) {
  for (const auto& p : plan)
    if (p.info->name == g) return {p.hf_name, p.unpermute_heads};
  ADD_FAILURE() << "no HF name for " << g << " (" << info.model_type << ")";
  return {"", 0};
}

struct Compared {
  std::map<std::string, uint64_t> exact_by_type, tensors_by_type;
};

// Every tensor of `file` against qloom's view of the checkpoint.
Compared compare_all(const fs::path& quark_dir, const fs::path& file) {
  const io::GgufFile f = io::GgufFile::open(file);
  const model::GgufModelInfo info = model::read_gguf_model_info(f);
  const auto plan = model::plan_gguf_tensors(f, info);
  const io::ModelDir dir = io::ModelDir::open(quark_dir);
  const CheckpointRuntime rt = open_checkpoint_runtime(dir);
  Compared c;
  for (const auto& t : f.tensors()) {
    const auto [hf, heads] = hf_of(t.name, info, plan);
    std::vector<float> got = io::gguf_dequantize_tensor(f, t);
    if (heads > 0) model::unpermute_qk_rows(got, t.shape()[0], t.shape().size() == 2 ? t.shape()[1] : 1, heads);
    std::vector<float> want = host_floats(rt.weights->load(hf));
    EXPECT_EQ(got.size(), want.size()) << t.name;
    const std::string type(io::ggml_type_info(t.type).name);
    ++c.tensors_by_type[type];
    if (t.type == GgmlType::kF16)
      for (auto& v : want) v = f16_round(v);
    size_t diff = 0;
    for (size_t i = 0; i < got.size() && i < want.size(); ++i) diff += std::memcmp(&got[i], &want[i], 4) != 0;
    if (diff == 0) ++c.exact_by_type[type];
  }
  return c;
}

TEST(GgufExport, Int4Group32CarriesCodesExactlyAsQ4_0) {
  test::TempDir tmp("gguf-out");
  const fs::path out = tmp / "m.gguf";
  const GgufExportSummary s = export_gguf(quantized("int4_wo_32"), out);
  EXPECT_EQ(s.tensors_by_type.at("Q4_0"), 20u);  // q, k, v, o of 5 layers
  EXPECT_EQ(s.carried_tensors, 20u);
  EXPECT_EQ(s.carry.blocks, 5u * (64 + 32 + 32 + 64) * 2);
  EXPECT_EQ(s.carry.inexact_scale, 0u) << "bf16 scales of this model are exact in fp16";
  EXPECT_EQ(s.file_type, 1u) << "F16 holds most decoder elements (gate/up/down excluded)";
  EXPECT_EQ(s.bytes, fs::file_size(out));
  const Compared c = compare_all(quantized("int4_wo_32"), out);
  EXPECT_EQ(c.exact_by_type.at("Q4_0"), 20u);
  EXPECT_EQ(c.exact_by_type.at("F32"), c.tensors_by_type.at("F32"));
  EXPECT_EQ(c.exact_by_type.at("F16"), c.tensors_by_type.at("F16"));
  EXPECT_FALSE(c.tensors_by_type.count("Q4_1"));
}

TEST(GgufExport, Group64CarriesExactlyAsQ4_0) {
  test::TempDir tmp("gguf-out");
  const GgufExportSummary s = export_gguf(quantized("int4_wo_64"), tmp / "m.gguf");
  EXPECT_EQ(s.tensors_by_type.at("Q4_0"), 20u);
  EXPECT_EQ(s.carry.inexact_scale, 0u);
  EXPECT_EQ(compare_all(quantized("int4_wo_64"), tmp / "m.gguf").exact_by_type.at("Q4_0"), 20u);
  // The demo tokenizer's normalizer (strip, collapse spaces) is the one
  // thing of this checkpoint GGUF cannot carry.
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("normalizer"), std::string::npos);
}

// Q4_1 keeps m = -scale * zero_point in fp16: a bf16 scale times a 4-bit zero
// point can need 12 significant bits, one more than fp16 has. Those blocks
// (counted) get the nearest fp16 m; every other value is exact.
TEST(GgufExport, Uint4CarriesAsQ4_1ExactExceptCountedMins) {
  test::TempDir tmp("gguf-out");
  const fs::path out = tmp / "m.gguf";
  const GgufExportSummary s = export_gguf(quantized("uint4_wo_32"), out);
  EXPECT_EQ(s.tensors_by_type.at("Q4_1"), 20u);
  EXPECT_EQ(s.carry.inexact_scale, 0u);
  EXPECT_LT(s.carry.inexact_min, s.carry.blocks / 10);
  const io::GgufFile f = io::GgufFile::open(out);
  const io::ModelDir dir = io::ModelDir::open(quantized("uint4_wo_32"));
  const CheckpointRuntime rt = open_checkpoint_runtime(dir);
  const model::GgufModelInfo info = model::read_gguf_model_info(f);
  const auto plan = model::plan_gguf_tensors(f, info);
  uint64_t differ = 0;
  for (const auto& t : f.tensors()) {
    if (t.type != GgmlType::kQ4_1) continue;
    const auto [hf, heads] = hf_of(t.name, info, plan);
    auto got = io::gguf_dequantize_tensor(f, t);
    if (heads > 0) model::unpermute_qk_rows(got, t.shape()[0], t.shape()[1], heads);
    const auto want = host_floats(rt.weights->load(hf));
    float amax = 0;
    for (float v : want) amax = std::max(amax, std::fabs(v));
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] == want[i]) continue;
      ++differ;
      ASSERT_LE(std::fabs(got[i] - want[i]), amax * 0x1p-10f) << t.name << " " << i;
    }
  }
  EXPECT_LE(differ, 32 * s.carry.inexact_min);
  EXPECT_EQ(differ > 0, s.carry.inexact_min > 0);
  bool counted = false;
  for (const auto& w : s.warnings) counted |= w.find("not exact in fp16") != std::string::npos;
  EXPECT_EQ(counted, s.carry.inexact_min > 0);
}

TEST(GgufExport, Int8PerTensorToQ8_0WarnsAboutActivations) {
  test::TempDir tmp("gguf-out");
  const fs::path out = tmp / "m.gguf";
  const GgufExportSummary s = export_gguf(quantized("int8"), out);
  EXPECT_GT(s.tensors_by_type.at("Q8_0"), 0u);
  bool act_warning = false;
  for (const auto& w : s.warnings) act_warning |= w.find("activation") != std::string::npos;
  EXPECT_TRUE(act_warning);
  // int8 per-tensor scales are stored as F32 but rounded to the model dtype
  // (bf16) first (quantize_ref.h), so fp16 holds them exactly.
  EXPECT_EQ(s.carry.inexact_scale, 0u);
  const Compared c = compare_all(quantized("int8"), out);
  EXPECT_EQ(c.exact_by_type.at("Q8_0"), s.tensors_by_type.at("Q8_0"));
}

TEST(GgufExport, MetadataAsLlamaCppReadsIt) {
  test::TempDir tmp("gguf-out");
  const fs::path out = tmp / "m.gguf";
  GgufExportOptions named;
  named.name = "demo";
  export_gguf(quantized("int4_wo_32"), out, named);
  const io::GgufFile f = io::GgufFile::open(out);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_string("general.name"), "demo");
  EXPECT_EQ(f.get_uint("llama.block_count"), 5u);
  EXPECT_EQ(f.get_uint("llama.context_length"), 512u);
  EXPECT_EQ(f.get_uint("llama.embedding_length"), 64u);
  EXPECT_EQ(f.get_uint("llama.feed_forward_length"), 172u);
  EXPECT_EQ(f.get_uint("llama.attention.head_count"), 8u);
  EXPECT_EQ(f.get_uint("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ(f.get_uint("llama.attention.key_length"), 8u);
  EXPECT_EQ(f.get_uint("llama.rope.dimension_count"), 8u);
  EXPECT_EQ(f.get_uint("llama.vocab_size"), 512u);
  EXPECT_EQ(f.get_float("llama.rope.freq_base"), 10000.0);
  EXPECT_EQ(f.get_float("llama.attention.layer_norm_rms_epsilon"), static_cast<double>(1e-5f));
  EXPECT_EQ(f.get_uint("general.quantization_version"), 2u);
  EXPECT_EQ(f.get_uint("general.alignment"), 32u);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  const auto types = f.get_int_array("tokenizer.ggml.token_type");
  ASSERT_EQ(tokens.size(), 512u);
  ASSERT_EQ(types.size(), 512u);
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(types[0], 2);   // <unk>
  EXPECT_EQ(types[1], 3);   // control
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(types[3], 6);   // byte
  EXPECT_EQ(types[300], 1);
  EXPECT_EQ(f.get_float_array("tokenizer.ggml.scores").size(), 512u);
  EXPECT_EQ(f.get_uint("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(f.get_uint("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_FALSE(f.get_bool("tokenizer.ggml.add_eos_token"));
  EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_space_prefix"));
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr) << "tied embeddings";
  // qloom's own GGUF reader maps it back to the source's config.
  const model::GgufModelInfo info = model::read_gguf_model_info(f);
  const auto src = io::read_json_file(fs::path(QLOOM_DEMO_MODEL_DIR) / "config.json");
  for (const char* k : {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                        "num_key_value_heads", "vocab_size", "max_position_embeddings", "tie_word_embeddings"})
    EXPECT_EQ(info.config[k], src[k]) << k;
  EXPECT_EQ(model::plan_gguf_tensors(f, info).size(), f.tensors().size());
}

TEST(GgufExport, DeterministicBytes) {
  test::TempDir tmp("gguf-out");
  export_gguf(quantized("uint4_wo_32"), tmp / "a.gguf");
  export_gguf(quantized("uint4_wo_32"), tmp / "b.gguf");
  std::ifstream a(tmp / "a.gguf", std::ios::binary), b(tmp / "b.gguf", std::ios::binary);
  const std::string sa((std::istreambuf_iterator<char>(a)), {}), sb((std::istreambuf_iterator<char>(b)), {});
  EXPECT_GT(sa.size(), 0u);
  EXPECT_TRUE(sa == sb);
}

TEST(GgufExport, KQuantRefitOnSuperBlockRows) {
  test::TempDir tmp("gguf-kq");
  const fs::path src = tmp / "synth";
  const auto r = test::run_command({QLOOM_SYNTH_PATH, "--preset", "tiny", "--output_dir", src.string(),
                                    "--hidden_size", "256", "--intermediate_size", "512", "--num_hidden_layers", "1",
                                    "--num_attention_heads", "4", "--num_key_value_heads", "2", "--vocab_size", "512"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  job::QuantizeOptions o;
  o.model_dir = src;
  o.output_dir = tmp / "q";
  o.quant_scheme = "int4_wo_32";
  job::quantize_model(o);
  GgufExportOptions opt;
  opt.refit_4bit = GgmlType::kQ4_K;
  opt.float_type = GgmlType::kQ6_K;
  const GgufExportSummary s = export_gguf(o.output_dir, tmp / "k.gguf", opt);
  EXPECT_EQ(s.refit_tensors, 7u);
  EXPECT_EQ(s.tensors_by_type.at("Q4_K"), 7u);
  EXPECT_EQ(s.tensors_by_type.at("Q6_K"), 2u);  // token_embd, output (untied)
  EXPECT_EQ(s.file_type, 14u);
  const io::GgufFile f = io::GgufFile::open(tmp / "k.gguf");
  const model::GgufModelInfo info = model::read_gguf_model_info(f);
  const auto plan = model::plan_gguf_tensors(f, info);
  const io::ModelDir dir = io::ModelDir::open(o.output_dir);
  const CheckpointRuntime rt = open_checkpoint_runtime(dir);
  for (const auto& t : f.tensors()) {
    if (t.type != GgmlType::kQ4_K && t.type != GgmlType::kQ6_K) continue;
    const auto [hf, heads] = hf_of(t.name, info, plan);
    auto got = io::gguf_dequantize_tensor(f, t);
    if (heads > 0) model::unpermute_qk_rows(got, t.shape()[0], t.shape()[1], heads);
    const auto want = host_floats(rt.weights->load(hf));
    double err = 0, norm = 0;
    for (size_t i = 0; i < got.size(); ++i) err += std::pow(got[i] - want[i], 2), norm += std::pow(want[i], 2);
    // A 4-bit re-fit of 4-bit values: small against the signal, not zero.
    EXPECT_LT(std::sqrt(err / norm), t.type == GgmlType::kQ4_K ? 0.12 : 0.02) << t.name;
    EXPECT_GT(err, 0.0) << t.name;
  }
}

TEST(GgufExport, KQuantRowsThatDoNotFitFallBack) {
  test::TempDir tmp("gguf-out");
  GgufExportOptions opt;
  opt.refit_4bit = GgmlType::kQ4_K;
  opt.float_type = GgmlType::kQ4_K;
  const GgufExportSummary s = export_gguf(quantized("int4_wo_32"), tmp / "m.gguf", opt);
  EXPECT_EQ(s.refit_tensors, 0u);
  EXPECT_EQ(s.carried_tensors, 20u);                // in = 64: carried as Q4_0
  EXPECT_EQ(s.tensors_by_type.at("Q8_0"), 11u);     // embedding + gate/up (in 64)
  EXPECT_EQ(s.tensors_by_type.at("F16"), 5u);       // down_proj: in 172
  EXPECT_EQ(s.fallback_tensors, 20u + 16u);
}

TEST(GgufExport, Refusals) {
  test::TempDir tmp("gguf-err");
  // Not llama.
  const fs::path q = tmp / "qwen";
  fs::copy(quantized("int4_wo_32"), q, fs::copy_options::recursive);
  auto cfg = io::read_json_file(q / "config.json");
  cfg["model_type"] = "qwen2";
  std::ofstream(q / "config.json") << cfg.dump();
  Error e = catch_error([&] { export_gguf(q, tmp / "x.gguf"); });
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_EQ(e.item(), "model_type");
  EXPECT_NE(e.message().find("qwen2"), std::string::npos);
  // No tokenizer.json.
  cfg["model_type"] = "llama";
  std::ofstream(q / "config.json") << cfg.dump();
  fs::remove(q / "tokenizer.json");
  EXPECT_EQ(catch_error([&] { export_gguf(q, tmp / "x.gguf"); }).kind(), ErrorKind::kNotFound);
  EXPECT_FALSE(fs::exists(tmp / "x.gguf"));
  // Bad options, an existing output.
  GgufExportOptions bad;
  bad.float_type = GgmlType::kQ4_0;
  EXPECT_EQ(catch_error([&] { export_gguf(quantized("int4_wo_32"), tmp / "x.gguf", bad); }).kind(), ErrorKind::kUsage);
  std::ofstream(tmp / "exists.gguf") << "keep";
  EXPECT_EQ(catch_error([&] { export_gguf(quantized("int4_wo_32"), tmp / "exists.gguf"); }).kind(), ErrorKind::kUsage);
  EXPECT_EQ(fs::file_size(tmp / "exists.gguf"), 4u);
  EXPECT_EQ(parse_gguf_type("q4_k"), GgmlType::kQ4_K);
  EXPECT_EQ(catch_error([&] { parse_gguf_type("q3_k"); }).kind(), ErrorKind::kUsage);
}

TEST(GgufExport, FailureWhileWritingLeavesNothing) {
  test::TempDir tmp("gguf-err");
  const fs::path q = tmp / "big";
  fs::copy(quantized("int4_wo_32"), q, fs::copy_options::recursive);
  // An embedding value beyond fp16's range: F16 refuses mid-write.
  const fs::path st = q / "model.safetensors";
  std::fstream io(st, std::ios::in | std::ios::out | std::ios::binary);
  uint64_t hlen = 0;
  io.read(reinterpret_cast<char*>(&hlen), 8);
  const std::string header(hlen, '\0');
  io.read(const_cast<char*>(header.data()), hlen);
  const auto h = nlohmann::json::parse(header);
  const uint64_t off = h["model.embed_tokens.weight"]["data_offsets"][0].get<uint64_t>();
  io.seekp(8 + hlen + off);
  const uint16_t big = 0x4880;  // bf16 262144
  io.write(reinterpret_cast<const char*>(&big), 2);
  io.close();
  const Error e = catch_error([&] { export_gguf(q, tmp / "out" / "m.gguf"); });
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_EQ(e.item(), "model.embed_tokens.weight");
  EXPECT_TRUE(fs::is_empty(tmp / "out")) << "no file, no staging left";
  // BF16 holds it.
  GgufExportOptions bf16;
  bf16.float_type = GgmlType::kBF16;
  const auto s = export_gguf(q, tmp / "out" / "m.gguf", bf16);
  EXPECT_EQ(s.tensors_by_type.at("BF16"), 16u);
}

}  // namespace
}  // namespace qloom::exporter
