// collect_environment: reads the machine facts of environment.h.
#include "qloom/agent/environment.h"

#include <sched.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "qloom/core/strings.h"
#include "qloom/build_info.h"
#include "qloom/core/convert.h"
#include "qloom/core/format.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace qloom::agent {
namespace {


// Whole small file, or nullopt when it cannot be opened.
std::optional<std::string> slurp(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Splits `text` into lines and calls f(key, value) for "key : value" lines.
template <class F>
void for_each_key_value(std::string_view text, F&& f) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    if (!f(trim(line.substr(0, colon)), trim(line.substr(colon + 1)))) return;
  }
}

std::optional<uint64_t> parse_u64(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

// CPUID fallback for the SIMD flags when /proc/cpuinfo has none.
std::set<std::string> cpuid_flags() {
  std::set<std::string> f;
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    if (c & (1u << 12)) f.insert("fma");
    if (c & (1u << 29)) f.insert("f16c");
  }
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    if (b & (1u << 5)) f.insert("avx2");
    if (b & (1u << 16)) f.insert("avx512f");
    if (b & (1u << 30)) f.insert("avx512bw");
    if (b & (1u << 31)) f.insert("avx512vl");
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
    if (a & (1u << 5)) f.insert("avx512_bf16");
  }
#endif
  return f;
}

nlohmann::ordered_json opt_bytes(const std::optional<uint64_t>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}
nlohmann::ordered_json opt_human(const std::optional<uint64_t>& v) {
  return v ? nlohmann::ordered_json(format_bytes(*v)) : nlohmann::ordered_json(nullptr);
}

}  // namespace

const std::vector<std::string>& simd_feature_names() {
  static const std::vector<std::string> v = {"avx2",     "fma",      "f16c",       "avx512f",
                                             "avx512bw", "avx512vl", "avx512_bf16"};
  return v;
}

const std::vector<std::string>& device_env_var_names() {
  static const std::vector<std::string> v = {"HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "HSA_OVERRIDE_GFX_VERSION",
                                             "PYTORCH_ROCM_ARCH", "PYTORCH_HIP_ALLOC_CONF"};
  return v;
}

CpuInfo parse_cpuinfo(std::string_view text) {
  CpuInfo info;
  bool have_model = false;
  for_each_key_value(text, [&](const std::string& key, const std::string& value) {
    if (!have_model && key == "model name") {
      info.model_name = value;
      have_model = true;
    } else if (!info.has_flags && (key == "flags" || key == "Features")) {
      info.has_flags = true;
      std::istringstream words(value);
      for (std::string w; words >> w;) info.flags.insert(w);
    }
    return !(have_model && info.has_flags);
  });
  return info;
}

MemInfo parse_meminfo(std::string_view text) {
  MemInfo m;
  for_each_key_value(text, [&](const std::string& key, const std::string& value) {
    if (key != "MemTotal" && key != "MemAvailable") return true;
    std::string num = value;
    bool kb = false;
    if (num.size() > 3 && num.compare(num.size() - 3, 3, " kB") == 0) {
      num.resize(num.size() - 3);
      kb = true;
    }
    if (auto v = parse_u64(trim(num))) (key == "MemTotal" ? m.total_bytes : m.available_bytes) = kb ? *v * 1024 : *v;
    return true;
  });
  return m;
}

std::string parse_os_release_pretty_name(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string line = trim(text.substr(pos, nl - pos));
    pos = nl + 1;
    if (line.rfind("PRETTY_NAME=", 0) != 0) continue;
    std::string v = line.substr(12);
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) v = v.substr(1, v.size() - 2);
    std::string out;  // os-release allows \" \\ \$ \` escapes inside double quotes
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] == '\\' && i + 1 < v.size()) ++i;
      out += v[i];
    }
    return out;
  }
  return {};
}

std::optional<uint64_t> parse_cgroup_memory_max(std::string_view text) { return parse_u64(trim(text)); }

