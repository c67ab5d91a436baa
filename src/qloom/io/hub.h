// Hugging Face Hub model ids wherever qloom takes a model directory:
// `org/name[@revision]` resolves to a snapshot folder of the huggingface_hub
// cache (downloading what is missing), so the rest of qloom only ever sees a
// local directory. Settings come from the environment (hub_env.h), the cache
// layout is huggingface_hub's (hub_cache.h).
#pragma once

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>

#include "qloom/io/hub_env.h"
#include "qloom/io/hub_id.h"

namespace qloom::io {

enum class HubFetch {
  kConfigOnly,  // config.json alone (inspect / intake read nothing else)
  kModel,       // everything quantization needs (hub_select.h)
};

struct HubResolveOptions {
  HubFetch fetch = HubFetch::kModel;
  std::ostream* log = nullptr;  // progress bars and notes (stderr in the CLI); null: silent
  bool log_is_tty = false;
  unsigned parallel = 8;        // concurrent requests / downloads
  bool all_files = false;       // every file of the repo, pickles and subfolders too
};

// True when `spec` reads as a local path rather than a hub id: it starts
// with '/', '.' or '~', or (before any '@') has more than one '/', or its
// first component exists on disk (`models/x` where ./models exists).
bool looks_like_local_path(const std::string& spec);

// A local path always wins: when `spec` exists on disk it is returned as is.
// A missing path that looks_like_local_path() throws Error(kNotFound) "no
// such directory: <spec>" (".gguf": "no such file") and never asks the hub.
// Otherwise, when it parses as a hub id (hub_id.h), the snapshot folder for it
// (resolve_hub_model with the environment's settings); otherwise `spec`
// unchanged, for the caller to report as a missing directory. Hub errors that
// may come from a mistyped local path (repo not found, 401, network, not
// cached) say in their remedy that no such local directory exists either.
std::filesystem::path resolve_model_path(const std::string& spec, const HubResolveOptions& o = {});

// Ensures the files `o.fetch` asks for are in the cache and returns
// snapshots/<commit>. Online: one listing call (kModel) or one HEAD
// (kConfigOnly), a HEAD per missing file, then parallel verified downloads
// after a free-space check; refs/<revision> records the commit. Offline
// (s.offline), or when the endpoint cannot be reached: the cached snapshot
// refs/<revision> names, when it holds the files (else HubError kNotCached /
// kNetwork, saying what the cache holds). Throws HubError (hub_error.h).
std::filesystem::path resolve_hub_model(const HubId& id, const HubSettings& s,
                                        const HubResolveOptions& o = {});

}  // namespace qloom::io
