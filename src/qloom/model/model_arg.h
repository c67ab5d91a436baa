// A model argument as users give it to any command (CLI, Python package): a
// local directory, a Hugging Face Hub id `org/name[@revision]` (io/hub.h), or
// a `.gguf` file, which resolves to its converted copy in the GGUF cache
// (model/gguf_convert.h: made on the first use). A local path always wins.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>

#include "qloom/io/hub.h"

namespace qloom::model {

// The directory to open for `spec`; `fetch` says what a hub id downloads.
// Notes and download progress go to `log` (a terminal gets live progress).
// Throws io::HubError (a qloom::Error) when a hub id cannot be resolved.
std::filesystem::path resolve_model_arg(const std::string& spec, io::HubFetch fetch, std::ostream* log);

}  // namespace qloom::model
