// The real tier's shared artifacts: a quantized SmolLM2 checkpoint (or an
// eval result) is computed once per build of qloom and read by every test
// that asks for the same command. The cache lives in the build dir
// (QLOOM_BINARY_DIR/real/artifacts/<binary id>), keyed by the command's
// arguments and the qloom binary (its size and modification time):
// rebuilding qloom starts a fresh set, and the first test process of the new
// build removes the old one. Concurrent test processes (ctest -j) wait on a per-key lock
// instead of computing the same artifact twice; an artifact is published by
// renaming a finished temp dir, so a half-written one is never read.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qloom::test {

// The cache directory for `args` (created by `make`, which receives the
// directory to fill and returns true on success). Returns an empty path when
// `make` failed: nothing is published and the next caller tries again.
template <typename Make>
std::filesystem::path cached_artifact(const std::string& kind, const std::vector<std::string>& args, Make make);

// `qloom quantize --model_dir <real model> --output_dir <cached> <args...>`,
// once per build; the checkpoint's path, or an empty path (with a recorded
// test failure naming stderr) when quantize failed.
std::filesystem::path shared_checkpoint(const std::vector<std::string>& quantize_args);

// `qloom <args...> --json <file>` (an eval or another read-only command),
// once per build; the parsed JSON, or null (with a recorded failure).
nlohmann::json shared_json(const std::vector<std::string>& args);

// A file named `name` holding `content`, in the cache (a config file passed
// to a shared quantize: the key then depends on the content, not on a temp path).
std::filesystem::path shared_file(const std::string& name, const std::string& content);

// The key's parts (exposed for the cache's own test): a hex SHA-256 of the
// binary's identity, `kind` and every argument.
std::string artifact_key(const std::string& kind, const std::vector<std::string>& args);

namespace detail {
// Runs `fill(tmp)` under the key's lock unless the key's dir already exists;
// returns the published dir or an empty path.
std::filesystem::path with_cache_lock(const std::string& key, const std::function<bool(const std::filesystem::path&)>& fill);
}  // namespace detail

template <typename Make>
std::filesystem::path cached_artifact(const std::string& kind, const std::vector<std::string>& args, Make make) {
  return detail::with_cache_lock(artifact_key(kind, args), make);
}

}  // namespace qloom::test
