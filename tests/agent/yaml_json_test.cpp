#include "qloom/agent/yaml_json.h"

#include <gtest/gtest.h>

#include "support/expect_error.h"

namespace qloom::agent {
namespace {

TEST(YamlJson, RoundTripKeepsTypesOrderAndAmbiguousStrings) {
  nlohmann::ordered_json j;
  j["workflow"] = "quark-torch-ptq";
  j["attempt"] = 2;
  j["ratio"] = 1.7723;
  j["tiny"] = 1e-300;
  j["negative"] = -5;
  j["flag"] = true;
  j["nothing"] = nullptr;
  j["looks_like_number"] = "0.05";
  j["looks_like_bool"] = "yes";
  j["empty"] = "";
  j["tilde"] = "~";
  j["path with spaces"] = "/tmp/a b/c: d # e";
  j["quote"] = "it's \"quoted\"\nand multi-line";
  j["list"] = {"qloom", "quantize", "--model_dir", "/x y/z", "--num_calib_data", "128"};
  j["nested"] = {{"b", 1}, {"a", {1, 2.5, "3"}}};
  j["123"] = "numeric key";
  const std::string y = json_to_yaml(j);
  const auto back = yaml_to_json(y, "t.yaml");
  EXPECT_EQ(back.dump(), j.dump()) << y;
  // Key order is kept.
  EXPECT_LT(y.find("workflow"), y.find("attempt"));
}

TEST(YamlJson, MalformedYamlIsATypedError) {
  const auto e = test::catch_error([] { yaml_to_json("a: [1, 2\nb: }", "bad.yaml"); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.file(), "bad.yaml");
}

TEST(YamlJson, PlainScalarsAreTyped) {
  const auto j = yaml_to_json("a: 12\nb: 1.5\nc: true\nd: ~\ne: hello\nf: '12'\n", "t.yaml");
  EXPECT_TRUE(j["a"].is_number_integer());
  EXPECT_TRUE(j["b"].is_number_float());
  EXPECT_TRUE(j["c"].is_boolean());
  EXPECT_TRUE(j["d"].is_null());
  EXPECT_EQ(j["e"], "hello");
  EXPECT_EQ(j["f"], "12");
}

}  // namespace
}  // namespace qloom::agent
