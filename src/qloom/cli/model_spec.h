// Model arguments of the CLI commands: a local directory, or a Hugging Face
// Hub id `org/name[@revision]` resolved to a snapshot of the huggingface_hub
// cache (io/hub.h; download progress on stderr). A local path always wins.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "qloom/io/hub.h"

namespace qloom::io {
class ModelDir;
}

namespace qloom::cli {

// The directory to open for `spec`; `fetch` says what a hub id downloads. A
// `.gguf` file resolves to its converted copy (model/gguf_convert.h: made on
// the first use, notes on stderr).
// Throws io::HubError (a qloom::Error) when a hub id cannot be resolved.
std::string resolve_model_arg(const std::string& spec, io::HubFetch fetch);

// `qloom inspect` of a hub snapshot that holds config.json but no weights
// yet: the config facts only, then a line saying the weights were not
// downloaded. Text and JSON ({"config_only": true, ...}).
std::string format_config_only(const io::ModelDir& dir);
nlohmann::ordered_json config_only_json(const io::ModelDir& dir);

}  // namespace qloom::cli
