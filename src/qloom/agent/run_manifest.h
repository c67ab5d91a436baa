// run_manifest.yaml (seed 003 Step 3): the exact `qloom quantize` command the
// exec phase runs, with its inputs, expected outputs, the four checkpoints and
// their reasons, the analyze / plan / generate / run steps, the environment
// and resource estimates. Built and validated as JSON
// (schemas/run_manifest.schema.json), stored as YAML (yaml_json.h).
// After execution only run.status and run.observed change; the command is
// never rewritten (update_run_status checks it).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/job/quantize_args.h"

namespace qloom::agent {

struct CheckpointRecord {
  std::string id;        // intake | plan | manifest | result
  std::string reason;    // why the stop exists (seed 003)
  std::string decision;  // "pending" | "accepted" | "auto-accepted" | "changed: <text>" | "declined"
};

struct ManifestInputs {
  std::string model;                   // as the prompt named it (hub id, path, "demo")
  std::string model_source;            // local | hub | demo
  std::filesystem::path model_path;    // the directory read (absolute; for hub ids: the snapshot)
  std::filesystem::path workspace;     // absolute
  int attempt = 1;
};

// The command for a plan (quant_plan.json's resolved fields): model and
// output paths absolute, the model type's default exclusions left to qloom
// quantize (only extra patterns are passed), --no_trust_remote_code always.
job::QuantizeCommand command_from_plan(const nlohmann::json& plan, const std::string& model_arg,
                                            const std::string& model_type, bool overwrite);

// The four checkpoints with their reasons, decisions pending.
std::vector<CheckpointRecord> default_checkpoints();

nlohmann::ordered_json build_run_manifest(const ManifestInputs& in, const job::QuantizeCommand& cmd,
                                          const std::vector<CheckpointRecord>& checkpoints,
                                          const nlohmann::json& environment, const nlohmann::json& estimates);

// The run step's argument array after `qloom quantize`.
std::vector<std::string> manifest_quantize_args(const nlohmann::json& manifest);

// inputs.algo_config_files (present when the command has
// --quant_algo_config_file): each file's sha256 now against the recorded one;
// throws kInvalidInput naming a file that changed since the manifest.
void check_algo_config_files(const nlohmann::json& manifest);

// Sets run.status ("succeeded" | "failed") and run.observed; the checkpoint
// decisions may be updated too. Throws Error(kInternal) if `manifest`'s
// command differs from `recorded_command` (the one approved).
void update_run_status(nlohmann::ordered_json& manifest, const std::vector<std::string>& recorded_command,
                       const std::string& status, const nlohmann::ordered_json& observed);
void set_checkpoint_decision(nlohmann::ordered_json& manifest, const std::string& id, const std::string& decision);

// Writes / reads <workspace>/run_manifest.yaml (validated both ways).
void write_run_manifest(const std::filesystem::path& workspace, const nlohmann::ordered_json& manifest);
nlohmann::ordered_json read_run_manifest(const std::filesystem::path& workspace);

}  // namespace qloom::agent
