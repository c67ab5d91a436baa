// Bundled files: the data sets (data/datasets/...: evaluation text, gsm8k,
// the default calibration sample) and the demo model (models/...), located
// relative to the running program so that an installed or copied qloom does
// not depend on the tree it was built in.
//
// Data roots, in search order:
//   1. $QLOOM_DATA_DIR (when set)
//   2. <directory of the executable>/../share/qloom/data — an installed tree
//      (`cmake --install build --prefix P` puts bin/qloom and share/qloom/)
//   3. <source tree>/data — only when the executable lies inside the build
//      tree it was built in (build/qloom, build/tests/...): the fallback for
//      running uninstalled; an installed or copied binary never sees it.
// Model roots: the same without the environment variable, with
// share/qloom/models and <source tree>/models ($QLOOM_DEMO_MODEL overrides
// the demo model itself: agent/workflow.h).
// A program that embeds the library where the executable says nothing about
// the bundle (the Python module: the interpreter is the executable) names its
// share/qloom directory with set_bundle_base(); it is searched after
// $QLOOM_DATA_DIR and before the executable's.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

namespace qloom::io {

enum class BundleKind { kData, kModels };

// The roots for an executable at `exe` (absolute), in search order, with
// `env_data_dir` ("" = unset) as $QLOOM_DATA_DIR. The build-tree fallback is
// included when `exe` is inside `build_dir` (both compared canonically);
// empty build_dir / source_dir mean no fallback.
std::vector<std::filesystem::path> bundle_roots_for(BundleKind kind, const std::filesystem::path& exe,
                                                    std::string_view env_data_dir,
                                                    const std::filesystem::path& build_dir,
                                                    const std::filesystem::path& source_dir);

// The share/qloom directory of an embedding program (holding data/ and
// models/); empty: none (the default). Thread-safe; applies to later lookups.
void set_bundle_base(const std::filesystem::path& share_qloom_dir);
std::filesystem::path bundle_base();

// The roots for this process: /proc/self/exe, $QLOOM_DATA_DIR, and the build
// and source directories compiled in.
std::vector<std::filesystem::path> bundle_roots(BundleKind kind);

// Every path tried for `relative` (under data roots), in order.
std::vector<std::filesystem::path> bundled_data_candidates(std::string_view relative);

std::optional<std::filesystem::path> find_bundled_data(std::string_view relative);

// As find_bundled_data, but a missing file throws Error(kNotFound) naming
// `what` (e.g. "the wikitext-2 test split"), every path tried, and how to
// supply the file (--dataset PATH or QLOOM_DATA_DIR).
std::filesystem::path require_bundled_data(std::string_view relative, std::string_view what);

// A bundled model directory (e.g. "stories260K-hf-bf16") under the model
// roots; nullopt when none has it. `tried` (optional) receives every path
// looked at.
std::optional<std::filesystem::path> find_bundled_model(std::string_view name,
                                                        std::vector<std::filesystem::path>* tried = nullptr);

}  // namespace qloom::io
