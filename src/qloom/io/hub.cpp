#include "qloom/io/hub.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "qloom/core/format.h"
#include "qloom/io/hub_api.h"
#include "qloom/io/hub_cache.h"
#include "qloom/io/hub_download.h"
#include "qloom/io/hub_error.h"
#include "qloom/io/hub_select.h"
#include "qloom/io/hub_snapshot_check.h"
#include "qloom/io/hub_strings.h"

namespace qloom::io {
namespace fs = std::filesystem;
namespace {

// Runs fn(client, i) for i in [0, n) on up to `workers` threads, each with its
// own HttpClient. The first exception stops the others (cancel() turns true)
// and is rethrown.
void parallel_for(size_t n, unsigned workers, const HubSettings& s,
                  const std::function<void(HttpClient&, size_t, const std::function<bool()>&)>& fn) {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first;
  std::mutex mu;
  const std::function<bool()> cancel = [&] { return failed.load(); };
  auto work = [&] {
    HttpClient http(s.token, HttpClient::host_of(s.endpoint));
    for (size_t i; !failed && (i = next++) < n;) {
      try {
        fn(http, i, cancel);
      } catch (...) {
        std::lock_guard lock(mu);
        if (!first) first = std::current_exception();
        failed = true;
      }
    }
  };
  const size_t count = std::max<size_t>(1, std::min<size_t>(workers, n));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < count; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

void check_free_space(const fs::path& dir, uint64_t need, const HubId& id) {
  struct statvfs st {};
  if (need == 0 || ::statvfs(dir.c_str(), &st) != 0) return;
  const uint64_t free_bytes = uint64_t(st.f_bavail) * uint64_t(st.f_frsize);
  const uint64_t margin = need / 100 + (64u << 20);
  if (free_bytes >= need + margin) return;
  throw HubError(HubFailure::kDiskSpace, dir.string(), id.display(),
                 cat({"the download needs ", format_bytes(need), " but only ", format_bytes(free_bytes),
                      " is free"}),
                 "free disk space, or point HF_HUB_CACHE at a larger disk");
}

fs::path online_config(const HubId& id, const HubSettings& s, const HubCache& cache,
                       HubProgress& progress) {
  HttpClient http(s.token, HttpClient::host_of(s.endpoint));
  HubFileMeta meta = fetch_file_meta(http, s, id, id.revision, "config.json");
  settle_hub_file_size(meta, std::nullopt, id);
  std::error_code ec;
  if (!fs::exists(cache.blob(meta.etag), ec)) progress.begin(id.display(), 1, meta.size.value_or(0));
  fetch_blob(http, s, id, cache, meta, progress, {});
  cache.write_ref(id.revision, meta.commit);
  return cache.snapshot(meta.commit);
}

fs::path online_model(const HubId& id, const HubSettings& s, const HubCache& cache,
                      const HubResolveOptions& o, HubProgress& progress) {
  HubListing listing;
  {
    HttpClient http(s.token, HttpClient::host_of(s.endpoint));
    listing = fetch_listing(http, s, id);
  }
  const std::string& commit = listing.commit;
  const bool has_config = std::any_of(listing.files.begin(), listing.files.end(),
                                      [](const HubRepoFile& f) { return f.name == "config.json"; });
  if (!has_config)
    throw HubError(HubFailure::kFileNotFound, id.display(), "config.json",
                   "the repo has no config.json: not a transformers model",
                   "check the id; qloom quantizes HuggingFace transformers checkpoints");
  std::vector<const HubRepoFile*> todo;
  for (const auto& f : listing.files)
    if ((o.all_files || wanted_for_quantization(f.name, f.size)) && !cache.has_file(commit, f.name))
      todo.push_back(&f);

  std::vector<HubFileMeta> metas(todo.size());
  parallel_for(todo.size(), o.parallel, s, [&](HttpClient& http, size_t i, const auto&) {
    metas[i] = fetch_file_meta(http, s, id, commit, todo[i]->name);
    metas[i].commit = commit;
    settle_hub_file_size(metas[i], todo[i]->size, id);
  });
  uint64_t need = 0, total = 0;
  size_t to_fetch = 0;
  std::error_code ec;
  for (const auto& m : metas) {
    if (fs::exists(cache.blob(m.etag), ec)) continue;
    const uint64_t part = incomplete_bytes(cache, m.etag), size = m.size.value_or(0);
    total += size;
    need += size > part ? size - part : 0;
    ++to_fetch;
  }
  fs::create_directories(cache.repo_dir() / "blobs", ec);
  check_free_space(cache.repo_dir() / "blobs", need, id);
  progress.begin(id.display(), to_fetch, total);
  parallel_for(metas.size(), o.parallel, s, [&](HttpClient& http, size_t i, const auto& cancel) {
    fetch_blob(http, s, id, cache, metas[i], progress, cancel);
  });
  cache.write_ref(id.revision, commit);
  if (o.log && to_fetch == 0)
    *o.log << "qloom: " << id.display() << ": using the cached snapshot " << commit << "\n";
  return cache.snapshot(commit);
}

std::string cache_state(const HubCache& cache, const HubId& id, HubFetch fetch,
                        std::optional<std::string>& usable) {
  const auto commit = cache.cached_commit(id.revision);
  if (!commit)
    return cat({"nothing of ", id.display(), " is cached in ", cache.root().string()});
  const std::string missing = missing_from_snapshot(cache, *commit, fetch);
  if (missing.empty()) {
    usable = *commit;
    return {};
  }
  return cat({"the cached snapshot ", cache.snapshot(*commit).string(), " lacks ", missing});
}

}  // namespace

fs::path resolve_hub_model(const HubId& id, const HubSettings& s, const HubResolveOptions& o) {
  const HubCache cache(s.cache_dir, id);
  std::optional<std::string> usable;
  if (s.offline) {
    const std::string state = cache_state(cache, id, o.fetch, usable);
    if (usable) return cache.snapshot(*usable);
    throw HubError(HubFailure::kNotCached, id.display(), "",
                   cat({"HF_HUB_OFFLINE is set and ", state}),
                   "unset HF_HUB_OFFLINE to download it, or copy the model into the cache");
  }
  HubProgress progress(o.log, o.log_is_tty);
  cache.tag_root();
  try {
    fs::path snap = o.fetch == HubFetch::kConfigOnly ? online_config(id, s, cache, progress)
                                                     : online_model(id, s, cache, o, progress);
    progress.finish();
    return snap;
  } catch (const HubError& e) {
    if (e.failure() != HubFailure::kNetwork) throw;
    const std::string state = cache_state(cache, id, o.fetch, usable);
    if (usable) {
      if (o.log)
        *o.log << "qloom: warning: " << e.message() << "; using the cached snapshot " << *usable
               << " of " << id.display() << "\n";
      return cache.snapshot(*usable);
    }
    throw HubError(HubFailure::kNetwork, e.file(), e.item(), cat({e.message(), "; ", state}),
                   "check the network and HF_ENDPOINT; once the model is cached, HF_HUB_OFFLINE=1 "
                   "runs without the network");
  }
}

bool looks_like_local_path(const std::string& spec) {
  if (spec.empty()) return false;
  if (spec[0] == '/' || spec[0] == '.' || spec[0] == '~') return true;
  const std::string repo = spec.substr(0, spec.find('@'));
  const size_t slash = repo.find('/');
  if (slash != std::string::npos && repo.find('/', slash + 1) != std::string::npos) return true;
  std::error_code ec;
  return slash != std::string::npos && fs::exists(repo.substr(0, slash), ec);
}

fs::path resolve_model_path(const std::string& spec, const HubResolveOptions& o) {
  std::error_code ec;
  if (spec.empty() || fs::exists(spec, ec)) return spec;
  if (looks_like_local_path(spec)) {
    const bool file = spec.size() > 5 && spec.compare(spec.size() - 5, 5, ".gguf") == 0;
    throw Error(ErrorKind::kNotFound, spec, "",
                cat({file ? "no such file: " : "no such directory: ", spec}),
                "check the path; a Hugging Face model id is org/name[@revision], without a leading '/', "
                "'.' or '~', and is looked up on the hub only when no local folder of its first part exists");
  }
  const auto id = parse_hub_id(spec);
  if (!id) return spec;
  try {
    return resolve_hub_model(*id, hub_settings_from_env(), o);
  } catch (const HubError& e) {
    // The user may have meant a local directory and mistyped it: say so.
    const HubFailure f = e.failure();
    if (f != HubFailure::kRepoNotFound && f != HubFailure::kUnauthorized && f != HubFailure::kNetwork &&
        f != HubFailure::kNotCached)
      throw;
    throw HubError(f, e.file(), e.item(), e.message(),
                   cat({e.remedy(), " (no local directory '", spec, "' exists either)"}));
  }
}

}  // namespace qloom::io
