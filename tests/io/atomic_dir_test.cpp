// Tests for AtomicDir and write_file_atomic: publish on commit, nothing on
// failure or crash, refusal to clobber.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "qloom/core/error.h"
#include "qloom/io/atomic_dir.h"
#include "qloom/io/safetensors_writer.h"
#include "qloom/io/staging_cleanup.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using qloom::Error;
using qloom::ErrorKind;
using namespace qloom::io;
using qloom::test::read_file;
using qloom::test::catch_error;
using qloom::test::TempDir;

std::vector<std::string> list(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(AtomicDir, CommitPublishes) {
  TempDir d("atomic");
  const fs::path target = d / "out";
  {
    AtomicDir a(target);
    EXPECT_EQ(a.staging().parent_path(), d.path());
    const std::string sname = a.staging().filename().string();
    EXPECT_EQ(sname.rfind(".out.qloom-partial-", 0), 0u) << sname;  // hidden, beside target
    EXPECT_TRUE(fs::is_directory(a.staging()));
    EXPECT_FALSE(fs::exists(target));
    fs::create_directories(a.staging() / "sub");
    std::ofstream(a.staging() / "config.json") << "{}\n";
    std::ofstream(a.staging() / "sub" / "x.txt") << "x";
    a.commit();
    EXPECT_TRUE(a.committed());
    EXPECT_TRUE(a.staging().empty());
  }
  EXPECT_EQ(read_file(target / "config.json"), "{}\n");
  EXPECT_EQ(read_file(target / "sub" / "x.txt"), "x");
  EXPECT_EQ(list(d.path()), std::vector<std::string>{"out"});  // no leftovers
}

TEST(AtomicDir, NoCommitLeavesNothing) {
  TempDir d("atomic");
  const fs::path target = d / "out";
  fs::path staging;
  {
    AtomicDir a(target);
    staging = a.staging();
    std::ofstream(a.staging() / "model.safetensors") << "partial";
  }
  EXPECT_FALSE(fs::exists(target));
  EXPECT_FALSE(fs::exists(staging));
  EXPECT_TRUE(fs::is_empty(d.path()));
}

TEST(AtomicDir, ExceptionBeforeCommitLeavesNothing) {
  TempDir d("atomic");
  try {
    AtomicDir a(d / "out");
    SafetensorsWriter w(a.staging(), {{"a", qloom::DType::kU8, {4}}});
    w.write("a", std::vector<std::byte>(3));  // wrong size: throws
    a.commit();
  } catch (const Error&) {
  }
  EXPECT_TRUE(fs::is_empty(d.path()));
}

TEST(AtomicDir, ExistingTargetRefused) {
  TempDir d("atomic");
  const fs::path target = d.mkdir("out");
  std::ofstream(target / "keep.txt") << "keep";
  const Error e = catch_error([&] { AtomicDir a(target); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.file(), target.string());
  EXPECT_NE(e.remedy().find("--overwrite"), std::string::npos);
  EXPECT_NE(e.remedy().find("--output_dir"), std::string::npos);
  EXPECT_EQ(read_file(target / "keep.txt"), "keep");
  EXPECT_EQ(list(d.path()), std::vector<std::string>{"out"});

  // Even an empty directory, a file or a dangling symlink counts as existing.
  const fs::path f = d.write("file", "f");
  EXPECT_EQ(catch_error([&] { AtomicDir a(f); }).kind(), ErrorKind::kUsage);
  fs::create_symlink(d / "nowhere", d / "link");
  EXPECT_EQ(catch_error([&] { AtomicDir a(d / "link"); }).kind(), ErrorKind::kUsage);
}

TEST(AtomicDir, OverwriteReplacesTheTarget) {
  TempDir d("atomic");
  const fs::path target = d.mkdir("out");
  std::ofstream(target / "old.txt") << "old";
  {
    AtomicDir a(target, /*overwrite=*/true);
    std::ofstream(a.staging() / "new.txt") << "new";
    EXPECT_TRUE(fs::exists(target / "old.txt"));  // untouched until commit
    a.commit();
  }
  EXPECT_FALSE(fs::exists(target / "old.txt"));
  EXPECT_EQ(read_file(target / "new.txt"), "new");
  EXPECT_EQ(list(d.path()), std::vector<std::string>{"out"});  // old copy removed
}

TEST(AtomicDir, OverwriteWithoutCommitKeepsTheOldTarget) {
  TempDir d("atomic");
  const fs::path target = d.mkdir("out");
  std::ofstream(target / "old.txt") << "old";
  { AtomicDir a(target, true); }
  EXPECT_EQ(read_file(target / "old.txt"), "old");
  EXPECT_EQ(list(d.path()), std::vector<std::string>{"out"});
}

TEST(AtomicDir, OverwriteRefusesToReplaceAFile) {
  TempDir d("atomic");
  const fs::path f = d.write("out", "a file");
  const Error e = catch_error([&] { AtomicDir a(f, true); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(read_file(f), "a file");
}

TEST(AtomicDir, TargetAppearingMeanwhileIsNotClobbered) {
  TempDir d("atomic");
  const fs::path target = d / "out";
  {
    AtomicDir a(target);
    std::ofstream(a.staging() / "new.txt") << "new";
    fs::create_directory(target);  // someone else creates it (empty)
    const Error e = catch_error([&] { a.commit(); });
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    EXPECT_FALSE(a.committed());
  }
  EXPECT_TRUE(fs::is_empty(target));
  EXPECT_EQ(list(d.path()), std::vector<std::string>{"out"});
}

TEST(AtomicDir, CreatesParentsAndHandlesTrailingSlash) {
  TempDir d("atomic");
  const fs::path target = d / "a" / "b" / "out";
  {
    AtomicDir a(target.string() + "/");
    EXPECT_EQ(a.target(), target);
    std::ofstream(a.staging() / "f") << "1";
    a.commit();
  }
  EXPECT_EQ(read_file(target / "f"), "1");
}

TEST(AtomicDir, RelativeTargetAndMove) {
  TempDir d("atomic");
  const fs::path cwd = fs::current_path();
  fs::current_path(d.path());
  {
    AtomicDir a("rel-out");
    EXPECT_TRUE(a.target().is_absolute());
    AtomicDir b = std::move(a);  // the moved-from object must not remove staging
    std::ofstream(b.staging() / "f") << "1";
    AtomicDir c(std::move(b));
    c.commit();
  }
  fs::current_path(cwd);
  EXPECT_EQ(read_file(d / "rel-out" / "f"), "1");
  EXPECT_EQ(list(d.path()), std::vector<std::string>{"rel-out"});
}

TEST(AtomicDir, CommitTwiceIsAnError) {
  TempDir d("atomic");
  AtomicDir a(d / "out");
  a.commit();
  EXPECT_EQ(catch_error([&] { a.commit(); }).kind(), ErrorKind::kInternal);
  EXPECT_TRUE(fs::is_directory(d / "out"));
}

TEST(AtomicDir, EmptyTargetIsUsageError) {
  EXPECT_EQ(catch_error([] { AtomicDir a(""); }).kind(), ErrorKind::kUsage);
}

// A writer killed with SIGKILL in the middle of writing leaves no target
// directory: only the hidden staging directory remains.
TEST(AtomicDir, KilledMidWriteLeavesNoTarget) {
  TempDir d("atomic");
  const fs::path target = d / "model-out";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: start writing a sharded model, tell the parent, keep writing.
    ::close(ready[0]);
    try {
      AtomicDir a(target);
      qloom::io::WriterOptions o;
      o.max_shard_bytes = 1 << 20;
      std::vector<qloom::io::TensorSpec> specs;
      for (int i = 0; i < 1000; ++i)
        specs.push_back({std::string("t").append(std::to_string(i)), qloom::DType::kU8, {1 << 19}});
      qloom::io::SafetensorsWriter w(a.staging(), specs, o);
      std::vector<std::byte> chunk(1 << 19, std::byte{1});
      for (int i = 0; i < 1000; ++i) {
        w.write(specs[i].name, chunk);
        if (i == 3) {
          const char c = 'r';
          (void)!::write(ready[1], &c, 1);
          ::sleep(60);  // the parent kills us here, mid-model
        }
      }
      w.finish();
      a.commit();
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);

  EXPECT_FALSE(fs::exists(target));
  const auto left = list(d.path());
  ASSERT_EQ(left.size(), 1u);
  const std::string prefix =
      std::string(".model-out.qloom-partial-").append(std::to_string(pid)).append("-");
  EXPECT_EQ(left[0].rfind(prefix, 0), 0u)
      << left[0];
  // The partial output is there, hidden: some shards were written.
  EXPECT_FALSE(fs::is_empty(d / left[0]));
  // A new run into the same parent is not blocked by the leftover, and
  // sweeps it: its pid is dead.
  {
    AtomicDir again(target);
    ASSERT_EQ(again.swept().size(), 1u);
    EXPECT_EQ(again.swept()[0], d / left[0]);
    again.commit();
  }
  EXPECT_TRUE(fs::is_directory(target));
  EXPECT_EQ(list(d.path()), std::vector<std::string>{"model-out"});
}

// A pid that is surely dead: a child that exited and was reaped.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

// A writer stopped by SIGTERM / SIGINT / SIGHUP removes its staging
// directory before it dies of the signal.
class AtomicDirSignal : public ::testing::TestWithParam<int> {};

TEST_P(AtomicDirSignal, StagingIsRemovedAndTheSignalStillKills) {
  const int sig = GetParam();
  TempDir d("atomic-sig");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(ready[0]);
    try {
      AtomicDir a(d / "out");
      AtomicDir b(d / "other");  // two at once: both are removed
      fs::create_directories(a.staging() / "sub" / "deeper");
      std::ofstream(a.staging() / "model.safetensors") << std::string(1 << 16, 'x');
      std::ofstream(a.staging() / "sub" / "deeper" / "x.txt") << "x";
      std::ofstream(b.staging() / "config.json") << "{}";
      const char c = 'r';
      (void)!::write(ready[1], &c, 1);
      ::sleep(60);  // the parent signals us here
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(list(d.path()).size(), 2u);  // both staging directories exist
  ASSERT_EQ(::kill(pid, sig), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), sig);
  EXPECT_EQ(list(d.path()), std::vector<std::string>{});
}

INSTANTIATE_TEST_SUITE_P(Signals, AtomicDirSignal, ::testing::Values(SIGTERM, SIGINT, SIGHUP));

TEST(AtomicDir, SweepsOnlyStagingDirsOfDeadPids) {
  TempDir d("atomic-sweep");
  const std::string dead = std::to_string(dead_pid());
  const std::string live = std::to_string(::getppid());  // the test runner's parent: alive
  const std::vector<std::string> stale = {".m.qloom-partial-" + dead + "-0", ".other model.qloom-partial-" + dead + "-7",
                                          ".m.qloom-old-" + dead + "-1"};
  const std::vector<std::string> kept = {
      ".m.qloom-partial-" + live + "-0",              // a live writer beside us
      ".m.qloom-partial-" + dead,                     // not the format: no -<n>
      ".m.qloom-partial-" + dead + "-x",              // not the format
      "m.qloom-partial-" + dead + "-0",               // not hidden
      ".m.qloom-tmp-" + dead + "-0",                  // another tag
      ".m.qloom-partial-0-0",                         // pid 0
  };
  for (const auto& n : stale) {
    d.mkdir(n + "/sub");
    d.write(n + "/sub/f", "x");
  }
  for (const auto& n : kept) d.mkdir(n);
  d.write(".f.qloom-partial-" + dead + "-2", "a file, not a staging directory");
  fs::create_symlink(d / kept[0], d / (".s.qloom-partial-" + dead + "-3"));  // a symlink: never followed
  {
    AtomicDir a(d / "m");
    EXPECT_EQ(a.swept().size(), stale.size());
  }
  std::vector<std::string> want = kept;
  want.push_back(".f.qloom-partial-" + dead + "-2");
  want.push_back(".s.qloom-partial-" + dead + "-3");
  std::sort(want.begin(), want.end());
  EXPECT_EQ(list(d.path()), want);
}

TEST(AtomicDir, StagingNamePid) {
  EXPECT_EQ(staging_name_pid(".model.qloom-partial-1234-0"), 1234);
  EXPECT_EQ(staging_name_pid(".a.b.qloom-old-99-12"), 99);
  EXPECT_EQ(staging_name_pid(".x.qloom-partial-12-"), 0);
  EXPECT_EQ(staging_name_pid(".qloom-partial-12-0"), 0);  // no target name
  EXPECT_EQ(staging_name_pid("model"), 0);
}

// ---------------------------------------------------------------------------

TEST(WriteFileAtomic, WritesAndReplaces) {
  TempDir d("atomic");
  const fs::path p = d / "report.json";
  write_file_atomic(p, "one");
  EXPECT_EQ(read_file(p), "one");
  write_file_atomic(p, std::string(100000, 'x'));
  EXPECT_EQ(read_file(p), std::string(100000, 'x'));
  write_file_atomic(p, "");
  EXPECT_EQ(read_file(p), "");
  EXPECT_EQ(list(d.path()), std::vector<std::string>{"report.json"});
}

TEST(WriteFileAtomic, MissingDirectoryIsIoError) {
  TempDir d("atomic");
  const Error e = catch_error([&] { write_file_atomic(d / "no" / "f.txt", "x"); });
  EXPECT_EQ(e.kind(), ErrorKind::kIo);
  EXPECT_EQ(e.file(), (d / "no" / "f.txt").string());
  EXPECT_EQ(e.exit_code(), 3);
}

TEST(WriteFileAtomic, UnwritableDirectory) {
  if (qloom::test::permissions_are_bypassed())
    GTEST_SKIP() << "running with permission checks bypassed (root): chmod cannot deny writes";
  TempDir d("atomic");
  const fs::path ro = d.mkdir("ro");
  fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
  const Error e = catch_error([&] { write_file_atomic(ro / "f", "x"); });
  EXPECT_EQ(e.kind(), ErrorKind::kIo);
  EXPECT_NE(e.remedy().find("writable"), std::string::npos);
}

}  // namespace
