// The JSON Schemas of the agent's workspace artifacts (schemas/*.schema.json in
// the repository, embedded into libqloom at build time): session_context,
// model_analysis, quant_plan, run_manifest (the YAML file read as JSON),
// eval_report, assessment. Every artifact is validated when written and when
// read (mission.md §2).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/agent/json_schema.h"

namespace qloom::agent {

// Names of the embedded schemas ("assessment", "eval_report", ...), sorted.
std::vector<std::string> artifact_schema_names();

// The parsed schema; throws Error(kInternal) for an unknown name (a bug).
const nlohmann::json& artifact_schema(std::string_view name);

// Violations of `instance` against the named schema (empty when valid).
std::vector<SchemaViolation> check_artifact(std::string_view schema_name, const nlohmann::json& instance);

// Throws Error(kInvalidInput) naming `file` and listing the first
// violations when `instance` does not validate.
void require_valid_artifact(std::string_view schema_name, const nlohmann::json& instance,
                            const std::filesystem::path& file);

}  // namespace qloom::agent
