// The compressed-tensors interop proof without torch: tests/data/
// compressed_tensors/golden.json (scripts/goldens/compressed_tensors.py) holds,
// per scheme of the demo model, the sha256 of every file qloom's converter
// wrote and of every weight the compressed-tensors package decompressed from
// them (float32 little-endian). Re-exporting must give the same files, and
// qloom's own dequantization of the Quark checkpoint must hash to what
// compressed-tensors decompressed.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "export/compressed_tensors_test_util.h"
#include "qloom/job/algo_config_file.h"
#include "qloom/export/compressed_tensors_export.h"
#include "support/temp_dir.h"

namespace qloom::exporter {
namespace {

namespace fs = std::filesystem;

nlohmann::json golden() {
  const std::string text = test::read_file(fs::path(QLOOM_TEST_DATA_DIR) / "compressed_tensors" / "golden.json");
  EXPECT_FALSE(text.empty()) << "run scripts/goldens/compressed_tensors.py";
  return text.empty() ? nlohmann::json::object() : nlohmann::json::parse(text);
}

class CtGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(CtGolden, FilesAndDecompressedWeightsMatchTheGolden) {
  const nlohmann::json all = golden();
  ASSERT_TRUE(all.contains("schemes"));
  ASSERT_TRUE(all["schemes"].contains(GetParam()));
  const nlohmann::json& g = all["schemes"][GetParam()];
  test::TempDir tmp("ctg");
  ct_test::quantize_demo(g["quant_scheme"], tmp / "quark", g["extra_flags"].get<std::vector<std::string>>());
  export_compressed_tensors(tmp / "quark", tmp / "ct");

  size_t files = 0;
  for (const auto& e : fs::directory_iterator(tmp / "ct")) {
    const std::string f = e.path().filename().string();
    ASSERT_TRUE(g["files"].contains(f)) << f << " is not in the golden";
    EXPECT_EQ(job::sha256_hex(test::read_file(e.path())), g["files"][f].get<std::string>()) << f;
    ++files;
  }
  EXPECT_EQ(files, g["files"].size());

  const auto ours = ct_test::quark_dequantized(tmp / "quark");
  ASSERT_EQ(ours.size(), g["decompressed"].size());
  for (const auto& [module, deq] : ours) {
    const std::string name = module + ".weight";
    ASSERT_TRUE(g["decompressed"].contains(name)) << name;
    const std::string bytes(reinterpret_cast<const char*>(deq.data()), deq.size() * sizeof(float));
    EXPECT_EQ(job::sha256_hex(bytes), g["decompressed"][name].get<std::string>()) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, CtGolden,
                         ::testing::Values("int4_wo_32", "uint4_wo_32", "int4_wo_per_channel", "uint4_wo_per_channel",
                                           "ptpc_fp8", "fp8_kv_fp8", "int8", "int4_wo_32_o_proj_ptpc_fp8"));

}  // namespace
}  // namespace qloom::exporter
