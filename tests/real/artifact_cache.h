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

// The cache directory for `kind` and `args`, filled once by `fill` (which
// receives a temp directory and returns true on success) and published by
// renaming it. Returns an empty path when `fill` failed: nothing is published
// and the next caller tries again.
std::filesystem::path cached_artifact(const std::string& kind, const std::vector<std::string>& args,
                                      const std::function<bool(const std::filesystem::path&)>& fill);

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

}  // namespace qloom::test
