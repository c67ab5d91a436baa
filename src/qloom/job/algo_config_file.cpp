#include "qloom/job/algo_config_file.h"

#include <openssl/evp.h>

#include <algorithm>
#include <map>
#include <memory>

#include "qloom/core/error.h"
#include "qloom/job/quantize_job.h"
#include "qloom/io/text_file.h"
#include "qloom/quant/algorithm_registry.h"

namespace qloom::job {
namespace {

// A stage parser's error (file "", item "algo_config.gptq.<key>") restated
// with the config file it came from.
[[noreturn]] void rethrow_naming(const Error& e, const std::string& file) {
  if (!e.file().empty() || file.empty()) throw e;
  throw Error(e.kind(), file, e.item(), e.message(), e.remedy());
}

}  // namespace

std::string sha256_hex(const std::string& bytes) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), bytes.data(), bytes.size()) != 1 || EVP_DigestFinal_ex(ctx.get(), d, &n) != 1)
    throw Error(ErrorKind::kInternal, "", "sha256", "OpenSSL's SHA-256 failed", "check the OpenSSL installation");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < n; ++i) {
    out += hex[d[i] >> 4];
    out += hex[d[i] & 15];
  }
  return out;
}

std::vector<AlgoConfigFile> load_algo_config_files(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<AlgoConfigFile> out;
  for (const auto& [algo, path] : files) {
    for (const auto& f : out)
      if (f.algo == algo)
        throw Error(ErrorKind::kUsage, path, "--quant_algo_config_file",
                    "a second config file for '" + algo + "' (the first: " + f.path.string() + ")",
                    "give one --quant_algo_config_file per algorithm");
    AlgoConfigFile f;
    f.algo = algo;
    f.path = path;
    const std::string bytes = io::read_text_file(path);  // kNotFound names the file
    f.sha256 = sha256_hex(bytes);
    try {
      f.config = nlohmann::json::parse(bytes);
    } catch (const nlohmann::json::exception& e) {
      throw Error(ErrorKind::kInvalidInput, path, "--quant_algo_config_file " + algo,
                  std::string("not valid JSON: ") + e.what(),
                  "write one JSON object in Quark's form, e.g. {\"name\": \"" + algo + "\", ...}");
    }
    if (!f.config.is_object())
      throw Error(ErrorKind::kInvalidInput, path, "--quant_algo_config_file " + algo,
                  std::string("the config must be a JSON object, got ") + f.config.type_name(),
                  "write one JSON object in Quark's form, e.g. {\"name\": \"" + algo + "\", ...}");
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<std::unique_ptr<quant::AlgorithmStage>> build_algorithm_stages(const QuantizeOptions& o,
                                                                           const std::string& model_type,
                                                                           std::vector<AlgoConfigFile>* loaded) {
  const std::vector<std::string> algos =
      o.quant_algo.empty() ? std::vector<std::string>{} : quant::split_quant_algo(o.quant_algo);
  auto runs = [&](const std::string& name) { return std::find(algos.begin(), algos.end(), name) != algos.end(); };
  const std::vector<AlgoConfigFile> files = load_algo_config_files(o.algo_config_files);
  for (const auto& f : files)
    if (!runs(f.algo))
      throw Error(ErrorKind::kUsage, f.path.string(), "--quant_algo_config_file",
                  "a config file is given for '" + f.algo + "', which --quant_algo does not run" +
                      (o.quant_algo.empty() ? std::string(" (no --quant_algo)") : " (--quant_algo " + o.quant_algo + ")"),
                  "add " + f.algo + " to --quant_algo or drop its config file");
  for (const auto& [name, text] : o.algo_configs) {
    if (!runs(name))
      throw Error(ErrorKind::kUsage, "", "algo_config." + name,
                  "a config is given for '" + name + "', which --quant_algo does not run",
                  "add it to --quant_algo or drop its config");
    for (const auto& f : files)
      if (f.algo == name)
        throw Error(ErrorKind::kUsage, f.path.string(), "algo_config." + name,
                    "'" + name + "' has both a config file and an inline config", "give one of them");
  }
  std::vector<std::unique_ptr<quant::AlgorithmStage>> stages;
  for (const auto& name : algos) {
    nlohmann::json cfg = nullptr;
    std::string source;
    if (auto it = o.algo_configs.find(name); it != o.algo_configs.end()) {
      try {
        cfg = nlohmann::json::parse(it->second);
      } catch (const nlohmann::json::exception& e) {
        throw Error(ErrorKind::kUsage, "", "algo_config." + name, std::string("not valid JSON: ") + e.what(),
                    "give a JSON object, e.g. {\"alpha\": 0.5}");
      }
    }
    for (const auto& f : files)
      if (f.algo == name) cfg = f.config, source = f.path.string();
    try {
      stages.push_back(quant::make_algorithm_stage(name, cfg, model_type));
    } catch (const Error& e) {
      rethrow_naming(e, source);
    }
  }
  if (loaded != nullptr) *loaded = files;
  return stages;
}

}  // namespace qloom::job
