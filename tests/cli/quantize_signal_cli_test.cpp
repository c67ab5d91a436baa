// `qloom quantize` stopped by SIGTERM / SIGINT leaves nothing beside the
// output (its hidden staging directory is removed before it dies of the
// signal), and a staging directory of a run killed by SIGKILL is swept by
// the next run into the same parent (io/staging_cleanup.h).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace qloom {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  return out;
}

bool has_partial(const fs::path& dir) {
  for (const auto& n : entries(dir))
    if (n.find(".qloom-partial-") != std::string::npos) return true;
  return false;
}

// A quantize slow enough to be caught mid-way: AWQ with its grid and clip
// search over many calibration tokens on the demo model.
std::vector<std::string> slow_quantize(const fs::path& out) {
  return {QLOOM_CLI_PATH, "quantize", "--model_dir", QLOOM_DEMO_MODEL_DIR, "--output_dir", out.string(),
          "--quant_scheme", "int4_wo_32", "--exclude_unsupported", "--quant_algo", "awq,gptq",
          "--num_calib_data", "118", "--seq_len", "512", "--threads", "1", "--progress", "off"};
}

pid_t spawn(const std::vector<std::string>& argv) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, STDIN_FILENO);
    ::dup2(devnull, STDOUT_FILENO);
    ::dup2(devnull, STDERR_FILENO);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    ::execv(a[0], a.data());
    ::_exit(127);
  }
  return pid;
}

// Starts the slow quantize, waits for its staging directory, sends `sig`;
// returns the wait status.
int quantize_and_signal(const fs::path& parent, int sig, bool& caught_mid_way) {
  const pid_t pid = spawn(slow_quantize(parent / "out"));
  EXPECT_GT(pid, 0);
  caught_mid_way = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;  // finished before we saw it
    if (has_partial(parent)) {
      caught_mid_way = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let it write something
  ::kill(pid, sig);
  ::waitpid(pid, &status, 0);
  return status;
}

class QuantizeSignal : public ::testing::TestWithParam<int> {};

TEST_P(QuantizeSignal, LeavesNothingBehind) {
  test::TempDir t("quantize-signal");
  bool mid_way = false;
  const int status = quantize_and_signal(t.path(), GetParam(), mid_way);
  ASSERT_TRUE(mid_way) << "the quantize finished before its staging directory was seen; make it slower";
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
  EXPECT_EQ(WTERMSIG(status), GetParam());
  EXPECT_EQ(entries(t.path()), std::vector<std::string>{});
}

INSTANTIATE_TEST_SUITE_P(Signals, QuantizeSignal, ::testing::Values(SIGTERM, SIGINT));

TEST(QuantizeSignal, SigkillLitterIsSweptByTheNextRun) {
  test::TempDir t("quantize-sigkill");
  bool mid_way = false;
  const int status = quantize_and_signal(t.path(), SIGKILL, mid_way);
  ASSERT_TRUE(mid_way);
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_TRUE(has_partial(t.path()));  // SIGKILL cannot be caught
  const fs::path live = t.mkdir(".x.qloom-partial-" + std::to_string(::getpid()) + "-0");  // a live pid's
  const auto r = test::run_qloom({"quantize", "--model_dir", QLOOM_DEMO_MODEL_DIR, "--output_dir",
                                  (t / "next").string(), "--quant_scheme", "fp8", "--num_calib_data", "2",
                                  "--seq_len", "16", "--progress", "off"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> left = entries(t.path());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{live.filename().string(), "next"}));
}

}  // namespace
}  // namespace qloom
