#include "qloom/agent/run_manifest.h"

#include "qloom/agent/artifact_schema.h"
#include "qloom/agent/yaml_json.h"
#include "qloom/build_info.h"
#include "qloom/core/error.h"
#include "qloom/job/algo_config_file.h"
#include "qloom/io/atomic_dir.h"
#include "qloom/io/text_file.h"
#include "qloom/quant/scheme_registry.h"

namespace qloom::agent {
namespace fs = std::filesystem;

namespace {

std::string str(const nlohmann::json& j, const char* key, std::string fallback = {}) {
  if (j.contains(key) && j[key].is_string()) return j[key].get<std::string>();
  return fallback;
}

uint64_t u64(const nlohmann::json& j, const char* key, uint64_t fallback) {
  if (j.contains(key) && j[key].is_number_unsigned()) return j[key].get<uint64_t>();
  return fallback;
}

// --model_export as one string ("hf_format", "hf_format, gguf").
std::string export_formats_text(const std::vector<std::string>& formats) {
  std::string s;
  for (const auto& f : formats) s += (s.empty() ? "" : ", ") + f;
  return s;
}

// What the output directory will hold (job/model_export.h's layout).
nlohmann::ordered_json expected_files(const std::vector<std::string>& formats) {
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  bool primary = false;
  for (const auto& f : formats) {
    if (f == "gguf") {
      files.push_back("<model_type>.gguf (llama.cpp)");
    } else if (!primary) {
      primary = true;
      files.push_back("config.json");
      files.push_back("*.safetensors (+ model.safetensors.index.json when sharded)");
      files.push_back("tokenizer and other non-weight files of the source, byte-identical");
    } else {
      files.push_back(f + "/ (the same model in " + f + ")");
    }
  }
  return files;
}

nlohmann::ordered_json argv_json(const std::vector<std::string>& argv) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const auto& s : argv) a.push_back(s);
  return a;
}

}  // namespace

job::QuantizeCommand command_from_plan(const nlohmann::json& plan, const std::string& model_arg,
                                            const std::string& model_type, bool overwrite) {
  job::QuantizeCommand cmd;
  auto& o = cmd.options;
  o.model_dir = model_arg;
  const std::string out = str(plan, "output_dir");
  if (out.empty()) throw_invalid("quant_plan.json", "output_dir", "the plan has no output directory", "re-run the plan phase");
  o.output_dir = fs::absolute(out).lexically_normal();
  o.quant_scheme = str(plan, "quant_scheme");
  if (o.quant_scheme.empty())
    throw_invalid("quant_plan.json", "quant_scheme", "the plan has no scheme", "answer the plan's open question");
  o.kv_cache_dtype = str(plan, "kv_cache_dtype");
  o.quant_algo = str(plan, "quant_algo");
  o.dataset = str(plan, "dataset");
  if (o.dataset == "c4" || o.dataset == "default") o.dataset.clear();  // the bundled sample is the default
  if (!o.dataset.empty() && fs::exists(o.dataset)) o.dataset = fs::absolute(o.dataset).lexically_normal().string();
  o.num_calib_data = u64(plan, "num_calib_data", o.num_calib_data);
  o.seq_len = u64(plan, "seq_len", o.seq_len);
  if (plan.contains("layer_quant_scheme")) {
    const auto& l = plan["layer_quant_scheme"];
    if (l.is_object())
      for (const auto& [p, s] : l.items()) o.layer_quant_scheme.emplace_back(p, s.get<std::string>());
    else if (l.is_array())
      for (const auto& e : l)
        if (e.is_array() && e.size() == 2) o.layer_quant_scheme.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
  }
  const auto defaults = quant::default_exclude_layers(model_type);
  if (plan.contains("exclude_layers") && plan["exclude_layers"].is_array())
    for (const auto& e : plan["exclude_layers"]) {
      const std::string p = e.get<std::string>();
      if (std::find(defaults.begin(), defaults.end(), p) == defaults.end() &&
          std::find(o.exclude_layers.begin(), o.exclude_layers.end(), p) == o.exclude_layers.end())
        o.exclude_layers.push_back(p);
    }
  if (plan.contains("model_export") && plan["model_export"].is_array() && !plan["model_export"].empty()) {
    o.model_export.clear();
    for (const auto& f : plan["model_export"]) o.model_export.push_back(f.get<std::string>());
  }
  o.overwrite = overwrite;
  cmd.no_trust_remote_code = true;
  cmd.progress = "off";
  return cmd;
}

std::vector<CheckpointRecord> default_checkpoints() {
  return {
      {"intake", "confirm the model analysis (config only, no weights read) before planning", "pending"},
      {"plan", "confirm or adjust every decision of the quantization plan", "pending"},
      {"manifest", "execution gate: approve this exact command before anything is written", "pending"},
      {"result", "accept the verified result (files, validation) or ask for a bounded follow-up", "pending"},
  };
}

