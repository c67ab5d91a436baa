#include "qloom/io/model_dir.h"
#include "qloom/io/config_sizes.h"


#include <algorithm>
#include <array>
#include <cerrno>
#include <limits>
#include <mutex>
#include <system_error>

#include "qloom/core/error.h"
#include "qloom/io/json_read.h"

namespace qloom::io {
namespace fs = std::filesystem;

namespace {

constexpr std::array<std::string_view, 11> kTokenizerNames = {
    "tokenizer.json",     "tokenizer.model",   "tokenizer_config.json", "special_tokens_map.json",
    "vocab.json",         "merges.txt",        "added_tokens.json",     "vocab.txt",
    "spiece.model",       "chat_template.jinja", "chat_template.json"};

// A file with one of `exts`, or its "<ext>.index.json" shard index.
bool has_weight_ext(std::string_view n, std::initializer_list<std::string_view> exts) {
  for (std::string_view ext : exts) {
    if (n.ends_with(ext)) return true;
    if (n.ends_with(std::string(ext) + ".index.json")) return true;
  }
  return false;
}

// Looks `key` up in a JSON object; nullptr when absent or not an object.
const nlohmann::json* lookup(const nlohmann::json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

nlohmann::json read_json_object(const fs::path& file, const char* what) {
  JsonReadOptions opts;
  // Python's json module (what transformers uses) keeps the last of repeated
  // keys; refusing them would reject models that load elsewhere.
  opts.reject_duplicate_keys = false;
  opts.remedy = std::string("fix or re-download ") + what;
  nlohmann::json j = read_json_file(file, opts);
  if (!j.is_object())
    throw_invalid(file.string(), "", std::string(what) + " must hold a JSON object",
                  opts.remedy);
  return j;
}

}  // namespace

bool is_safetensors_weight_file(std::string_view n) {
  return n.ends_with(".safetensors") || n.ends_with(".safetensors.index.json");
}

bool is_pickle_weight_file(std::string_view n) {
  return has_weight_ext(n, {".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle"});
}

bool is_other_weight_file(std::string_view n) {
  return has_weight_ext(n, {".h5", ".msgpack", ".gguf", ".onnx", ".ot", ".tflite", ".keras"});
}

bool is_tokenizer_file(std::string_view n) {
  return std::find(kTokenizerNames.begin(), kTokenizerNames.end(), n) != kTokenizerNames.end();
}

struct ModelDir::Impl {
  fs::path dir;
  nlohmann::json config;
  std::optional<nlohmann::json> generation_config;
  std::vector<fs::path> weight_files, tokenizer_files, pickle_files, other_weight_files,
      aux_files, other_files;

