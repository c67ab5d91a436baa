// `qloom run` through a pseudo-terminal, as an operator uses it: with a
// terminal on stdin, --interactive auto asks at every checkpoint with the
// [quark-checkpoint] prefix; answers are y, n, or a change in plain words.
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace qloom::test {
namespace {
namespace fs = std::filesystem;

constexpr const char* kAsk = "[y/n, or say what to change]";

class PtyProcess {
 public:
  explicit PtyProcess(const std::vector<std::string>& argv) {
    pid_ = ::forkpty(&master_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      std::vector<char*> a;
      for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
      a.push_back(nullptr);
      ::execv(a[0], a.data());
      ::_exit(127);
    }
  }
  ~PtyProcess() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) ::close(master_);
  }
  bool started() const { return pid_ > 0; }
  // Reads until `needle` has appeared `count` times in all output, or timeout.
  bool wait_for(const std::string& needle, size_t count, double seconds = 60) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (occurrences(needle) < count) {
      if (std::chrono::steady_clock::now() > end || !read_some(200)) return occurrences(needle) >= count;
    }
    return true;
  }
  void send(const std::string& line) { (void)!::write(master_, line.data(), line.size()); }
  int wait_exit(double seconds = 120) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    int status = 0;
    while (std::chrono::steady_clock::now() < end) {
      read_some(100);
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        while (read_some(50)) {
        }
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
    }
    return -1;
  }
  const std::string& output() const { return out_; }

 private:
  size_t occurrences(const std::string& needle) const {
    size_t n = 0;
    for (size_t at = out_.find(needle); at != std::string::npos; at = out_.find(needle, at + 1)) ++n;
    return n;
  }
  bool read_some(int timeout_ms) {
    pollfd p{master_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return true;  // nothing yet: keep waiting
    char buf[4096];
    const ssize_t n = ::read(master_, buf, sizeof buf);
    if (n <= 0) return false;  // the child closed the terminal
    out_.append(buf, static_cast<size_t>(n));
    return true;
  }
  int master_ = -1;
  pid_t pid_ = -1;
  bool exited_ = false;
  std::string out_;
};

const std::string kPrompt =
    "quantize the bundled model to fp8 without kv cache quantization, calibrate on 16 samples, "
    "measure perplexity on 4 samples, accept a 50% gap";

TEST(RunCli, InteractiveAnswersAndAChangeInPlainWords) {
  TempDir t("run-pty");
  const fs::path ws = t / "ws";
  PtyProcess p({QLOOM_CLI_PATH, "run", kPrompt, "--workspace", ws.string(), "--threads", "2"});
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(p.wait_for(kAsk, 1)) << p.output();  // checkpoint intake
  EXPECT_NE(p.output().find("[quark-checkpoint] Model Analysis:"), std::string::npos) << p.output();
  p.send("y\n");
  ASSERT_TRUE(p.wait_for(kAsk, 2)) << p.output();  // checkpoint plan
  EXPECT_NE(p.output().find("[quark-checkpoint]   num_calib_data"), std::string::npos) << p.output();
  p.send("calibrate on 8 samples\n");  // a change: back to the plan, re-presented
  ASSERT_TRUE(p.wait_for(kAsk, 3)) << p.output();
  p.send("looks good\n");
  ASSERT_TRUE(p.wait_for(kAsk, 4)) << p.output();  // the execution gate
  EXPECT_NE(p.output().find("Shall I run this exact command?"), std::string::npos);
  EXPECT_FALSE(fs::exists(ws / "stories260K-hf-bf16-fp8")) << "nothing is written before approval";
  p.send("yes\n");
  ASSERT_TRUE(p.wait_for(kAsk, 5, 120)) << p.output();  // the verified result
  p.send("accept\n");
  const int rc = p.wait_exit();
  EXPECT_EQ(rc, 0) << p.output();
  const auto plan = nlohmann::json::parse(read_file(ws / "quant_plan.json"));
  EXPECT_EQ(plan["num_calib_data"], 8);
  EXPECT_EQ(plan["requires_confirmation"], false);
  const std::string manifest = read_file(ws / "run_manifest.yaml");
  EXPECT_NE(manifest.find("decision: accepted"), std::string::npos) << manifest;
  EXPECT_NE(manifest.find("\"8\""), std::string::npos) << manifest;  // --num_calib_data 8
}

