// Bundled data sets (data/datasets/... in the source tree: evaluation text,
// gsm8k, the default calibration sample). Search order for a relative path:
//   1. $QLOOM_DATA_DIR/<relative>
//   2. <source tree>/data/<relative> (compiled in as QLOOM_BUNDLED_DATA_DIR)
//   3. <directory of the running executable>/../share/qloom/data/<relative>
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>

namespace qloom::io {

std::optional<std::filesystem::path> find_bundled_data(std::string_view relative);

// As find_bundled_data, but a missing file throws Error(kNotFound) naming
// `what` (e.g. "the wikitext-2 test split"), every path tried, and how to
// supply the file (--dataset PATH or QLOOM_DATA_DIR).
std::filesystem::path require_bundled_data(std::string_view relative, std::string_view what);

}  // namespace qloom::io
