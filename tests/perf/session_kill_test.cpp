// kill -9 at random moments, then the same command again (issue 13's
// acceptance): each resumed session ends with the same final.json facts as an
// uninterrupted run (timestamps, durations, the session's own path and id
// aside) and completes no step twice (no finished candidate is redone).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace {
namespace fs = std::filesystem;

std::vector<std::string> perf_args(const fs::path& session) {
  return {"perf", "--model", QLOOM_DEMO_MODEL_DIR, "--session-dir", session.string(), "--eval-task", "ppl",
          "--eval-limit", "4", "--threads", "1", "--num-calib-data", "16", "--calib-seqlen", "64",
          "--accuracy-gap", "10%", "--layer-precision-candidates", "native", "fp8", "int8", "mxfp4", "--json"};
}

// Starts the CLI; returns its pid (stdout / stderr to /dev/null).
pid_t spawn(const std::vector<std::string>& args) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    std::string cli = QLOOM_CLI_PATH;
    argv.push_back(cli.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    FILE* null = std::fopen("/dev/null", "w");
    ::dup2(::fileno(null), 1);
    ::dup2(::fileno(null), 2);
    ::execv(cli.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

// Kills `pid` after `ms` milliseconds unless it ended; true when it was killed.
bool kill_after(pid_t pid, int ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  int status = 0;
  while (std::chrono::steady_clock::now() < end) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return true;
}

// final.json without what legitimately differs between two sessions.
nlohmann::json facts(nlohmann::json j, const std::string& session) {
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& k = it.key();
      if (k == "generated_at" || k == "timings" || k == "session_id" || k == "evaluated_at" || k == "cached" ||
          k == "seconds" || (k.size() > 8 && k.substr(k.size() - 8) == "_seconds"))
        continue;
      out[k] = facts(it.value(), session);
    }
    return out;
  }
  if (j.is_array()) {
    for (auto& x : j) x = facts(x, session);
    return j;
  }
  if (j.is_string()) {
    std::string s = j.get<std::string>();
    for (size_t p; (p = s.find(session)) != std::string::npos;) s.replace(p, session.size(), "<session>");
    return s;
  }
  return j;
}

nlohmann::json read_json(const fs::path& p) { return nlohmann::json::parse(qloom::test::read_file(p)); }

TEST(PerfSessionKill, ResumedSessionsMatchAnUninterruptedRun) {
  qloom::test::TempDir tmp("perf-kill");
  ::setenv("QLOOM_CACHE_DIR", (tmp / "cache").c_str(), 1);
  // The first run fills the baseline cache; the second, timed, is the
  // reference the interrupted sessions (which hit the cache too) compare with.
  ASSERT_EQ(qloom::test::run_qloom(perf_args(tmp / "warm")).exit_code, 0);
  const fs::path ref = tmp / "reference";
  const auto t0 = std::chrono::steady_clock::now();
  auto r = qloom::test::run_qloom(perf_args(ref));
  const int wall_ms = int(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json expected = facts(read_json(ref / "reports" / "final.json"), ref.string());
  EXPECT_EQ(facts(read_json(tmp / "warm" / "reports" / "final.json"), (tmp / "warm").string()), expected);

  std::mt19937 rng(20261202);
  int kills = 0;
  // Trials until 10 kills have landed inside running sessions (a kill timed
  // after a session ended does not count), at most 30.
  for (int trial = 0; trial < 30 && kills < 10; ++trial) {
    const fs::path dir = tmp / ("trial-" + std::to_string(trial));
    for (int k = 0; k < 1 + trial % 3; ++k) {
      const int at = int(rng() % uint32_t(std::max(wall_ms, 50)));
      if (!kill_after(spawn(perf_args(dir)), at)) break;
      ++kills;
    }
    auto done = qloom::test::run_qloom(perf_args(dir));
    ASSERT_EQ(done.exit_code, 0) << "trial " << trial << ": " << done.err;
    EXPECT_EQ(facts(read_json(dir / "reports" / "final.json"), dir.string()), expected) << "trial " << trial;
    // No step completed twice across the invocations.
    std::set<std::string> steps;
    for (const auto& e : read_json(dir / "state.json")["phase_timeline"])
      EXPECT_TRUE(steps.insert(e["step"].get<std::string>()).second)
          << "trial " << trial << ": step '" << e["step"] << "' completed twice";
  }
  EXPECT_GE(kills, 10);
  ::unsetenv("QLOOM_CACHE_DIR");
}

}  // namespace
