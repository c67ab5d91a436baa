// The machine facts an agent run records (model_analysis.json "environment",
// the run manifest, assessment): what qloom build runs, on which CPU, with how
// much memory, on which OS, and the accelerator-related environment variables
// seed 003 says to inspect and preserve.
//
// Contract:
//   - Read-only and cheap: /proc/cpuinfo, /proc/meminfo, the cgroup v2 memory
//     limit (/sys/fs/cgroup/memory.max), /etc/os-release, uname(2),
//     sched_getaffinity(2), CPUID (only when /proc/cpuinfo has no "flags"),
//     getenv. A source that cannot be read leaves its fields empty / null;
//     collect_environment() never throws.
//   - Deterministic given the machine and its environment variables, except
//     memory_available_bytes, which is the kernel's figure at the moment of
//     the call.
//   - qloom computes on the CPU; "accelerator" is always "cpu". The device
//     variables (HIP_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES,
//     HSA_OVERRIDE_GFX_VERSION, PYTORCH_ROCM_ARCH, PYTORCH_HIP_ALLOC_CONF) are
//     recorded for the serving side that loads the exported model: every one
//     of the five keys is always present in the JSON, null when the variable
//     is unset, its exact value (possibly "") when set.
//   - SIMD: the instruction-set extensions qloom's kernels use, by their
//     /proc/cpuinfo flag names, each true/false (fixed key order, see
//     simd_feature_names()); "qloom_isa" is what qloom's kernels actually
//     run with (core/convert.h best_isa(), honouring QLOOM_MAX_ISA).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace qloom::agent {

struct EnvironmentFacts {
  // qloom build (generated build_info.h).
  std::string qloom_version, build_type, build_flags, compiler;
  // CPU.
  std::string cpu_model;            // /proc/cpuinfo "model name", "" when unknown
  std::string cpu_flags_source;     // "/proc/cpuinfo" | "cpuid" | "" (none readable)
  std::vector<std::pair<std::string, bool>> simd;  // simd_feature_names() order
  std::string qloom_isa;            // "scalar" | "avx2" | "avx512"
  unsigned hardware_threads = 0;    // std::thread::hardware_concurrency()
  unsigned usable_threads = 0;      // CPUs in this process's affinity mask (<= hardware_threads)
  // Memory (bytes).
  std::optional<uint64_t> memory_total_bytes;      // MemTotal
  std::optional<uint64_t> memory_available_bytes;  // MemAvailable
  std::optional<uint64_t> memory_limit_bytes;      // cgroup v2 memory.max; nullopt: "max" / no cgroup
  // OS.
  std::string os;       // /etc/os-release PRETTY_NAME, "" when unknown
  std::string kernel;   // uname: "<sysname> <release>"
  std::string machine;  // uname: "x86_64", ...
  // Device environment variables, device_env_var_names() order; nullopt = unset.
  std::vector<std::pair<std::string, std::optional<std::string>>> device_env;
};

// Reads the facts now (see the contract above). Never throws.
EnvironmentFacts collect_environment();

// JSON form (keys in this fixed order):
//   {"qloom": {"version", "build_type", "build_flags", "compiler"},
//    "cpu": {"model_name", "flags_source", "simd": {<feature>: bool, ...},
//            "qloom_isa", "hardware_threads", "usable_threads"},
//    "memory": {"total_bytes", "available_bytes", "limit_bytes",
//               "total", "available", "limit"},   (bytes: integer | null;
//               the human strings: format_bytes() | null)
//    "os": {"name", "kernel", "machine"},
//    "accelerator": "cpu",
//    "device_env": {"HIP_VISIBLE_DEVICES": string | null, ...}}
// Matches schemas/model_analysis.schema.json#/definitions/environment.
nlohmann::ordered_json to_json(const EnvironmentFacts& facts);

// collect_environment() as JSON.
nlohmann::ordered_json collect_environment_json();

// The memory a run may use: the smaller of available memory and the cgroup
// limit, from an environment JSON (to_json's form); nullopt when neither is
// known or the JSON lacks them.
std::optional<uint64_t> usable_memory_bytes(const nlohmann::json& environment);

// "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_bf16".
const std::vector<std::string>& simd_feature_names();
// "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "HSA_OVERRIDE_GFX_VERSION",
// "PYTORCH_ROCM_ARCH", "PYTORCH_HIP_ALLOC_CONF".
const std::vector<std::string>& device_env_var_names();

// ---- parsers of the files read (pure; exposed for tests) ----
struct CpuInfo {
  std::string model_name;           // first "model name" line, trimmed
  std::set<std::string> flags;      // first "flags" line ("Features" on ARM)
  bool has_flags = false;
};
CpuInfo parse_cpuinfo(std::string_view text);

struct MemInfo {
  std::optional<uint64_t> total_bytes, available_bytes;  // "MemTotal:  N kB" * 1024
};
MemInfo parse_meminfo(std::string_view text);

// PRETTY_NAME's value with shell quoting removed ("" when absent).
std::string parse_os_release_pretty_name(std::string_view text);

// cgroup v2 memory.max: a byte count, or nullopt for "max" / anything else.
std::optional<uint64_t> parse_cgroup_memory_max(std::string_view text);

}  // namespace qloom::agent
