// The layer-precision table of the mixed-precision search: names, Quark
// schemes, stored bits computed from the Quark layout, hierarchy levels, and
// the refusals (pending wave-2 schemes, unknown names, bad lists).
#include <gtest/gtest.h>

#include "qloom/perf/precision.h"
#include "qloom/quant/scheme_registry.h"
#include "support/expect_error.h"

namespace qloom::perf {
namespace {

using test::catch_error;

TEST(SearchPrecision, TableIsNativePlusEveryRegistryScheme) {
  const auto names = precision_names();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "native");
  const auto schemes = quant::scheme_names();
  ASSERT_EQ(names.size(), schemes.size() + 1);
  for (size_t i = 0; i < schemes.size(); ++i) {
    EXPECT_EQ(names[i + 1], schemes[i]);
    EXPECT_EQ(get_precision(schemes[i]).quant_scheme, schemes[i]);
  }
  for (const char* n : {"fp8", "ptpc_fp8", "int8", "int4_wo_128", "uint4_wo_128", "int4_wo_64", "int4_wo_32",
                        "uint4_wo_64", "mxfp4", "mxfp4_weight_only"})
    EXPECT_NO_THROW(get_precision(n)) << n;
  EXPECT_TRUE(get_precision("native").is_native());
  EXPECT_EQ(get_precision("native").quant_scheme, "");
}

TEST(SearchPrecision, BitsLevelsAndActivationsFollowTheSpec) {
  const Precision& fp8 = get_precision("fp8");
  const Precision& w4 = get_precision("int4_wo_128");
  const Precision& mx = get_precision("mxfp4");
  const Precision& native = get_precision("native");
  EXPECT_EQ(fp8.weight_bits, 8);
  EXPECT_EQ(w4.weight_bits, 4);
  EXPECT_EQ(mx.weight_bits, 4);
  EXPECT_EQ(native.level, 16);
  EXPECT_GT(native.level, fp8.level);
  EXPECT_GT(fp8.level, w4.level);
  EXPECT_EQ(get_precision("int8").level, get_precision("ptpc_fp8").level);
  EXPECT_EQ(fp8.activation_bits, 8);
  EXPECT_EQ(w4.activation_bits, 16);  // weight-only
  EXPECT_EQ(mx.activation_bits, 4.25);  // fp4 + an e8m0 scale per 32
  EXPECT_TRUE(fp8.quantizes_activations());
  EXPECT_FALSE(w4.quantizes_activations());
  // Nominal stored bits (bf16 model): int4 g128 = 4 + 16-bit scale + packed
  // int32 zero point (4 bits) per 128; uint4 g64 likewise per 64; MXFP4 = 4 + 8/32.
  EXPECT_DOUBLE_EQ(nominal_bits_per_weight(w4), 4.0 + 16.0 / 128 + 4.0 / 128);
  EXPECT_DOUBLE_EQ(nominal_bits_per_weight(get_precision("uint4_wo_64")), 4.0 + 16.0 / 64 + 4.0 / 64);
  EXPECT_DOUBLE_EQ(nominal_bits_per_weight(get_precision("mxfp4_weight_only")), 4.25);
  EXPECT_NEAR(nominal_bits_per_weight(fp8), 8.0, 1e-5);
  EXPECT_GT(nominal_bits_per_weight(fp8), 8.0);  // the per-tensor scale counts
  EXPECT_DOUBLE_EQ(nominal_bits_per_weight(native), 16.0);
  EXPECT_DOUBLE_EQ(nominal_bits_per_weight(native, DType::kF32), 32.0);
}

TEST(SearchPrecision, StoredBitsOfOneShapeAndUnfitShapes) {
  const Precision& w4 = get_precision("int4_wo_32");
  // [64, 64]: codes 4 bits, bf16 scales [2, 64], int32 zero points [2, 8].
  EXPECT_EQ(stored_weight_bits(w4, 64, 64, DType::kBF16), 64u * 64 * 4 + 2 * 64 * 16 + 2 * 8 * 32);
  EXPECT_EQ(unfit_reason(w4, 64, 64, DType::kBF16), "");
  EXPECT_NE(unfit_reason(get_precision("int4_wo_128"), 64, 64, DType::kBF16), "");  // 128 does not divide 64
  EXPECT_NE(unfit_reason(w4, 172, 64, DType::kBF16), "");                           // out % 8 != 0
  EXPECT_NE(unfit_reason(get_precision("mxfp4"), 64, 172, DType::kBF16), "");       // in % 32 != 0
  EXPECT_EQ(unfit_reason(get_precision("fp8"), 172, 64, DType::kBF16), "");
  EXPECT_EQ(unfit_reason(get_precision("native"), 3, 5, DType::kBF16), "");
  EXPECT_EQ(stored_weight_bits(get_precision("native"), 3, 5, DType::kBF16), 3u * 5 * 16);
  const Error e = catch_error([&] { (void)stored_weight_bits(w4, 172, 64, DType::kBF16); });
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
}

TEST(SearchPrecision, PendingWaveTwoSchemesAreUnsupported) {
  for (const char* n : {"mx6", "mx9", "bfp16"}) {
    const Error e = catch_error([&] { (void)get_precision(n); });
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << n;
    EXPECT_EQ(e.item(), "--layer-precision-candidates");
    EXPECT_NE(e.message().find(n), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("issue 17"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("pending"), std::string::npos) << e.message();
  }
  const Error e = catch_error([] { (void)parse_precision_candidates({"native", "fp8", "mx6"}); });
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
}

TEST(SearchPrecision, WaveTwoW4A8AndMxfp6AreCandidates) {
  // quant-perf's search uses mxfp4_fp8 and mxfp6_e2m3 as layer precisions;
  // int4_fp8 stores int4 codes (its fp8 first stage is not stored).
  EXPECT_EQ(get_precision("mxfp4_fp8").weight_bits, 4);
  EXPECT_EQ(get_precision("mxfp6_e2m3").weight_bits, 6);
  EXPECT_EQ(get_precision("int4_fp8").weight_bits, 4);
  // int4_fp8 [64, 64]: int4 words 64*8*4 B + s1 4 B + s2 64*4 B + zero points 8*4 B.
  EXPECT_EQ(stored_weight_bits(get_precision("int4_fp8"), 64, 64, DType::kBF16), 8u * (2048 + 4 + 256 + 32));
  // mxfp6: 64 * 48 bytes of codes + 64 * 2 e8m0 scales.
  EXPECT_EQ(stored_weight_bits(get_precision("mxfp6_e2m3"), 64, 64, DType::kBF16), 8u * (3072 + 128));
}

TEST(SearchPrecision, UnknownNamesAndBadListsAreUsageErrors) {
  Error e = catch_error([] { (void)get_precision("fp9", "--x"); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), "--x");
  EXPECT_NE(e.remedy().find("did you mean 'fp8'"), std::string::npos) << e.remedy();
  e = catch_error([] { (void)parse_precision_candidates({}); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  e = catch_error([] { (void)parse_precision_candidates({"fp8", "int8", "fp8"}); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_NE(e.message().find("twice"), std::string::npos);
  e = catch_error([] { (void)parse_precision_candidates({"native"}); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  const auto ok = parse_precision_candidates({"int4_wo_128", "native", "fp8"});
  ASSERT_EQ(ok.size(), 3u);
  EXPECT_EQ(ok[0].name, "int4_wo_128");  // order kept
  EXPECT_EQ(ok[1].name, "native");
}

TEST(SearchPrecision, KvCandidates) {
  EXPECT_EQ(parse_kv_candidates({"native", "fp8"}), (std::vector<std::string>{"native", "fp8"}));
  EXPECT_EQ(parse_kv_candidates({"fp8", "native"}), (std::vector<std::string>{"native", "fp8"}));
  EXPECT_EQ(parse_kv_candidates({"native"}), (std::vector<std::string>{"native"}));
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"fp8"}, {}, {"native", "native"}, {"native", "int8"}}) {
    const Error e = catch_error([&] { (void)parse_kv_candidates(bad); });
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    EXPECT_EQ(e.item(), "--kv-cache-precision-candidates");
  }
}

}  // namespace
}  // namespace qloom::perf
