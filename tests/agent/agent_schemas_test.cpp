// The agent's JSON Schemas themselves: each embedded schema (schemas/*.schema.json)
// is a valid draft-07 schema (checked against the draft-07 meta-schema, which
// no Debian package ships: it is embedded below, verbatim from
// http://json-schema.org/draft-07/schema), and the intake / plan / session
// schemas follow the repository's conventions ($schema, title, a
// description on every property, closed top-level objects). session_context:
// the schema describes exactly what agent::to_json(Intent) writes, for a
// range of prompts, plus the session's optional fields.
#include <algorithm>
#include <functional>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "qloom/agent/artifact_schema.h"
#include "qloom/agent/intent.h"
#include "qloom/agent/json_schema.h"

namespace qloom::agent {
namespace {

using json = nlohmann::json;

// The draft-07 meta-schema (whitespace removed; split into lines only to keep
// them short: the text is joined before parsing).
const char* const kDraft7MetaSchema = R"meta({"$schema":"http://json-schema.org/draft-07/schema#","$id":"http://json-schema.org/draft-07/schema#","title"
:"Core schema meta-schema","definitions":{"schemaArray":{"type":"array","minItems":1,"items":{"$ref":"#"}},"
nonNegativeInteger":{"type":"integer","minimum":0},"nonNegativeIntegerDefault0":{"allOf":[{"$ref":"#/definit
ions/nonNegativeInteger"},{"default":0}]},"simpleTypes":{"enum":["array","boolean","integer","null","number"
,"object","string"]},"stringArray":{"type":"array","items":{"type":"string"},"uniqueItems":true,"default":[]
}},"type":["object","boolean"],"properties":{"$id":{"type":"string","format":"uri-reference"},"$schema":{"ty
pe":"string","format":"uri"},"$ref":{"type":"string","format":"uri-reference"},"$comment":{"type":"string"},
"title":{"type":"string"},"description":{"type":"string"},"default":true,"readOnly":{"type":"boolean","defau
lt":false},"examples":{"type":"array","items":true},"multipleOf":{"type":"number","exclusiveMinimum":0},"max
imum":{"type":"number"},"exclusiveMaximum":{"type":"number"},"minimum":{"type":"number"},"exclusiveMinimum":
{"type":"number"},"maxLength":{"$ref":"#/definitions/nonNegativeInteger"},"minLength":{"$ref":"#/definitions
/nonNegativeIntegerDefault0"},"pattern":{"type":"string","format":"regex"},"additionalItems":{"$ref":"#"},"i
tems":{"anyOf":[{"$ref":"#"},{"$ref":"#/definitions/schemaArray"}],"default":true},"maxItems":{"$ref":"#/def
initions/nonNegativeInteger"},"minItems":{"$ref":"#/definitions/nonNegativeIntegerDefault0"},"uniqueItems":{
"type":"boolean","default":false},"contains":{"$ref":"#"},"maxProperties":{"$ref":"#/definitions/nonNegative
Integer"},"minProperties":{"$ref":"#/definitions/nonNegativeIntegerDefault0"},"required":{"$ref":"#/definiti
ons/stringArray"},"additionalProperties":{"$ref":"#"},"definitions":{"type":"object","additionalProperties":
{"$ref":"#"},"default":{}},"properties":{"type":"object","additionalProperties":{"$ref":"#"},"default":{}},"
patternProperties":{"type":"object","additionalProperties":{"$ref":"#"},"propertyNames":{"format":"regex"},"
default":{}},"dependencies":{"type":"object","additionalProperties":{"anyOf":[{"$ref":"#"},{"$ref":"#/defini
tions/stringArray"}]}},"propertyNames":{"$ref":"#"},"const":true,"enum":{"type":"array","items":true},"type"
:{"anyOf":[{"$ref":"#/definitions/simpleTypes"},{"type":"array","items":{"$ref":"#/definitions/simpleTypes"}
,"minItems":1,"uniqueItems":true}]},"format":{"type":"string"},"contentMediaType":{"type":"string"},"content
Encoding":{"type":"string"},"if":{"$ref":"#"},"then":{"$ref":"#"},"else":{"$ref":"#"},"allOf":{"$ref":"#/def
initions/schemaArray"},"anyOf":{"$ref":"#/definitions/schemaArray"},"oneOf":{"$ref":"#/definitions/schemaArr
ay"},"not":{"$ref":"#"}},"default":true})meta";

const json& meta_schema() {
  static const json m = [] {
    std::string text;
    for (const char* p = kDraft7MetaSchema; *p; ++p)
      if (*p != '\n') text += *p;
    return json::parse(text);
  }();
  return m;
}

std::string violations(const json& schema, const json& instance) {
  std::string s;
  for (const auto& v : validate_json(schema, instance)) s += v.path + ": " + v.message + "\n";
  return s;
}

TEST(AgentSchemas, EveryEmbeddedSchemaIsValidDraft7) {
  const auto names = artifact_schema_names();
  for (const char* mine : {"session_context", "model_analysis", "quant_plan"})
    EXPECT_NE(std::find(names.begin(), names.end(), mine), names.end()) << mine;
  for (const auto& name : names) EXPECT_EQ(violations(meta_schema(), artifact_schema(name)), "") << name;
}

TEST(AgentSchemas, MetaSchemaRejectsBrokenSchemas) {
  for (const char* bad : {R"({"type": "strng"})", R"({"required": "x"})", R"({"properties": {"a": 3}})",
                          R"({"minLength": -1})", R"({"enum": 3})", R"({"additionalProperties": "no"})"})
    EXPECT_NE(violations(meta_schema(), json::parse(bad)), "") << bad;
  EXPECT_EQ(violations(meta_schema(), json::parse(R"({"type": ["string", "null"], "enum": ["a", null]})")), "");
}

// Calls f(path, property schema) for every entry of every "properties"
// object anywhere in `schema`.
void for_each_property(const json& schema, const std::string& path,
                       const std::function<void(const std::string&, const json&)>& f) {
  if (schema.is_object()) {
    for (const auto& [key, value] : schema.items()) {
      if (key == "properties" && value.is_object()) {
        for (const auto& [name, prop] : value.items()) {
          f(path + "/" + name, prop);
          for_each_property(prop, path + "/" + name, f);
        }
      } else {
        for_each_property(value, path + "/" + key, f);
      }
    }
  } else if (schema.is_array()) {
    for (size_t i = 0; i < schema.size(); ++i) for_each_property(schema[i], path + "/" + std::to_string(i), f);
  }
}

TEST(AgentSchemas, IntakePlanSessionConventions) {
  for (const char* name : {"session_context", "model_analysis", "quant_plan"}) {
    SCOPED_TRACE(name);
    const json& s = artifact_schema(name);
    EXPECT_EQ(s.value("$schema", ""), "http://json-schema.org/draft-07/schema#");
    EXPECT_EQ(s.value("title", ""), name);
    EXPECT_FALSE(s.value("description", "").empty());
    EXPECT_EQ(s.value("additionalProperties", true), false);
    size_t props = 0;
    for_each_property(s, "", [&](const std::string& path, const json& prop) {
      ++props;
      EXPECT_TRUE(prop.is_object() && prop.contains("description") && !prop["description"].get<std::string>().empty())
          << path << " has no description";
    });
    EXPECT_GT(props, 20u);
    // Every property listed as required exists.
    for (const auto& r : s["required"]) EXPECT_TRUE(s["properties"].contains(r.get<std::string>())) << r;
  }
}

IntentContext context() {
  IntentContext c;
  c.demo_model_dir = QLOOM_DEMO_MODEL_DIR;
  c.local_model_dirs = {"/models/my-llama-7b"};
  c.output_root = "/ws";
  return c;
}

TEST(AgentSchemas, SessionContextMatchesIntentJson) {
  const std::vector<std::string> prompts = {
      "quantize the demo model to int4 g128",
      "fp8 with fp8 kv cache on MI300X for Qwen/Qwen2.5-0.5B",
      "awq 4-bit meta-llama/Llama-3.1-8B-Instruct, calibrate on 256 samples of c4 with seq len 1024",
      "quantize to int4",  // no model: a question
      "quantize Qwen/Qwen2.5-0.5B to mx9",  // Quark-only scheme: a question
      "quantize /models/my-llama-7b to fp8, keep lm_head and attention in bf16, accept a 5% gap",
      "quantize Qwen/Qwen2.5-0.5B to int4 but keep attention in fp8, report ppl on wikitext-2 on 50 samples",
      "quantize Qwen/Qwen2.5-0.5B to fp8, and quantize the lm_head too, skip eval",
      "make Qwen/Qwen2.5-0.5B as small as possible, ok to lose up to 0.05 accuracy",
      "",
  };
  const json& schema = artifact_schema("session_context");
  std::set<std::string> required;
  for (const auto& r : schema["required"]) required.insert(r.get<std::string>());
  for (const auto& p : prompts) {
    SCOPED_TRACE(p);
    const nlohmann::ordered_json j = to_json(parse_intent(p, context()));
    EXPECT_EQ(violations(schema, j), "");
    // The schema requires exactly the keys to_json writes.
    std::set<std::string> keys;
    for (const auto& [k, v] : j.items()) keys.insert(k);
    EXPECT_EQ(keys, required);
  }
  // The session's own fields are optional and typed.
  nlohmann::ordered_json j = to_json(parse_intent(prompts[0], context()));
  j["workspace"] = "/ws";
  j["attempt_number"] = 1;
  j["interactive"] = "off";
  j["acceptable_eval_gap"] = nullptr;
  j["max_requantize_attempts"] = 1;
  j["qloom_version"] = "0.1.0";
  EXPECT_EQ(violations(schema, j), "");
  json bad = j;
  bad["interactive"] = "sometimes";
  EXPECT_NE(violations(schema, bad), "");
  bad = j;
  bad["attempt_number"] = 0;
  EXPECT_NE(violations(schema, bad), "");
  bad = j;
  bad["sources"].erase("quant_scheme");
  EXPECT_NE(violations(schema, bad), "");
  bad = j;
  bad["sources"]["model"] = "guessed";
  EXPECT_NE(violations(schema, bad), "");
  bad = j;
  bad["open_questions"].push_back({{"field", "model"}});
  EXPECT_NE(violations(schema, bad), "");
  bad = j;
  bad["num_calib_data"] = -1;
  EXPECT_NE(violations(schema, bad), "");
  bad = j;
  bad.erase("user_prompt");
  EXPECT_NE(violations(schema, bad), "");
  bad = j;
  bad["unknown_key"] = true;
  EXPECT_NE(violations(schema, bad), "");
}

}  // namespace
}  // namespace qloom::agent
