// Hub ids on the command line, against tests/io/hub_test_server.py: `qloom
// inspect org/name` fetches config.json only; `qloom quantize --model_dir
// org/name` fetches the rest once, then runs from the cache (server up, server
// down, HF_HUB_OFFLINE=1); failures exit 2 with the hub's reason.
#include <filesystem>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/hub_server.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace qloom {
namespace {

namespace fs = std::filesystem;
using test::HubTestServer;
using test::TempDir;

class HubCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HubTestServer::available()) GTEST_SKIP() << "python3 not found";
  }

  // Runs qloom with the hub variables pointing at `endpoint` and the temp cache.
  test::CommandResult qloom(const std::string& endpoint, const std::vector<std::string>& args,
                            bool offline = false) {
    std::vector<std::string> argv{"env",
                                  "-u", "HF_TOKEN", "-u", "HUGGING_FACE_HUB_TOKEN",
                                  "HF_ENDPOINT=" + endpoint,
                                  "HF_HOME=" + (tmp_ / "hf").string(),
                                  "HF_HUB_CACHE=" + (tmp_ / "hub").string(),
                                  std::string("HF_HUB_OFFLINE=") + (offline ? "1" : "0"),
                                  QLOOM_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run_command(argv);
  }

  std::vector<std::string> quantize_args(const std::string& out) {
    return {"quantize", "--model_dir", "demo/stories", "--output_dir", (tmp_ / out).string(),
            "--quant_scheme", "ptpc_fp8", "--progress", "off"};
  }

  TempDir tmp_{"hubcli"};
};

TEST_F(HubCliTest, InspectDownloadsOnlyConfigJson) {
  HubTestServer srv;
  const auto r = qloom(srv.endpoint(), {"inspect", "demo/stories"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("llama"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not downloaded"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("snapshots/"), std::string::npos) << r.out;
  EXPECT_EQ(srv.files_fetched(), std::vector<std::string>{"config.json"});

  const auto j = qloom(srv.endpoint(), {"inspect", "demo/stories", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto parsed = nlohmann::json::parse(j.out);
  EXPECT_EQ(parsed["model_type"], "llama");
  EXPECT_EQ(parsed["config_only"], true);
  EXPECT_EQ(srv.gets_of("config.json"), 1u);  // cached the first time
}

TEST_F(HubCliTest, QuantizeDownloadsOnceThenRunsFromTheCache) {
  HubTestServer srv;
  auto r = qloom(srv.endpoint(), quantize_args("q1"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(tmp_ / "q1" / "config.json"));
  EXPECT_EQ(srv.files_fetched(),
            (std::vector<std::string>{"config.json", "generation_config.json", "model.safetensors",
                                      "special_tokens_map.json", "tokenizer.json", "tokenizer.model",
                                      "tokenizer_config.json"}));
  EXPECT_NE(r.err.find("downloaded demo/stories"), std::string::npos) << r.err;

  srv.clear_log();
  r = qloom(srv.endpoint(), quantize_args("q2"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(srv.files_fetched().empty());
  EXPECT_EQ(test::read_file(tmp_ / "q1" / "model.safetensors"), test::read_file(tmp_ / "q2" / "model.safetensors"));

  // After a full download inspect shows the weights too.
  r = qloom(srv.endpoint(), {"inspect", "demo/stories"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("parameters"), std::string::npos) << r.out;

  const std::string endpoint = srv.endpoint();
  srv.stop();
  r = qloom(endpoint, quantize_args("q3"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("using the cached snapshot"), std::string::npos) << r.err;
  r = qloom("http://127.0.0.1:9", quantize_args("q4"), /*offline=*/true);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = qloom("http://127.0.0.1:9", {"validate", "--source", "demo/stories", "--quantized",
                                   (tmp_ / "q4").string()}, true);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST_F(HubCliTest, HubFailuresExit2WithTheReason) {
  HubTestServer srv({"--token", "hf_secret"});
  auto r = qloom(srv.endpoint(), {"inspect", "demo/stories"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("HF_TOKEN"), std::string::npos) << r.err;
  r = qloom(srv.endpoint(), {"inspect", "demo/stories"}, /*offline=*/true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("HF_HUB_OFFLINE"), std::string::npos) << r.err;
  // The token file huggingface_hub's login writes is used.
  tmp_.write("hf/token", "hf_secret\n");
  r = qloom(srv.endpoint(), {"inspect", "demo/stories"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = qloom(srv.endpoint(), {"inspect", "demo/nope"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not found"), std::string::npos) << r.err;
}

// A hostile hub (issue 30): a commit id that is a path, or a listed file name
// with '..', exits 2 naming it, and nothing outside the cache is created or
// replaced (tmp_/victim is where snapshots/<commit> would land).
TEST_F(HubCliTest, AHostileHubCannotWriteOutsideTheCache) {
  const fs::path victim = tmp_.write("victim/config.json", "precious");
  {
    HubTestServer srv({"--commit", "../../../victim"});
    for (const auto& args : {std::vector<std::string>{"inspect", "demo/stories"}, quantize_args("q")}) {
      const auto r = qloom(srv.endpoint(), args);
      EXPECT_EQ(r.exit_code, 2) << r.err;
      EXPECT_NE(r.err.find("'../../../victim' is not a 40-hex-digit commit hash"), std::string::npos) << r.err;
    }
  }
  {
    HubTestServer srv({"--extra", "demo/stories:../../../victim/config.json=5"});
    const auto r = qloom(srv.endpoint(), quantize_args("q"));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("'../../../victim/config.json' has a '..' component"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::is_symlink(victim));
  EXPECT_EQ(test::read_file(victim), "precious");
  EXPECT_FALSE(fs::exists(tmp_ / "q"));
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp_ / "victim"), fs::directory_iterator()), 1);
}

}  // namespace
}  // namespace qloom
