// TEMPORARY stub so the library links while the forward pass is written; the
// forward-pass work deletes this file.
#include "qloom/core/error.h"
#include "qloom/engine/model.h"

namespace qloom::engine {

std::unique_ptr<Model> Model::load(const std::filesystem::path&, const LoadOptions&, const WeightSource*) {
  throw Error(ErrorKind::kUnsupported, "", "", "engine not implemented yet");
}
ModelConfig ModelConfig::parse(const nlohmann::json&, const std::string&) {
  throw Error(ErrorKind::kUnsupported, "", "", "engine not implemented yet");
}
std::unique_ptr<WeightSource> plain_weight_source(const io::ModelDir&) {
  throw Error(ErrorKind::kUnsupported, "", "", "engine not implemented yet");
}

}  // namespace qloom::engine
