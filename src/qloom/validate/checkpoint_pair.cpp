#include "qloom/validate/checkpoint_pair.h"

#include <system_error>

#include "qloom/core/error.h"
#include "qloom/model/config_check.h"
#include "qloom/quant/rotation.h"

namespace qloom::validate {

namespace fs = std::filesystem;

struct CheckpointPair::Impl {
  fs::path source_dir, quantized_dir;
  std::optional<io::ModelDir> source, quantized;
  std::unique_ptr<quant::ScratchDir> rotated_scratch;
  std::optional<io::ModelDir> rotated;  // the source rotated as the checkpoint says
  std::string quantized_error;
  // Set when the quantized config is unusable and the weights were opened
  // directly.
  std::unique_ptr<io::WeightIndex> quantized_weights_direct;
  const io::WeightIndex* source_weights = nullptr;
  const io::WeightIndex* quantized_weights = nullptr;
  std::string source_weights_error, quantized_weights_error;
};

CheckpointPair::CheckpointPair(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CheckpointPair::CheckpointPair(CheckpointPair&&) noexcept = default;
CheckpointPair& CheckpointPair::operator=(CheckpointPair&&) noexcept = default;
CheckpointPair::~CheckpointPair() = default;

std::string describe_error(const std::exception& e) {
  // qloom::Error's what() already reads "file: item: message — remedy".
  return e.what();
}

namespace {

// The "rotation" entry of the quantized config's algo_config, or null.
nlohmann::json rotation_entry(const io::ModelDir& quantized) {
  const nlohmann::json& c = quantized.config();
  if (!c.contains("quantization_config") || !c["quantization_config"].is_object()) return nullptr;
  const nlohmann::json& qc = c["quantization_config"];
  if (!qc.contains("algo_config") || !qc["algo_config"].is_array()) return nullptr;
  for (const auto& a : qc["algo_config"])
    if (a.is_object() && a.value("name", "") == "rotation") return a;
  return nullptr;
}

}  // namespace

void rotate_source(CheckpointPair::Impl& impl) {
  const nlohmann::json entry = rotation_entry(*impl.quantized);
  if (entry.is_null()) return;
  quant::ModelRotation rotation(*impl.source, quant::RotationConfig::from_json(entry, impl.source->model_type()));
  impl.rotated_scratch = std::make_unique<quant::ScratchDir>("qloom-validate-rotated");
  const fs::path dir = impl.rotated_scratch->path() / "model";
  quant::write_rotated_model(rotation, dir, 0);
  impl.rotated.emplace(io::ModelDir::open(dir));
  impl.source_weights = &impl.rotated->weights();
}

CheckpointPair CheckpointPair::open(const fs::path& source, const fs::path& quantized) {
  auto impl = std::make_unique<Impl>();
  impl->source_dir = source;
  impl->quantized_dir = quantized;

  std::error_code ec;
  const auto st = fs::status(quantized, ec);
  if (!fs::exists(st))
    throw_not_found(quantized.string(), "", "quantized model directory does not exist",
                    "pass the output directory of the quantize run");
  if (!fs::is_directory(st))
    throw_invalid(quantized.string(), "", "quantized model path is not a directory",
                  "pass the output directory of the quantize run, not a file in it");

  if (!source.empty()) {
    impl->source.emplace(io::ModelDir::open(source));  // throws: bad input
    try {
      impl->source_weights = &impl->source->weights();
    } catch (const std::exception& e) {
      impl->source_weights_error = describe_error(e);
    }
    // The values next, as every command checks them (after the sizes against the tensors, reported above).
    if (impl->source_weights) model::validate_config(impl->source->config(), (source / "config.json").string());
  }

  try {
    impl->quantized.emplace(io::ModelDir::open(quantized));
    model::validate_config(impl->quantized->config(), (quantized / "config.json").string());
  } catch (const std::exception& e) {
    impl->quantized_error = describe_error(e);
  }
  try {
    if (impl->quantized) {
      impl->quantized_weights = &impl->quantized->weights();
    } else {
      impl->quantized_weights_direct =
          std::make_unique<io::WeightIndex>(io::WeightIndex::open(quantized));
      impl->quantized_weights = impl->quantized_weights_direct.get();
    }
  } catch (const std::exception& e) {
    impl->quantized_weights_error = describe_error(e);
  }
  if (impl->source && impl->quantized && impl->source_weights) {
    try {
      rotate_source(*impl);
    } catch (const std::exception& e) {
      impl->source_weights = nullptr;
      impl->source_weights_error = "cannot reproduce the checkpoint's rotation of the source: " + describe_error(e);
    }
  }
  return CheckpointPair(std::move(impl));
}

const fs::path& CheckpointPair::source_dir() const { return impl_->source_dir; }
const fs::path& CheckpointPair::quantized_dir() const { return impl_->quantized_dir; }
const io::ModelDir* CheckpointPair::source() const {
  return impl_->source ? &*impl_->source : nullptr;
}
const io::ModelDir* CheckpointPair::weights_source() const {
  if (impl_->rotated) return &*impl_->rotated;
  if (!impl_->source_weights_error.empty()) return nullptr;
  return source();
}
const io::ModelDir* CheckpointPair::quantized() const {
  return impl_->quantized ? &*impl_->quantized : nullptr;
}
const std::string& CheckpointPair::quantized_error() const { return impl_->quantized_error; }
const io::WeightIndex* CheckpointPair::source_weights() const { return impl_->source_weights; }
const std::string& CheckpointPair::source_weights_error() const {
  return impl_->source_weights_error;
}
const io::WeightIndex* CheckpointPair::quantized_weights() const {
  return impl_->quantized_weights;
}
const std::string& CheckpointPair::quantized_weights_error() const {
  return impl_->quantized_weights_error;
}

}  // namespace qloom::validate
