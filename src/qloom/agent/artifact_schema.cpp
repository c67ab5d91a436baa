#include "qloom/agent/artifact_schema.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "qloom/core/error.h"

namespace qloom::agent {
namespace detail {
const std::vector<std::pair<std::string_view, std::string_view>>& embedded_schemas();
}  // namespace detail

namespace {

const std::map<std::string, nlohmann::json, std::less<>>& parsed() {
  static const auto table = [] {
    std::map<std::string, nlohmann::json, std::less<>> m;
    for (const auto& [name, text] : detail::embedded_schemas()) {
      try {
        m.emplace(std::string(name), nlohmann::json::parse(text));
      } catch (const nlohmann::json::exception& e) {
        throw Error(ErrorKind::kInternal, "schemas/" + std::string(name) + ".schema.json", "",
                    std::string("embedded schema is not valid JSON: ") + e.what(), "fix the schema file and rebuild");
      }
    }
    return m;
  }();
  return table;
}

}  // namespace

std::vector<std::string> artifact_schema_names() {
  std::vector<std::string> names;
  for (const auto& [name, _] : parsed()) names.push_back(name);
  return names;
}

const nlohmann::json& artifact_schema(std::string_view name) {
  const auto& m = parsed();
  auto it = m.find(name);
  if (it == m.end())
    throw Error(ErrorKind::kInternal, "schemas/" + std::string(name) + ".schema.json", "",
                "no embedded schema of this name", "add the file under schemas/ and rebuild");
  return it->second;
}

std::vector<SchemaViolation> check_artifact(std::string_view schema_name, const nlohmann::json& instance) {
  return validate_json(artifact_schema(schema_name), instance);
}

void require_valid_artifact(std::string_view schema_name, const nlohmann::json& instance,
                            const std::filesystem::path& file) {
  const auto v = check_artifact(schema_name, instance);
  if (v.empty()) return;
  std::string msg = "does not match schemas/" + std::string(schema_name) + ".schema.json (" +
                    std::to_string(v.size()) + " violation" + (v.size() == 1 ? "" : "s") + "):";
  const size_t shown = std::min<size_t>(v.size(), 8);
  for (size_t i = 0; i < shown; ++i) msg += " " + (v[i].path.empty() ? std::string("/") : v[i].path) + ": " + v[i].message + ";";
  if (v.size() > shown) msg += " ...";
  throw Error(ErrorKind::kInvalidInput, file.string(), "", msg,
              "regenerate the artifact (qloom writes it valid) or fix the listed fields");
}

}  // namespace qloom::agent
