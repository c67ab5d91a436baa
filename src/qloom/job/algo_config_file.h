// `--quant_algo_config_file ALGO FILE` (Quark's quantize_quark.py: argparse
// action="append", nargs=2, metavar ALGO_NAME CONFIG_FILE; each file is read
// by Quark's load_quant_algo_config_from_file into algo_configs[ALGO]):
// a JSON object in Quark's form for one --quant_algo name, e.g.
//   {"name": "gptq", "damp_percent": 0.05, "desc_act": false, "static_groups": false}
// handed to the stage's strict parser (gptq_stage.h, awq_stage.h,
// smoothquant_stage.h), which fills the keys the file omits with Quark's
// per-model defaults and refuses unknown keys. Repeatable, one file per
// algorithm. The file's bytes are hashed (sha256) so a run records exactly
// which config it used; the parsed dict as the stage understood it is what
// quantization_config.algo_config holds.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/quant/algorithm_stage.h"

namespace qloom::job {

struct QuantizeOptions;

struct AlgoConfigFile {
  std::string algo;            // the ALGO given with the file ("gptq")
  std::filesystem::path path;  // as given
  std::string sha256;          // of the file's bytes, lowercase hex
  nlohmann::json config;       // the parsed object
};

// Reads and parses every (ALGO, FILE) pair. Throws qloom::Error naming the
// file: kNotFound (missing), kInvalidInput (not JSON, or not an object, with
// the parser's position), kUsage (an algorithm given twice).
std::vector<AlgoConfigFile> load_algo_config_files(
    const std::vector<std::pair<std::string, std::string>>& files);

// Lowercase hex sha256 of `bytes`.
std::string sha256_hex(const std::string& bytes);

// The stages of o.quant_algo in order, each configured from its
// --quant_algo_config_file, else its o.algo_configs JSON text, else its
// defaults for `model_type`. A config for a name --quant_algo does not run,
// or two configs for one name, is kUsage. A stage's strict parser error
// (unknown key, bad value) is rethrown naming the config file it came from.
// `loaded` (optional) receives the files read.
std::vector<std::unique_ptr<quant::AlgorithmStage>> build_algorithm_stages(const QuantizeOptions& o,
                                                                           const std::string& model_type,
                                                                           std::vector<AlgoConfigFile>* loaded = nullptr);

}  // namespace qloom::job
