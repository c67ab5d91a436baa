// agent/environment: the parsers on fixed texts, and the facts collected on
// this machine (shape, key order, schema, device variables as set / unset).
#include "qloom/agent/environment.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "qloom/agent/artifact_schema.h"
#include "qloom/agent/json_schema.h"
#include "qloom/build_info.h"

namespace qloom::agent {
namespace {

namespace fs = std::filesystem;

TEST(Environment, ParsesCpuinfoFirstProcessorOnly) {
  const std::string text =
      "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654 96-Core Processor\n"
      "flags\t\t: fpu sse2 avx avx2 fma f16c avx512f avx512bw\n\n"
      "processor\t: 1\nmodel name\t: Other CPU\nflags\t\t: fpu avx512_bf16\n";
  const CpuInfo c = parse_cpuinfo(text);
  EXPECT_EQ(c.model_name, "AMD EPYC 9654 96-Core Processor");
  EXPECT_TRUE(c.has_flags);
  EXPECT_TRUE(c.flags.count("avx2"));
  EXPECT_TRUE(c.flags.count("avx512bw"));
  EXPECT_FALSE(c.flags.count("avx512_bf16"));  // only the second processor lists it
  EXPECT_FALSE(c.flags.count("avx512vl"));

  const CpuInfo arm = parse_cpuinfo("processor : 0\nFeatures : fp asimd sve\n");
  EXPECT_TRUE(arm.has_flags);
  EXPECT_TRUE(arm.flags.count("asimd"));
  EXPECT_EQ(arm.model_name, "");
  EXPECT_FALSE(parse_cpuinfo("").has_flags);
}

TEST(Environment, ParsesMeminfo) {
  const MemInfo m = parse_meminfo("MemTotal:       16384 kB\nMemFree:  100 kB\nMemAvailable:    8192 kB\n");
  ASSERT_TRUE(m.total_bytes && m.available_bytes);
  EXPECT_EQ(*m.total_bytes, 16384ull * 1024);
  EXPECT_EQ(*m.available_bytes, 8192ull * 1024);
  const MemInfo broken = parse_meminfo("MemTotal: lots kB\n");
  EXPECT_FALSE(broken.total_bytes);
  EXPECT_FALSE(broken.available_bytes);
}

TEST(Environment, ParsesOsReleaseAndCgroup) {
  EXPECT_EQ(parse_os_release_pretty_name("NAME=\"Debian\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"),
            "Debian GNU/Linux 12 (bookworm)");
  EXPECT_EQ(parse_os_release_pretty_name("PRETTY_NAME='Quoted \\\"x\\\"'\n"), "Quoted \"x\"");
  EXPECT_EQ(parse_os_release_pretty_name("PRETTY_NAME=Plain\n"), "Plain");
  EXPECT_EQ(parse_os_release_pretty_name("NAME=x\n"), "");
  EXPECT_EQ(parse_cgroup_memory_max("max\n"), std::nullopt);
  EXPECT_EQ(parse_cgroup_memory_max("1073741824\n"), std::optional<uint64_t>(1073741824ull));
  EXPECT_EQ(parse_cgroup_memory_max(""), std::nullopt);
}

TEST(Environment, UsableMemoryIsTheSmallerOfAvailableAndLimit) {
  nlohmann::json env = {{"memory", {{"available_bytes", 8000}, {"limit_bytes", 5000}}}};
  EXPECT_EQ(usable_memory_bytes(env), std::optional<uint64_t>(5000));
  env["memory"]["limit_bytes"] = nullptr;
  EXPECT_EQ(usable_memory_bytes(env), std::optional<uint64_t>(8000));
  env["memory"]["available_bytes"] = nullptr;
  EXPECT_EQ(usable_memory_bytes(env), std::nullopt);
  EXPECT_EQ(usable_memory_bytes(nlohmann::json::object()), std::nullopt);
}

TEST(Environment, CollectsThisMachine) {
  ::setenv("HIP_VISIBLE_DEVICES", "3", 1);
  ::setenv("PYTORCH_ROCM_ARCH", "", 1);
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  const nlohmann::ordered_json j = collect_environment_json();
  ::unsetenv("HIP_VISIBLE_DEVICES");
  ::unsetenv("PYTORCH_ROCM_ARCH");

  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"qloom", "cpu", "memory", "os", "accelerator", "device_env"}));
  EXPECT_EQ(j["qloom"]["version"], build::kVersion);
  EXPECT_EQ(j["qloom"]["build_type"], build::kBuildType);
  EXPECT_EQ(j["accelerator"], "cpu");

  std::vector<std::string> simd;
  for (const auto& [k, v] : j["cpu"]["simd"].items()) {
    simd.push_back(k);
    EXPECT_TRUE(v.is_boolean()) << k;
  }
  EXPECT_EQ(simd, simd_feature_names());
  EXPECT_GE(j["cpu"]["hardware_threads"].get<unsigned>(), 1u);
  EXPECT_GE(j["cpu"]["usable_threads"].get<unsigned>(), 1u);
  EXPECT_LE(j["cpu"]["usable_threads"].get<unsigned>(), j["cpu"]["hardware_threads"].get<unsigned>());

  std::vector<std::string> env_keys;
  for (const auto& [k, v] : j["device_env"].items()) env_keys.push_back(k);
  EXPECT_EQ(env_keys, device_env_var_names());
  EXPECT_EQ(j["device_env"]["HIP_VISIBLE_DEVICES"], "3");
  EXPECT_EQ(j["device_env"]["PYTORCH_ROCM_ARCH"], "");  // set but empty: kept
  EXPECT_TRUE(j["device_env"]["CUDA_VISIBLE_DEVICES"].is_null());

  // The facts agree with the files they come from.
  if (fs::exists("/proc/cpuinfo")) {
    std::ifstream in("/proc/cpuinfo");
    std::stringstream ss;
    ss << in.rdbuf();
    const CpuInfo c = parse_cpuinfo(ss.str());
    EXPECT_EQ(j["cpu"]["model_name"], c.model_name);
    if (c.has_flags) {
      EXPECT_EQ(j["cpu"]["flags_source"], "/proc/cpuinfo");
      for (const auto& f : simd_feature_names()) EXPECT_EQ(j["cpu"]["simd"][f].get<bool>(), c.flags.count(f) == 1) << f;
    }
  }
  if (fs::exists("/proc/meminfo")) {
    ASSERT_TRUE(j["memory"]["total_bytes"].is_number_unsigned());
    EXPECT_GT(j["memory"]["total_bytes"].get<uint64_t>(), 0u);
    EXPECT_TRUE(j["memory"]["total"].is_string());
  }
  EXPECT_FALSE(j["os"]["kernel"].get<std::string>().empty());
  // avx512 kernels are only chosen when the CPU has avx512f.
  if (j["cpu"]["qloom_isa"] == "avx512") {
    EXPECT_TRUE(j["cpu"]["simd"]["avx512f"].get<bool>());
  }

  // It matches the environment definition of the model_analysis schema.
  const auto v = validate_json(artifact_schema("model_analysis")["definitions"]["environment"], j);
  EXPECT_TRUE(v.empty()) << (v.empty() ? "" : v[0].path + ": " + v[0].message);
}

TEST(Environment, StableAcrossCallsExceptAvailableMemory) {
  nlohmann::ordered_json a = collect_environment_json(), b = collect_environment_json();
  for (auto* j : {&a, &b}) {
    (*j)["memory"]["available_bytes"] = nullptr;
    (*j)["memory"]["available"] = nullptr;
  }
  EXPECT_EQ(a.dump(), b.dump());
}

}  // namespace
}  // namespace qloom::agent
