// --model_export: the formats of one quantize job, their layout under
// --output_dir, and that a failure in any of them leaves no output.
#include "qloom/job/model_export.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "qloom/job/quantize_args.h"
#include "qloom/io/gguf.h"
#include "qloom/io/model_dir.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::exporter {
namespace {

namespace fs = std::filesystem;

job::QuantizeOptions demo(const fs::path& out, std::vector<std::string> formats, std::string scheme = "int4_wo_32") {
  job::QuantizeOptions o;
  o.model_dir = QLOOM_DEMO_MODEL_DIR;
  o.output_dir = out;
  o.quant_scheme = std::move(scheme);
  o.exclude_unsupported = true;
  o.model_export = std::move(formats);
  o.threads = 1;
  return o;
}

// Hidden staging names beside the output that survived (none may).
std::vector<std::string> leftovers(const fs::path& parent) {
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(parent))
    if (e.path().filename().string().rfind('.', 0) == 0) left.push_back(e.path().filename().string());
  return left;
}

std::string quant_method(const fs::path& dir) {
  return io::ModelDir::open(dir).config().at("quantization_config").at("quant_method").get<std::string>();
}

TEST(ModelExport, ParsesFormatsAndRefusesOthers) {
  EXPECT_EQ(job::parse_export_formats({"hf_format", "compressed_tensors", "gguf"}),
            (std::vector<job::ExportFormat>{job::ExportFormat::kHfFormat, job::ExportFormat::kCompressedTensors, job::ExportFormat::kGguf}));
  EXPECT_EQ(test::catch_error([] { job::parse_export_formats({"onnx"}); }).kind(), ErrorKind::kUnsupported);
  EXPECT_EQ(test::catch_error([] { job::parse_export_formats({"gguf", "gguf"}); }).kind(), ErrorKind::kUsage);
  EXPECT_EQ(test::catch_error([] { job::parse_export_formats({"safetensors"}); }).kind(), ErrorKind::kUsage);
  EXPECT_EQ(test::catch_error([] { job::parse_export_formats({}); }).kind(), ErrorKind::kUsage);
}

TEST(ModelExport, FlagIsRepeatableAndRoundTrips) {
  const auto c = job::parse_quantize_args({"--model_dir", "m", "--output_dir", "o", "--quant_scheme", "fp8",
                                      "--model_export", "hf_format", "--model-export", "gguf"});
  EXPECT_EQ(c.options.model_export, (std::vector<std::string>{"hf_format", "gguf"}));
  const auto d = job::parse_quantize_args({"--model_dir", "m", "--output_dir", "o", "--quant_scheme", "fp8",
                                      "--model_export", "compressed-tensors", "gguf"});
  EXPECT_EQ(d.options.model_export, (std::vector<std::string>{"compressed-tensors", "gguf"}));
  EXPECT_EQ(job::parse_quantize_args(job::quantize_args(d)).options.model_export, d.options.model_export);
  const auto def = job::parse_quantize_args({"--model_dir", "m", "--output_dir", "o", "--quant_scheme", "fp8"});
  EXPECT_EQ(def.options.model_export, (std::vector<std::string>{"hf_format"}));
}

TEST(ModelExport, AllThreeFormatsLandUnderOneOutputDir) {
  test::TempDir tmp("mexp");
  const fs::path out = tmp / "out";
  const job::QuantizeSummary s = job::quantize_model(demo(out, {"hf_format", "compressed-tensors", "gguf"}));
  EXPECT_EQ(quant_method(out), "quark");
  EXPECT_EQ(quant_method(out / "compressed-tensors"), "compressed-tensors");
  const io::GgufFile g = io::GgufFile::open(out / "llama.gguf");
  // general.name is OUT's name, not the staging directory the converter read.
  EXPECT_EQ(g.get_string("general.name"), "out");
  ASSERT_EQ(s.exports.size(), 3u);
  EXPECT_EQ(s.exports[0].format, "hf_format");
  EXPECT_EQ(s.exports[0].path, out);
  EXPECT_EQ(s.exports[1].path, out / "compressed-tensors");
  EXPECT_EQ(s.exports[2].path, out / "llama.gguf");
  for (const auto& e : s.exports) EXPECT_GT(e.bytes, 0u) << e.format;
  EXPECT_TRUE(leftovers(tmp.path()).empty());
}

