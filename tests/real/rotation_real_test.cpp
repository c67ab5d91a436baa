// Rotation (Quark's R1, fused offline; quant/rotation.h) on SmolLM2-135M
// (hidden 576 = 36 x 16: Quark's Paley II order-36 matrix times Sylvester 16).
//
// 1. Rotation alone is an identity of the model's function: the model
//    converted to F32 and rotated keeps its logits (KLD against the unrotated
//    F32 model on wikitext-2, 2 windows of 512 tokens, below 1e-8, top-1
//    agreement >= 99.5%; measured 4.5e-11 and 100%). The bf16 model rotated
//    with Quark's bf16 rounding after each step stays below KLD 0.003 against
//    the bf16 source, top-1 >= 95% (measured 0.00034, 98.3%; Quark itself,
//    rotated and run in torch bf16: 0.0048 on 256 tokens).
// 2. rotation,gptq beats gptq on int4_wo_per_channel: KLD (wikitext-2, 4 x
//    512 tokens, 16 c4 calibration documents of 256 tokens) at most 0.85 x
//    GPTQ's (measured 0.393 vs 0.560, 30% lower; with 32 documents 0.358 vs
//    0.485, 26% lower).
// Not asserted, because rotation does not help there on this model (the same
// with Quark's own rotated checkpoints, byte-identical to qloom's except
// +-0 codes): round-to-nearest int4_wo_per_channel 1.054 -> 1.692 with
// rotation, int4_wo_64 0.490 -> 0.866, mxfp4 1.278 -> 1.931, ptpc_fp8 0.035 ->
// 0.087, mxfp4_weight_only 0.518 -> 1.070; with GPTQ (16 documents)
// mxfp4 0.929 -> 0.917 and mxfp4_weight_only 0.301 -> 0.294 (1-2% lower,
// within noise).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "qloom/io/model_dir.h"
#include "qloom/quant/rotation.h"
#include "real/real_model.h"

namespace qloom {
namespace {

namespace fs = std::filesystem;

nlohmann::json kld(const std::string& model, const std::string& src, const test::TempDir& tmp, const std::string& tag,
                   int limit) {
  return test::run_qloom_json({"eval", model, "--source", src, "--task", "kld", "--dataset", "wikitext2", "--seq_len",
                               "512", "--limit", std::to_string(limit), "--threads", "2"},
                              tmp, tag);
}

constexpr int kCalib = 16;  // c4 documents of 256 tokens

fs::path rotated(const fs::path& src, const test::TempDir& tmp, const std::string& tag) {
  const io::ModelDir d = io::ModelDir::open(src);
  quant::ModelRotation rot(d, quant::RotationConfig::from_json(nullptr, d.model_type()));
  quant::write_rotated_model(rot, tmp / tag, 2);
  return tmp / tag;
}

TEST(RealRotation, IsAnIdentityOfTheModel) {
  test::TempDir tmp("real-rotation-identity");
  const fs::path f32 = tmp / "f32";
  test::CommandResult c = test::run_qloom({"convert", test::real_gguf().string(), "--output_dir", f32.string(),
                                           "--dtype", "f32"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const auto jf = kld(rotated(f32, tmp, "rot_f32").string(), f32.string(), tmp, "f32", 2);
  const auto src = test::real_model_dir();
  const auto jb = kld(rotated(src, tmp, "rot_bf16").string(), src.string(), tmp, "bf16", 2);
  ASSERT_TRUE(jf.is_object() && jb.is_object());
  std::printf("[ real ] rotation alone: f32 KLD %.3g top-1 %.4f; bf16 KLD %.3g top-1 %.4f\n",
              jf["kld_mean"].get<double>(), jf["top1_agreement"].get<double>(), jb["kld_mean"].get<double>(),
              jb["top1_agreement"].get<double>());
  EXPECT_LT(jf["kld_mean"].get<double>(), 1e-8);
  EXPECT_GE(jf["top1_agreement"].get<double>(), 0.995);
  EXPECT_LT(jb["kld_mean"].get<double>(), 0.003);
  EXPECT_GE(jb["top1_agreement"].get<double>(), 0.95);
}

// A long calibration (16 documents, GPTQ twice): `full` label. The rotation
// and GPTQ code paths run in make test through IsAnIdentityOfTheModel, the
// GPTQ tests and the rotation stage tests on the demo model.
TEST(RealRotation, FullRotationGptqBeatsGptqInt4PerChannel) {
  const double gptq = test::quantized_kld("int4_wo_per_channel", "gptq", kCalib);
  const double rot = test::quantized_kld("int4_wo_per_channel", "rotation,gptq", kCalib);
  ASSERT_GT(gptq, 0);
  ASSERT_GT(rot, 0);
  std::printf("[ real ] int4_wo_per_channel: gptq kld %.6f, rotation,gptq kld %.6f (%.1f%% lower; required >= 15%%)\n",
              gptq, rot, 100 * (1 - rot / gptq));
  EXPECT_LE(rot, 0.85 * gptq);
}

}  // namespace
}  // namespace qloom