TEST(RunCli, NoAtTheExecutionGateIsCheckpointAbortedAndWritesNothing) {
  TempDir t("run-pty-no");
  const fs::path ws = t / "ws";
  PtyProcess p({QLOOM_CLI_PATH, "run", kPrompt, "--workspace", ws.string(), "--interactive", "on"});
  ASSERT_TRUE(p.started());
  for (size_t i = 1; i <= 2; ++i) {
    ASSERT_TRUE(p.wait_for(kAsk, i)) << p.output();
    p.send("y\n");
  }
  ASSERT_TRUE(p.wait_for(kAsk, 3)) << p.output();
  p.send("n\n");
  EXPECT_EQ(p.wait_exit(), 4) << p.output();
  EXPECT_EQ(read_file(ws / "blocked.md").substr(0, 31), "outcome_id: checkpoint_aborted\n");
  EXPECT_EQ(read_file(ws / "last_phase.txt"), "manifest\n");
  EXPECT_FALSE(fs::exists(ws / "stories260K-hf-bf16-fp8"));
  EXPECT_FALSE(fs::exists(ws / "fix_hypothesis_attempt_2.md"));
  const auto a = nlohmann::json::parse(read_file(ws / "assessment.json"));
  EXPECT_EQ(a["verdict"], "aborted");
}

TEST(RunCli, WithoutATerminalAutoMeansOffAndFlagsAcceptBothSpellings) {
  TempDir t("run-off");
  const auto r = run_qloom({"run", kPrompt, "--workspace", (t / "ws").string(), "--max-requantize-attempts", "0",
                            "--eval_time_budget", "60", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto a = nlohmann::json::parse(r.out);
  EXPECT_EQ(a["verdict"], "success");
  EXPECT_EQ(a["max_requantize_attempts"], 0);
  EXPECT_NE(r.err.find("auto-accepted (interactive=off)"), std::string::npos);
}

}  // namespace
}  // namespace qloom::test

namespace qloom::test {
namespace {

// A .gguf named in the prompt: intake analyses its metadata (no conversion
// before the execution gate); declining there leaves the GGUF cache empty.
TEST(RunCli, AGgufIsAnalysedFromItsMetadataAlone) {
  TempDir t("run-pty-gguf");
  const fs::path ws = t / "ws", cache = t / "cache";
  const std::string gguf = (fs::path(QLOOM_TEST_DATA_DIR) / "gguf_convert" / "stories260k.gguf").string();
  ::setenv("QLOOM_GGUF_CACHE", cache.c_str(), 1);
  PtyProcess p({QLOOM_CLI_PATH, "run", "Quantize the model at " + gguf + " to ptpc_fp8", "--workspace", ws.string(),
                "--interactive", "on"});
  ::unsetenv("QLOOM_GGUF_CACHE");
  ASSERT_TRUE(p.started());
  for (size_t i = 1; i <= 2; ++i) {
    ASSERT_TRUE(p.wait_for(kAsk, i)) << p.output();
    p.send("y\n");
  }
  ASSERT_TRUE(p.wait_for(kAsk, 3)) << p.output();
  p.send("n\n");
  EXPECT_EQ(p.wait_exit(), 4) << p.output();
  const auto a = nlohmann::json::parse(read_file(ws / "model_analysis.json"));
  EXPECT_EQ(a["model"]["model_type"], "llama");
  EXPECT_EQ(a["model"]["model_path"], gguf);
  EXPECT_EQ(a["compatibility"], "ok");
  EXPECT_FALSE(fs::exists(cache)) << "intake converted the GGUF";
}

}  // namespace
}  // namespace qloom::test
