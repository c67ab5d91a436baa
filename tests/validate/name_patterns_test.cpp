// Tests for the tensor-name helpers and MD5 used by the validation steps.
#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "qloom/io/mapped_file.h"
#include "qloom/validate/md5.h"
#include "qloom/validate/name_patterns.h"
#include "support/temp_dir.h"

namespace {

using namespace qloom::validate;

TEST(CanonicalizeTensorName, CollapsesPureNumericSegments) {
  EXPECT_EQ(canonicalize_tensor_name("model.layers.12.self_attn.q_proj.weight"),
            "model.layers.*.self_attn.q_proj.weight");
  EXPECT_EQ(canonicalize_tensor_name("model.layers.3.mlp.experts.17.down_proj.weight_scale"),
            "model.layers.*.mlp.experts.*.down_proj.weight_scale");
  EXPECT_EQ(canonicalize_tensor_name("0.weight"), "*.weight");
  EXPECT_EQ(canonicalize_tensor_name("h.0"), "h.*");
  EXPECT_EQ(canonicalize_tensor_name("007"), "*");
}

TEST(CanonicalizeTensorName, KeepsDigitsInsideSegments) {
  EXPECT_EQ(canonicalize_tensor_name("encoder.norm1.w2.weight"), "encoder.norm1.w2.weight");
  EXPECT_EQ(canonicalize_tensor_name("h.0a.b1c.-1.weight"), "h.0a.b1c.-1.weight");
  EXPECT_EQ(canonicalize_tensor_name("lm_head.weight"), "lm_head.weight");
  EXPECT_EQ(canonicalize_tensor_name("a..b"), "a..b");  // empty segments stay empty
  EXPECT_EQ(canonicalize_tensor_name(""), "");
}

TEST(GlobMatch, FnmatchSemantics) {
  EXPECT_TRUE(glob_match("lm_head", "lm_head"));
  EXPECT_FALSE(glob_match("lm_head", "model.lm_head"));
  EXPECT_TRUE(glob_match("*.gate", "model.layers.0.mlp.gate"));
  EXPECT_FALSE(glob_match("*.gate", "model.layers.0.mlp.gate_proj"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("model.layers.*.input_layernorm.*", "model.layers.10.input_layernorm.weight"));
  EXPECT_TRUE(glob_match("layers.?.x", "layers.7.x"));
  EXPECT_FALSE(glob_match("layers.?.x", "layers.17.x"));
  EXPECT_TRUE(glob_match("layers.[0-3].x", "layers.2.x"));
  EXPECT_FALSE(glob_match("layers.[0-3].x", "layers.5.x"));
  EXPECT_TRUE(glob_match("layers.[!0-3].x", "layers.5.x"));
  EXPECT_TRUE(glob_match("a[b", "a[b"));  // unterminated set: literal '['
  EXPECT_TRUE(glob_match("*a*b*c", "xxaxxbxxbxc"));
  EXPECT_FALSE(glob_match("*a*b*c", "xxaxxbxxbx"));
}

TEST(QuantizationSuffix, KnownSuffixesOnly) {
  EXPECT_EQ(quantization_suffix("m.q_proj.weight_scale"), "weight_scale");
  EXPECT_EQ(quantization_suffix("m.q_proj.weight_zero_point"), "weight_zero_point");
  EXPECT_EQ(quantization_suffix("m.q_proj.input_scale"), "input_scale");
  EXPECT_EQ(quantization_suffix("m.k_proj.output_scale"), "output_scale");
  EXPECT_EQ(quantization_suffix("m.q_proj.weight"), "");
  EXPECT_EQ(quantization_suffix("weight_scale"), "");  // no module
  EXPECT_EQ(quantization_suffix("m.my_weight_scale"), "");
  EXPECT_EQ(module_of("a.b.c"), "a.b");
  EXPECT_EQ(module_of("abc"), "");
}

TEST(Md5, KnownVectors) {
  auto md5_of = [](const std::string& s) {
    return md5_hex({reinterpret_cast<const std::byte*>(s.data()), s.size()});
  };
  EXPECT_EQ(md5_of(""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(md5_of("abc"), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(md5_of("The quick brown fox jumps over the lazy dog"),
            "9e107d9d372bb6826bd81d3542a419d6");
  qloom::test::TempDir d("md5");
  EXPECT_EQ(md5_file_hex(d.write("abc.txt", "abc")), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(md5_file_hex(d.write("empty", "")), "d41d8cd98f00b204e9800998ecf8427e");
}

TEST(Md5, MappedStreamingMatchesPlainOverPieceBoundaries) {
  // More than one 32 MiB piece, an odd length, and an unaligned sub-range.
  std::vector<uint8_t> content((size_t{33} << 20) + 123);
  uint32_t x = 12345;
  for (auto& b : content) b = static_cast<uint8_t>((x = x * 1103515245u + 12345u) >> 24);
  qloom::test::TempDir d("md5big");
  const auto file = d.write("big.bin", content);
  const std::span<const std::byte> all(reinterpret_cast<const std::byte*>(content.data()),
                                       content.size());
  EXPECT_EQ(md5_file_hex(file), md5_hex(all));
  const auto m = qloom::io::MappedFile::open(file);
  const auto sub = m.bytes().subspan(4097, (size_t{32} << 20) + 5);
  EXPECT_EQ(md5_hex_mapped(sub), md5_hex(all.subspan(4097, sub.size())));
  // Hashing again after the pages were dropped reads them back from the file.
  EXPECT_EQ(md5_hex_mapped(sub), md5_hex(all.subspan(4097, sub.size())));
  EXPECT_EQ(md5_hex_mapped({}), "d41d8cd98f00b204e9800998ecf8427e");
}

}  // namespace