TEST(ModelExport, FirstDirectoryFormatIsTheOutputDir) {
  test::TempDir tmp("mexp");
  const fs::path out = tmp / "out";
  (void)job::quantize_model(demo(out, {"gguf", "compressed-tensors"}));
  EXPECT_EQ(quant_method(out), "compressed-tensors");
  EXPECT_TRUE(fs::exists(out / "llama.gguf"));
  EXPECT_FALSE(fs::exists(out / "hf_format"));
  EXPECT_TRUE(leftovers(tmp.path()).empty());
  const fs::path only = tmp / "only-gguf";
  (void)job::quantize_model(demo(only, {"gguf"}));
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(only)) files.push_back(e.path().filename().string());
  EXPECT_EQ(files, std::vector<std::string>{"llama.gguf"});
}

TEST(ModelExport, AFormatThatCannotHoldTheSchemeFailsBeforeWriting) {
  test::TempDir tmp("mexp");
  const fs::path out = tmp / "out";
  const Error e = test::catch_error([&] { job::quantize_model(demo(out, {"hf_format", "compressed-tensors"}, "mxfp4")); });
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_NE(e.message().find("compressed-tensors"), std::string::npos) << e.message();
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(leftovers(tmp.path()).empty());
}

TEST(ModelExport, ExistingOutputNeedsOverwriteAndIsReplacedWhole) {
  test::TempDir tmp("mexp");
  const fs::path out = tmp / "out";
  tmp.write("out/stale.txt", "old");
  EXPECT_EQ(test::catch_error([&] { job::quantize_model(demo(out, {"hf_format", "gguf"})); }).kind(), ErrorKind::kUsage);
  EXPECT_TRUE(fs::exists(out / "stale.txt"));
  job::QuantizeOptions o = demo(out, {"hf_format", "gguf"});
  o.overwrite = true;
  // Not a checkpoint: --overwrite refuses it (io/output_guard.h); an earlier export is replaced.
  EXPECT_EQ(test::catch_error([&] { job::quantize_model(o); }).kind(), ErrorKind::kUsage);
  EXPECT_TRUE(fs::exists(out / "stale.txt"));
  tmp.write("out/config.json", "{\"model_type\": \"llama\"}");
  tmp.write("out/model.safetensors", "an earlier export");
  (void)job::quantize_model(o);
  EXPECT_FALSE(fs::exists(out / "stale.txt"));
  EXPECT_TRUE(fs::exists(out / "llama.gguf"));
  EXPECT_TRUE(leftovers(tmp.path()).empty());
}

TEST(ModelExport, OutputInsideTheSourceIsRefusedForEveryLayout) {
  for (const auto& formats : {std::vector<std::string>{"hf_format"}, std::vector<std::string>{"gguf"}}) {
    const Error e = test::catch_error(
        [&] { job::quantize_model(demo(fs::path(QLOOM_DEMO_MODEL_DIR) / "sub", formats)); });
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    EXPECT_NE(e.message().find("inside the source"), std::string::npos) << e.message();
  }
  EXPECT_FALSE(fs::exists(fs::path(QLOOM_DEMO_MODEL_DIR) / "sub"));
}

TEST(ModelExport, GgufFlagsAreChecked) {
  test::TempDir tmp("mexp");
  job::QuantizeOptions o = demo(tmp / "out", {"gguf"});
  o.gguf_float_type = "q5_0";
  EXPECT_EQ(test::catch_error([&] { job::quantize_model(o); }).item(), "--gguf_float_type");
  o.gguf_float_type = "f16";
  o.gguf_refit_4bit = "q8_0";
  EXPECT_EQ(test::catch_error([&] { job::quantize_model(o); }).item(), "--gguf_refit_4bit");
  EXPECT_FALSE(fs::exists(tmp / "out"));
}

}  // namespace
}  // namespace qloom::exporter