EnvironmentFacts collect_environment() {
  EnvironmentFacts f;
  f.qloom_version = build::kVersion;
  f.build_type = build::kBuildType;
  f.build_flags = build::kFlags;
  f.compiler = build::kCompiler;

  CpuInfo cpu;
  if (auto text = slurp("/proc/cpuinfo")) cpu = parse_cpuinfo(*text);
  f.cpu_model = cpu.model_name;
  std::set<std::string> flags;
  if (cpu.has_flags) {
    flags = cpu.flags;
    f.cpu_flags_source = "/proc/cpuinfo";
  } else {
#if defined(__x86_64__)
    flags = cpuid_flags();
    f.cpu_flags_source = "cpuid";
#endif
  }
  for (const auto& name : simd_feature_names()) f.simd.emplace_back(name, flags.count(name) != 0);
  f.qloom_isa = isa_name(best_isa());

  f.hardware_threads = std::thread::hardware_concurrency();
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) f.usable_threads = static_cast<unsigned>(CPU_COUNT(&set));
  if (f.usable_threads == 0 || (f.hardware_threads != 0 && f.usable_threads > f.hardware_threads))
    f.usable_threads = f.hardware_threads;

  if (auto text = slurp("/proc/meminfo")) {
    const MemInfo m = parse_meminfo(*text);
    f.memory_total_bytes = m.total_bytes;
    f.memory_available_bytes = m.available_bytes;
  }
  if (auto text = slurp("/sys/fs/cgroup/memory.max")) f.memory_limit_bytes = parse_cgroup_memory_max(*text);

  if (auto text = slurp("/etc/os-release")) f.os = parse_os_release_pretty_name(*text);
  struct utsname u {};
  if (uname(&u) == 0) {
    f.kernel = std::string(u.sysname) + " " + u.release;
    f.machine = u.machine;
  }

  for (const auto& name : device_env_var_names()) {
    const char* v = std::getenv(name.c_str());
    f.device_env.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
  }
  return f;
}

nlohmann::ordered_json to_json(const EnvironmentFacts& f) {
  using oj = nlohmann::ordered_json;
  oj j;
  j["qloom"] = {{"version", f.qloom_version},
                {"build_type", f.build_type},
                {"build_flags", f.build_flags},
                {"compiler", f.compiler}};
  oj simd = oj::object();
  for (const auto& [name, on] : f.simd) simd[name] = on;
  j["cpu"] = {{"model_name", f.cpu_model},
              {"flags_source", f.cpu_flags_source},
              {"simd", simd},
              {"qloom_isa", f.qloom_isa},
              {"hardware_threads", f.hardware_threads},
              {"usable_threads", f.usable_threads}};
  j["memory"] = {{"total_bytes", opt_bytes(f.memory_total_bytes)},
                 {"available_bytes", opt_bytes(f.memory_available_bytes)},
                 {"limit_bytes", opt_bytes(f.memory_limit_bytes)},
                 {"total", opt_human(f.memory_total_bytes)},
                 {"available", opt_human(f.memory_available_bytes)},
                 {"limit", opt_human(f.memory_limit_bytes)}};
  j["os"] = {{"name", f.os}, {"kernel", f.kernel}, {"machine", f.machine}};
  j["accelerator"] = "cpu";
  oj env = oj::object();
  for (const auto& [name, value] : f.device_env) env[name] = value ? oj(*value) : oj(nullptr);
  j["device_env"] = env;
  return j;
}

nlohmann::ordered_json collect_environment_json() { return to_json(collect_environment()); }

std::optional<uint64_t> usable_memory_bytes(const nlohmann::json& environment) {
  if (!environment.is_object()) return std::nullopt;
  auto mem = environment.find("memory");
  if (mem == environment.end() || !mem->is_object()) return std::nullopt;
  auto get = [&](const char* key) -> std::optional<uint64_t> {
    auto it = mem->find(key);
    if (it == mem->end() || !it->is_number_integer() || it->get<int64_t>() < 0) return std::nullopt;
    return it->get<uint64_t>();
  };
  const auto avail = get("available_bytes"), limit = get("limit_bytes");
  if (avail && limit) return std::min(*avail, *limit);
  return avail ? avail : limit;
}

}  // namespace qloom::agent
