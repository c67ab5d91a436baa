// fetch_blob: puts one repo file into the hub cache — blobs/<etag>, then the
// snapshot symlink — downloading it unless the blob is already there.
//
// The bytes go to blobs/<etag>.incomplete under the blob's lock (.locks/...).
// An .incomplete file left by an earlier, interrupted run is resumed with an
// HTTP Range request (a 200 answer restarts it from zero). A transfer cut
// mid-file is resumed up to twice within the call. When complete the bytes
// are verified — sha256 when the etag is an LFS sha256 (64 hex digits), the
// git blob sha1 when it is 40 hex digits, and the size whenever it is known
// — then fsynced and renamed to blobs/<etag>. A mismatch deletes the
// .incomplete file: a bad blob is never renamed into place nor linked.
#pragma once

#include <functional>

#include "qloom/io/hub_api.h"
#include "qloom/io/hub_cache.h"
#include "qloom/io/hub_progress.h"

namespace qloom::io {

// Returns true when the blob is in place and linked; false when `cancel`
// returned true first (another worker failed). Throws HubError: kInterrupted
// (partial file kept for the next run), kChecksum, kDiskSpace, kCacheWrite,
// or the HTTP failures of throw_hub_http_error.
bool fetch_blob(HttpClient& http, const HubSettings& s, const HubId& id, const HubCache& cache,
                const HubFileMeta& meta, HubProgress& progress, const std::function<bool()>& cancel);

// Bytes of blobs/<etag>.incomplete already on disk (0 when none).
uint64_t incomplete_bytes(const HubCache& cache, const std::string& etag);

}  // namespace qloom::io
