// Determinism (issue 12, Deliver 4): `qloom quantize` of the demo model gives
// byte-identical outputs whatever the thread count (1, 2, 3), the ISA cap
// (QLOOM_MAX_ISA avx2 / scalar vs unset: avx512 where the CPU has it) and
// the OpenBLAS kernel (OPENBLAS_CORETYPE Haswell / SkylakeX / unset), set in
// the child's environment. Every algorithm runs under a covering set of
// combinations in which each axis takes every value at least once; the
// sha256 of each .safetensors file and of config.json must match the first
// run's. Small calibration (8 samples x 100 tokens): rows < 128, so the
// linears take the GEMV kernels, whose lane order is the ISA-sensitive one,
// and attention's score GEMMs take both kernels.
#include <openssl/evp.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace qloom {
namespace {

namespace fs = std::filesystem;

std::string sha256_of(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), d, &n, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) out += hex[d[i] >> 4], out += hex[d[i] & 15];
  return out;
}

// File name -> sha256 of every *.safetensors and config.json in `dir`.
std::map<std::string, std::string> digests(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".safetensors" || name == "config.json") out[name] = sha256_of(e.path());
  }
  return out;
}

struct Env {
  unsigned threads;
  const char* isa;       // QLOOM_MAX_ISA, nullptr: unset
  const char* coretype;  // OPENBLAS_CORETYPE, nullptr: unset
};

std::string describe(const Env& e) {
  return "threads " + std::to_string(e.threads) + ", QLOOM_MAX_ISA " + (e.isa ? e.isa : "unset") +
         ", OPENBLAS_CORETYPE " + (e.coretype ? e.coretype : "unset");
}

// Every value of every axis appears; the first is the one compared against.
const std::vector<Env>& combos() {
  static const std::vector<Env> c = {{2, nullptr, nullptr},
                                     {1, "avx2", "Haswell"},
                                     {3, nullptr, "SkylakeX"},
                                     {3, "avx2", nullptr},
                                     {1, "scalar", "SkylakeX"}};
  return c;
}

void expect_deterministic(const std::vector<std::string>& scheme_args) {
  test::TempDir tmp;
  std::map<std::string, std::string> first;
  int i = 0;
  for (const Env& e : combos()) {
    SCOPED_TRACE(describe(e));
    std::string name = "out";
    name += std::to_string(i++);
    const fs::path out = tmp.path() / name;
    // The child's environment: each variable set or removed explicitly.
    std::vector<std::string> argv{"env", "-u", "QLOOM_MAX_ISA", "-u", "OPENBLAS_CORETYPE"};
    if (e.isa) argv.push_back(std::string("QLOOM_MAX_ISA=") + e.isa);
    if (e.coretype) argv.push_back(std::string("OPENBLAS_CORETYPE=") + e.coretype);
    argv.insert(argv.end(), {QLOOM_CLI_PATH, "quantize", "--model_dir", QLOOM_DEMO_MODEL_DIR, "--output_dir",
                             out.string(), "--num_calib_data", "8", "--seq_len", "100", "--threads",
                             std::to_string(e.threads), "--progress", "off"});
    argv.insert(argv.end(), scheme_args.begin(), scheme_args.end());
    const test::CommandResult r = test::run_command(argv);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const auto d = digests(out);
    ASSERT_TRUE(d.count("config.json") && d.count("model.safetensors")) << out;
    if (first.empty()) {
      first = d;
      continue;
    }
    EXPECT_EQ(d, first);
  }
}

TEST(Determinism, RtnInt4) { expect_deterministic({"--quant_scheme", "int4_wo_32", "--exclude_unsupported"}); }
TEST(Determinism, RtnFp8) { expect_deterministic({"--quant_scheme", "fp8"}); }
TEST(Determinism, Gptq) {
  expect_deterministic({"--quant_scheme", "int4_wo_32", "--exclude_unsupported", "--quant_algo", "gptq"});
}
TEST(Determinism, Awq) {
  expect_deterministic({"--quant_scheme", "uint4_wo_32", "--exclude_unsupported", "--quant_algo", "awq"});
}
TEST(Determinism, SmoothQuant) { expect_deterministic({"--quant_scheme", "int8", "--quant_algo", "smoothquant"}); }
TEST(Determinism, CalibratedStaticScales) {
  expect_deterministic({"--quant_scheme", "fp8", "--kv_cache_dtype", "fp8"});
}

}  // namespace
}  // namespace qloom
