// qloom's draft-07 validator against the official JSON-Schema-Test-Suite
// (Debian json-schema-test-suite, installed by scripts/setup): every case of
// every keyword file it implements, except groups that need remote
// references or $id-based resolution (not implemented, listed in
// json_schema.h). Plus violation paths and messages on an artifact-like case.
#include "qloom/agent/json_schema.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "qloom/core/error.h"

namespace qloom::agent {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kSuite = "/usr/share/json-schema-test-suite/tests/draft7";

bool needs_unsupported(const json& schema) {
  const std::string s = schema.dump();
  return s.find("\"$id\"") != std::string::npos || s.find("http://") != std::string::npos ||
         s.find("https://") != std::string::npos || s.find("\"format\"") != std::string::npos;
}

TEST(JsonSchema, OfficialTestSuiteDraft7) {
  if (!fs::is_directory(kSuite)) GTEST_SKIP() << kSuite << " missing: install the Debian package json-schema-test-suite";
  size_t passed = 0, skipped_groups = 0, files = 0;
  for (const auto& e : fs::directory_iterator(kSuite)) {
    if (e.path().extension() != ".json") continue;
    const std::string name = e.path().stem().string();
    if (name == "refRemote" || name == "default") continue;  // remote refs; 'default' is an annotation only
    ++files;
    std::ifstream in(e.path());
    const json groups = json::parse(in);
    for (const auto& g : groups) {
      if (needs_unsupported(g["schema"])) {
        ++skipped_groups;
        continue;
      }
      for (const auto& t : g["tests"]) {
        bool ok = false;
        try {
          ok = validate_json(g["schema"], t["data"]).empty() == t["valid"].get<bool>();
        } catch (const std::exception& ex) {
          ADD_FAILURE() << name << ": " << g["description"] << " / " << t["description"] << ": threw " << ex.what();
          continue;
        }
        EXPECT_TRUE(ok) << name << ": " << g["description"].get<std::string>() << " / "
                        << t["description"].get<std::string>() << " (expected valid=" << t["valid"] << ")";
        passed += ok;
      }
    }
  }
  std::printf("[ json-schema ] %zu suite files, %zu cases passed, %zu groups skipped ($id / remote / format)\n", files,
              passed, skipped_groups);
  EXPECT_GT(files, 30u);
  EXPECT_GT(passed, 350u);  // 398 with Debian 12's suite
}

TEST(JsonSchema, ViolationsNameThePath) {
  const json schema = json::parse(R"({
    "type": "object", "required": ["metric_name", "relative_gap"], "additionalProperties": false,
    "properties": {"metric_name": {"type": "string"}, "relative_gap": {"type": "number", "minimum": 0},
                   "steps": {"type": "array", "items": {"$ref": "#/definitions/step"}}},
    "definitions": {"step": {"type": "object", "required": ["status"],
                             "properties": {"status": {"enum": ["ok", "FAIL", "skipped"]}}}}})");
  const auto v = validate_json(schema, json::parse(R"({"relative_gap": -1, "extra": 1, "steps": [{"status": "bad"}]})"));
  std::vector<std::string> got;
  for (const auto& x : v) got.push_back(x.path + ": " + x.message);
  ASSERT_EQ(got.size(), 4u) << testing::PrintToString(got);
  EXPECT_NE(std::find(got.begin(), got.end(), ": required property 'metric_name' is missing"), got.end());
  EXPECT_NE(std::find(got.begin(), got.end(), "/relative_gap: must be >= 0"), got.end());
  EXPECT_NE(std::find(got.begin(), got.end(), "/extra: property 'extra' is not allowed"), got.end());
  EXPECT_NE(std::find(got.begin(), got.end(), "/steps/0/status: value \"bad\" is not one of [\"ok\",\"FAIL\",\"skipped\"]"),
            got.end());
  EXPECT_THROW(validate_json(json::parse(R"({"$ref": "#/nope"})"), 1), Error);
  EXPECT_THROW(validate_json(json::parse(R"({"pattern": "("})"), "x"), Error);
}

}  // namespace
}  // namespace qloom::agent
