// Litter control for AtomicDir's hidden staging directories
// (".<name>.qloom-partial-<pid>-<n>", and ".<name>.qloom-old-<pid>-<n>" for
// a replaced output on its way out):
//   - SIGINT / SIGTERM / SIGHUP: the staging directories of the live
//     AtomicDirs are removed by an async-signal-safe handler (open / getdents64
//     / unlinkat only, on paths recorded beforehand in a fixed table), which
//     then restores the default disposition and re-raises the signal, so the
//     process still dies of it (exit status 128 + N). The handler is installed
//     on the first registration, and only for a signal whose disposition is
//     still the default (a program's own handler, or SIG_IGN as under nohup,
//     is left alone).
//   - SIGKILL (or a crash) cannot be caught: the next AtomicDir in the same
//     parent directory sweeps the staging directories whose pid is dead
//     (kill(pid, 0) fails with ESRCH). Entries of live pids (another qloom
//     writing beside us), of other users (EPERM), names not of this exact
//     format, and symlinks are never touched.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace qloom::io {

// Records `dir` (absolute) for removal on a fatal signal; returns its slot,
// or -1 when the table (64 entries) is full or the path is too long (the
// directory is then only swept later).
int register_staging_dir(const std::filesystem::path& dir);
void unregister_staging_dir(int slot);

// "<pid>" of a name ".<target>.qloom-partial-<pid>-<n>" (or -old-); 0 when
// `name` is not of that format.
long staging_name_pid(const std::string& name);

// Removes the staging directories of dead processes in `parent`; returns the
// paths removed. Never throws (a directory that cannot be removed stays).
std::vector<std::filesystem::path> sweep_stale_partials(const std::filesystem::path& parent);

}  // namespace qloom::io
