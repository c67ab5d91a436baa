// YAML <-> JSON for run_manifest.yaml (yaml-cpp): the manifest is built and
// validated as JSON (schemas/run_manifest.schema.json) and stored as YAML.
// Emitting: objects keep their key order, strings that would read back as
// another type (numbers, booleans, null, empty) are double-quoted, numbers
// use JSON's shortest round-trip spelling. Reading: quoted scalars are
// strings; plain scalars become null (~, null, empty), booleans (true/false),
// integers, floating-point numbers, else strings. emit then parse gives the
// same JSON back.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace qloom::agent {

std::string json_to_yaml(const nlohmann::ordered_json& j);
// Throws Error(kInvalidInput) naming `file` when the text is not YAML.
nlohmann::ordered_json yaml_to_json(const std::string& text, const std::string& file);

}  // namespace qloom::agent
