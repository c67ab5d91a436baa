// Timestamps of the perf session's files (state.json, progress.json, score
// files, reports): UTC to the second. Thread-safe.
#pragma once

#include <string>

namespace qloom::perf {

// "2026-12-02T05:15:00Z" (UTC, seconds).
std::string utc_timestamp();
// "20261202-051500" (local time), the default session directory's name.
std::string session_dir_stamp();

}  // namespace qloom::perf
