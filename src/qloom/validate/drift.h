// Benign metadata drift: what a newer transformers changes when it re-saves a
// model's config.json and tokenizer files without changing what they mean.
// Steps 1 and 3 compare those files semantically: a difference that one of
// the rules below explains is reported as benign drift (the step stays ok and
// lists it); any other difference is a real change and fails the step.
//
// config.json (compare_configs):
//  - renamed     the same setting in another spelling: torch_dtype <-> dtype;
//                top-level rope_theta (+ rope_scaling, partial_rotary_factor)
//                <-> rope_parameters {rope_theta, rope_type, ...} (4.x vs 5.x;
//                a missing theta is the architecture's default, a missing
//                type is "default", "type" is "rope_type"). The forms are
//                only normalised when the two sides use different ones.
//  - default     a key on one side only whose value equals transformers'
//                default for that key and architecture (config_defaults.cpp),
//                i.e. what loading the side without it gives.
//  - metadata    transformers_version, _name_or_path, _commit_hash: any value.
// tokenizer_config.json and the other JSON auxiliary files
// (compare_json_files): equal as JSON values (key order, formatting, number
// spelling) is re-serialised; for tokenizer_config.json also one-sided keys
// with their default values, AddedToken objects vs plain strings, the
// added_tokens_decoder entries with their default flags, a slow/fast class
// name pair, and add_bos_token / add_eos_token / legacy / added_tokens_decoder
// dropped while both sides hold the same tokenizer.json (transformers 5 reads
// them from it).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qloom::validate {

struct DriftItem {
  std::string key;   // "dtype", "rope_parameters", "pad_token_id", "added_tokens_decoder.0"
  std::string kind;  // "renamed", "default", "metadata", "reserialised", "superseded", "equivalent"
  std::optional<nlohmann::json> source;     // the source's form (absent: nullopt)
  std::optional<nlohmann::json> quantized;  // the quantized side's form
  std::string note;  // why it is benign, one clause
};

// A real difference: `path` (dotted, [i] for array elements) and each side's
// value, nullopt where the key is absent.
struct RealDifference {
  std::string path;
  std::optional<nlohmann::json> source;
  std::optional<nlohmann::json> quantized;
};

struct Comparison {
  std::vector<RealDifference> real;
  std::vector<DriftItem> drift;
};

// Every difference between two JSON values, key by key (numbers by value, so
// 10000 equals 10000.0; true is not 1). `path` prefixes the reported paths.
std::vector<RealDifference> json_differences(const nlohmann::json& a, const nlohmann::json& b,
                                             const std::string& path = "");

// config.json of the source and of the quantized model, both without
// quantization_config.
Comparison compare_configs(const nlohmann::json& source, const nlohmann::json& quantized);

// An auxiliary JSON file (by its file name) on both sides.
// `same_tokenizer_json`: both directories hold a tokenizer.json and they are
// equal as JSON values.
Comparison compare_json_files(const std::string& name, const nlohmann::json& source,
                              const nlohmann::json& quantized, bool same_tokenizer_json);

// transformers' default for `key` in a config of `model_type`, evaluated
// against `config` for derived defaults (head_dim = hidden_size /
// num_attention_heads, ...). nullopt when qloom's table has no default for it.
std::optional<nlohmann::json> config_default(const std::string& model_type,
                                             const std::string& key,
                                             const nlohmann::json& config);

// The RoPE base transformers assumes when a config of `model_type` names none;
// nullopt for an architecture outside the table.
std::optional<double> default_rope_theta(const std::string& model_type);

// "key: old → new (note)" for a report line; values on one line, cut.
std::string drift_line(const DriftItem& d);
// {"key", "kind", "source", "quantized", "note"} (absent sides omitted).
nlohmann::ordered_json drift_json(const DriftItem& d);

}  // namespace qloom::validate
