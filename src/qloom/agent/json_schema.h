// A JSON Schema (draft-07) validator for the agent's artifacts
// (session_context.json, model_analysis.json, quant_plan.json,
// run_manifest.yaml read as JSON, eval_report.json, assessment.json; the
// schemas live in schemas/). No Debian package offers one for C++, so this is
// qloom's own, tested against the official JSON-Schema-Test-Suite (Debian
// json-schema-test-suite) for every keyword it implements:
//   type, enum, const, multipleOf, maximum, exclusiveMaximum, minimum,
//   exclusiveMinimum, maxLength, minLength, pattern, items (schema / array),
//   additionalItems, maxItems, minItems, uniqueItems, contains, maxProperties,
//   minProperties, required, properties, patternProperties,
//   additionalProperties, dependencies, propertyNames, if/then/else, allOf,
//   anyOf, oneOf, not, boolean schemas, $ref to the same document
//   ("#", "#/definitions/...", any local JSON pointer).
// Not implemented (ignored, like unknown keywords): format, content*,
// remote $ref and $id-based resolution. `pattern` uses std::regex
// (ECMAScript), close to the ECMA-262 dialect the spec names.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qloom::agent {

struct SchemaViolation {
  std::string path;     // JSON pointer into the instance, "" for the root
  std::string message;  // e.g. "required property 'relative_gap' is missing"
};

// All violations of `instance` against `schema` (empty when valid). Throws
// Error(kInvalidInput) for a malformed schema (a bad $ref, a bad regex).
std::vector<SchemaViolation> validate_json(const nlohmann::json& schema, const nlohmann::json& instance);

}  // namespace qloom::agent