  std::mutex weights_mu;
  std::unique_ptr<WeightIndex> weights;
};

ModelDir::ModelDir(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ModelDir::ModelDir(ModelDir&&) noexcept = default;
ModelDir& ModelDir::operator=(ModelDir&&) noexcept = default;
ModelDir::~ModelDir() = default;

ModelDir ModelDir::open(const fs::path& dir, bool open_weights) {
  const std::string label = dir.string();
  std::error_code ec;
  const auto st = fs::status(dir, ec);
  if (!fs::exists(st)) {
    if (ec && ec.value() != ENOENT && ec.value() != ENOTDIR)
      throw_errno(ec.value(), label, "stat", /*writing=*/false);
    throw_not_found(label, "", "model directory does not exist",
                    "check the path, or download the model first");
  }
  if (!fs::is_directory(st))
    throw_invalid(label, "", "is not a directory",
                  "pass the model directory (the one holding config.json), not a file in it");

  auto impl = std::make_unique<Impl>();
  impl->dir = dir;

  // List the top level first: this is also the readability check.
  {
    fs::directory_iterator it(dir, ec);
    if (ec) {
      if (ec.value() == EACCES || ec.value() == EPERM)
        throw_invalid(label, "", "permission denied reading the model directory",
                      "make the directory readable (and searchable) by this user");
      throw_errno(ec.value(), label, "listing the model directory", false);
    }
    for (; it != fs::directory_iterator(); it.increment(ec)) {
      const std::string name = it->path().filename().string();
      std::error_code ec2;
      if (!it->is_regular_file(ec2)) continue;  // dirs, dangling links, sockets...
      if (is_safetensors_weight_file(name)) impl->weight_files.push_back(name);
      else if (is_pickle_weight_file(name)) impl->pickle_files.push_back(name);
      else if (is_other_weight_file(name)) impl->other_weight_files.push_back(name);
      else {
        impl->aux_files.push_back(name);
        if (is_tokenizer_file(name)) impl->tokenizer_files.push_back(name);
        else if (name != "config.json" && name != "generation_config.json")
          impl->other_files.push_back(name);
      }
    }
    if (ec) throw_errno(ec.value(), label, "listing the model directory", false);
  }
  for (auto* v : {&impl->weight_files, &impl->tokenizer_files, &impl->pickle_files,
                  &impl->other_weight_files, &impl->aux_files, &impl->other_files})
    std::sort(v->begin(), v->end());

  const fs::path cfg = dir / "config.json";
  if (!fs::exists(fs::status(cfg, ec)))
    throw_not_found(label, "config.json",
                    "not a HuggingFace model directory: config.json missing",
                    "pass the directory that holds the model's config.json and weights");
  impl->config = read_json_object(cfg, "config.json");

  const fs::path gen = dir / "generation_config.json";
  if (fs::exists(fs::symlink_status(gen, ec)))
    impl->generation_config = read_json_object(gen, "generation_config.json");

  ModelDir md(std::move(impl));
  if (open_weights) (void)md.weights();
  return md;
}

const fs::path& ModelDir::path() const { return impl_->dir; }
const nlohmann::json& ModelDir::config() const { return impl_->config; }
const std::optional<nlohmann::json>& ModelDir::generation_config() const {
  return impl_->generation_config;
}

const WeightIndex& ModelDir::weights() const {
  std::lock_guard<std::mutex> lock(impl_->weights_mu);
  if (!impl_->weights) {
    auto w = std::make_unique<WeightIndex>(WeightIndex::open(impl_->dir));
    // Size fields against the tensors, before any caller loops over them;
    // a mismatch throws here on every call (the index is not kept). A
    // quantized checkpoint is left to the validator, which reports its
    // differences from the source tensor by tensor (the engine checks it
    // itself before running it).
    if (!impl_->config.contains("quantization_config"))
      check_config_sizes(impl_->config, *w, (impl_->dir / "config.json").string());
    impl_->weights = std::move(w);
  }
  return *impl_->weights;
}

bool ModelDir::weights_opened() const {
  std::lock_guard<std::mutex> lock(impl_->weights_mu);
  return impl_->weights != nullptr;
}

const std::vector<fs::path>& ModelDir::weight_files() const { return impl_->weight_files; }
const std::vector<fs::path>& ModelDir::tokenizer_files() const {
  return impl_->tokenizer_files;
}
const std::vector<fs::path>& ModelDir::pickle_weight_files() const {
  return impl_->pickle_files;
}
const std::vector<fs::path>& ModelDir::other_weight_files() const {
  return impl_->other_weight_files;
}
const std::vector<fs::path>& ModelDir::aux_files() const { return impl_->aux_files; }
const std::vector<fs::path>& ModelDir::other_files() const { return impl_->other_files; }

std::string ModelDir::model_type() const {
  const auto* v = lookup(impl_->config, "model_type");
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

std::vector<std::string> ModelDir::architectures() const {
  std::vector<std::string> out;
  const auto* v = lookup(impl_->config, "architectures");
  if (v && v->is_array())
    for (const auto& a : *v)
      if (a.is_string()) out.push_back(a.get<std::string>());
  return out;
}

const nlohmann::json* ModelDir::config_value(std::string_view key) const {
  if (const auto* v = lookup(impl_->config, key)) return v;
  if (const auto* tc = lookup(impl_->config, "text_config")) return lookup(*tc, key);
  return nullptr;
}

std::optional<int64_t> ModelDir::config_int(std::string_view key) const {
  // Top level first; a null or non-integer there falls through to text_config.
  auto as_int = [](const nlohmann::json* v) -> std::optional<int64_t> {
    if (v == nullptr) return std::nullopt;
    if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return static_cast<int64_t>(u);
    }
    if (v->is_number_integer()) return v->get<int64_t>();
    return std::nullopt;
  };
  if (auto r = as_int(lookup(impl_->config, key))) return r;
  if (const auto* tc = lookup(impl_->config, "text_config")) return as_int(lookup(*tc, key));
  return std::nullopt;
}

}  // namespace qloom::io