nlohmann::ordered_json build_run_manifest(const ManifestInputs& in, const job::QuantizeCommand& cmd,
                                          const std::vector<CheckpointRecord>& checkpoints,
                                          const nlohmann::json& environment, const nlohmann::json& estimates) {
  const auto args = job::quantize_args(cmd);
  std::vector<std::string> argv = {"qloom", "quantize"};
  argv.insert(argv.end(), args.begin(), args.end());
  nlohmann::ordered_json m;
  m["workflow"] = "quark-torch-ptq";
  m["qloom_version"] = build::kVersion;
  m["attempt"] = in.attempt;
  m["inputs"] = {{"model", in.model},
                 {"model_source", in.model_source},
                 {"model_path", in.model_path.string()},
                 {"workspace", in.workspace.string()}};
  // --quant_algo_config_file: what each file held when the command was made,
  // so the run is reproducible and a later edit of the file is caught.
  if (!cmd.options.algo_config_files.empty()) {
    nlohmann::ordered_json files = nlohmann::ordered_json::array();
    for (const auto& f : job::load_algo_config_files(cmd.options.algo_config_files))
      files.push_back({{"algo", f.algo},
                       {"path", fs::absolute(f.path).lexically_normal().string()},
                       {"sha256", f.sha256},
                       {"config", nlohmann::ordered_json(f.config)}});
    m["inputs"]["algo_config_files"] = files;
  }
  m["outputs"] = {{"quantized_model_dir", cmd.options.output_dir.string()},
                  {"format", export_formats_text(cmd.options.model_export)},
                  {"expected_files", expected_files(cmd.options.model_export)}};
  nlohmann::ordered_json cps = nlohmann::ordered_json::array();
  for (const auto& c : checkpoints) cps.push_back({{"id", c.id}, {"reason", c.reason}, {"decision", c.decision}});
  m["checkpoints"] = cps;
  nlohmann::ordered_json steps = nlohmann::ordered_json::array();
  steps.push_back({{"name", "analyze"}, {"produces", "model_analysis.json"}});
  steps.push_back({{"name", "plan"}, {"produces", "quant_plan.json"}});
  steps.push_back({{"name", "generate"}, {"produces", "run_manifest.yaml"}});
  m["steps"] = steps;
  m["run"] = {{"command", argv_json(argv)},
              {"command_line", job::shell_join(argv)},
              {"expected_output_dir", cmd.options.output_dir.string()},
              {"remote_code", "never executed (qloom runs no model code; --no_trust_remote_code)"},
              {"status", "pending"},
              {"observed", nullptr}};
  m["environment"] = environment.is_null() ? nlohmann::ordered_json::object() : nlohmann::ordered_json(environment);
  m["estimates"] = estimates.is_null() ? nlohmann::ordered_json::object() : nlohmann::ordered_json(estimates);
  return m;
}

std::vector<std::string> manifest_quantize_args(const nlohmann::json& manifest) {
  const auto& cmd = manifest.at("run").at("command");
  std::vector<std::string> argv;
  for (const auto& w : cmd) argv.push_back(w.get<std::string>());
  if (argv.size() < 2 || argv[0] != "qloom" || argv[1] != "quantize")
    throw_invalid("run_manifest.yaml", "run.command", "does not start with 'qloom quantize'", "regenerate the manifest");
  return {argv.begin() + 2, argv.end()};
}

void check_algo_config_files(const nlohmann::json& manifest) {
  const auto& in = manifest.at("inputs");
  if (!in.contains("algo_config_files")) return;
  for (const auto& rec : in["algo_config_files"]) {
    const std::string path = rec.at("path").get<std::string>();
    const std::string want = rec.at("sha256").get<std::string>();
    const std::string got = job::sha256_hex(io::read_text_file(path));
    if (got != want)
      throw Error(ErrorKind::kInvalidInput, path, "inputs.algo_config_files",
                  "the --quant_algo_config_file changed since the manifest was written (sha256 " + got +
                      ", recorded " + want + ")",
                  "restore the file (run_manifest.yaml holds its recorded content) or start a new run");
  }
}

void update_run_status(nlohmann::ordered_json& manifest, const std::vector<std::string>& recorded_command,
                       const std::string& status, const nlohmann::ordered_json& observed) {
  if (manifest_quantize_args(manifest) != recorded_command)
    throw Error(ErrorKind::kInternal, "run_manifest.yaml", "run.command", "the command differs from the approved one",
                "a bug: the manifest's command must never change after approval");
  manifest["run"]["status"] = status;
  manifest["run"]["observed"] = observed;
}

void set_checkpoint_decision(nlohmann::ordered_json& manifest, const std::string& id, const std::string& decision) {
  for (auto& c : manifest["checkpoints"])
    if (c["id"] == id) c["decision"] = decision;
}

void write_run_manifest(const fs::path& workspace, const nlohmann::ordered_json& manifest) {
  const fs::path p = workspace / "run_manifest.yaml";
  require_valid_artifact("run_manifest", nlohmann::json(manifest), p);
  io::write_file_atomic(p, "# qloom run manifest (seed 003 Step 3): the exact command the exec phase runs.\n" +
                               json_to_yaml(manifest));
}

nlohmann::ordered_json read_run_manifest(const fs::path& workspace) {
  const fs::path p = workspace / "run_manifest.yaml";
  const auto j = yaml_to_json(io::read_text_file(p), p.string());
  require_valid_artifact("run_manifest", nlohmann::json(j), p);
  return j;
}

}  // namespace qloom::agent
