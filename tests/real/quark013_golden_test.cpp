// qloom against amd-quark 0.13 itself on SmolLM2-135M: for every golden of
// tests/data/quark013 (scripts/goldens/quark013_goldens.py ran Quark on the
// same model with the same calibration samples), qloom quantize runs with the
// golden's settings (settings.qloom_args) and its output is compared
//   - quantization_config key by key (every differing JSON path listed),
//   - the tensor count, and for the tracked tensors (layer 0 q/k/v/down_proj,
//     the last layer's q/down_proj, both layers' self_attn scales): dtype,
//     shape and sha256 of the bytes,
//   - every one-element tensor (the static scales): bits.
// Goldens of Quark run in float32 (id *_f32) hold an F32 model: there only
// the config and the scale values are compared, qloom's bf16 scale against
// Quark's fp32 one rounded to bf16, in bf16 ulps.
// What must be identical: the config, the tensor count, every tracked
// tensor's dtype and shape, the bytes of every tracked tensor that is not a
// calibrated activation scale (RTN weights, weight scales, zero points).
// What is held to a bound: calibrated scales (input / output /
// prob_output_scale, nvfp4's input_scale_2) within kScaleUlps bf16 ulps of Quark's (qloom computes
// the calibration forward in fp32, or with --data_type bfloat16 rounds some
// of it to bf16; torch rounds every op: see quant/bf16_calibration.h); the
// bytes of weights an algorithm (GPTQ) produced, which follow its float
// accumulation order, are listed, not judged. Every difference is printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ostream>

#include "qloom/core/dtype.h"
#include "qloom/core/float_codec.h"
#include "qloom/job/algo_config_file.h"
#include "qloom/io/weight_index.h"
#include "real/real_model.h"

namespace qloom {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Calibrated static scales: measured at most 7 bf16 ulps off Quark's bf16 run
// on SmolLM2 (fp8, int8, fp8 KV + attention; 8 samples of 128 tokens).
constexpr size_t kScaleUlps = 8;
// nvfp4 quantizes every activation to fp4 during calibration, which turns
// the bf16 rounding differences of earlier layers into whole fp4 steps:
// measured at most 9 bf16 ulps of input_scale_2 (layer 12 gate/up_proj,
// layer 17 down_proj; 8 samples of 128 tokens).
constexpr size_t kFp4ActivationScaleUlps = 12;

bool is_calibrated_scale(const std::string& name) {
  for (const char* s : {".input_scale", ".input_scale_2", ".output_scale", ".prob_output_scale"})
    if (name.size() > std::strlen(s) && name.compare(name.size() - std::strlen(s), std::strlen(s), s) == 0) return true;
  return false;
}

fs::path golden_dir() { return fs::path(QLOOM_TEST_DATA_DIR) / "quark013"; }

std::vector<std::string> golden_ids() {
  std::vector<std::string> ids;
  if (!fs::exists(golden_dir())) return ids;
  for (const auto& e : fs::directory_iterator(golden_dir())) {
    const std::string n = e.path().filename().string();
    if (e.path().extension() == ".json" && n.rfind("demo_", 0) != 0) ids.push_back(e.path().stem().string());
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

// Every JSON path where `a` (ours) and `b` (Quark's) differ.
void json_diff(const json& a, const json& b, const std::string& path, std::vector<std::string>& out) {
  if (a.is_object() && b.is_object()) {
    for (const auto& [k, v] : b.items())
      if (!a.contains(k)) out.push_back(path + "." + k + ": missing (Quark: " + v.dump() + ")");
      else json_diff(a[k], v, path + "." + k, out);
    for (const auto& [k, v] : a.items())
      if (!b.contains(k)) out.push_back(path + "." + k + ": extra (ours: " + v.dump() + ")");
    return;
  }
  if (a.is_array() && b.is_array() && a.size() == b.size()) {
    for (size_t i = 0; i < a.size(); ++i) json_diff(a[i], b[i], path + "[" + std::to_string(i) + "]", out);
    return;
  }
  if (a != b) out.push_back(path + ": ours " + a.dump() + ", Quark " + b.dump());
}

std::string shape_text(const std::vector<uint64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// The float a one-element tensor holds (F32 / BF16 / F16), NaN otherwise.
float scalar_value(const std::string& dtype, const std::string& hex_be) {
  const uint32_t bits = static_cast<uint32_t>(std::stoul(hex_be, nullptr, 16));
  if (dtype == "F32") return std::bit_cast<float>(bits);
  if (dtype == "BF16") return bf16_to_float(static_cast<uint16_t>(bits));
  return NAN;
}

std::string bits_hex(const io::TensorView& v) {
  std::string h;
  char buf[3];
  for (size_t i = v.data.size(); i-- > 0;) {  // little-endian bytes, printed big-endian
    std::snprintf(buf, sizeof buf, "%02x", std::to_integer<unsigned>(v.data[i]));
    h += buf;
  }
  return h;
}

class Quark013Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Quark013Golden, QloomMatchesQuark) {
  const std::string id = GetParam();
  const json g = test::read_json_file(golden_dir() / (id + ".json"));
  const bool f32 = g["settings"]["data_type"] == "float32";
  const size_t bound = g["settings"]["quant_scheme"] == "nvfp4" ? kFp4ActivationScaleUlps : kScaleUlps;
  test::TempDir tmp("quark013-" + id);
  const auto out = tmp / "q";
  std::vector<std::string> args = {"quantize", "--model_dir", test::real_model_dir().string(), "--output_dir",
                                   out.string(), "--progress", "off", "--threads", "2"};
  for (const auto& a : g["settings"]["qloom_args"]) args.push_back(a.get<std::string>());
  const test::CommandResult r = test::run_qloom(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  std::vector<std::string> bad;
  const json ours_cfg = test::read_json_file(out / "config.json");
  json_diff(ours_cfg["quantization_config"], g["quantization_config"], "quantization_config", bad);
  const size_t config_mismatches = bad.size();

  const io::WeightIndex w = io::WeightIndex::open(out);
  const bool algorithm = g["settings"].contains("algorithm");
  std::vector<std::string> info;  // differences listed but within the rules
  size_t tensors = w.tensor_names().size(), hashed = 0, scalars = 0, ulp_max = 0, ulp_off = 0;
  if (!f32 && tensors != g["tensor_count"].get<size_t>())
    bad.push_back("tensor count: ours " + std::to_string(tensors) + ", Quark " + g["tensor_count"].dump());
  if (!f32)
    for (const auto& [name, t] : g["tensors"].items()) {
      const io::TensorInfo* tinfo = w.find(name);
      if (!tinfo) {
        bad.push_back(name + ": missing");
        continue;
      }
      const io::TensorView v = w.view(name);
      const std::string dt(dtype_info(tinfo->dtype).safetensors_name);
      const std::string sha =
          job::sha256_hex(std::string(reinterpret_cast<const char*>(v.data.data()), v.data.size()));
      ++hashed;
      const std::string line = name + ": ours " + dt + " " + shape_text(tinfo->shape) + " " + sha.substr(0, 12) +
                               ", Quark " + t["dtype"].get<std::string>() + " " + t["shape"].dump() + " " +
                               t["sha256"].get<std::string>().substr(0, 12);
      if (dt != t["dtype"] || shape_text(tinfo->shape) != shape_text(t["shape"].get<std::vector<uint64_t>>()))
        bad.push_back(line);
      else if (sha != t["sha256"])
        (algorithm || is_calibrated_scale(name) ? info : bad).push_back(line);
    }
  for (const auto& [name, t] : g["scalars"].items()) {
    const io::TensorInfo* tinfo = w.find(name);
    if (!tinfo) {
      bad.push_back(name + ": missing");
      continue;
    }
    ++scalars;
    const io::TensorView v = w.view(name);
    const std::string dt(dtype_info(tinfo->dtype).safetensors_name);
    const std::string ours_hex = bits_hex(v);
    if (!f32 && dt != t[0]) {
      bad.push_back(name + ": ours " + dt + ", Quark " + t[0].get<std::string>());
      continue;
    }
    if (dt == t[0] && ours_hex == t[1]) continue;  // identical (zero points must be)
    // Values in bf16 ulps (Quark's fp32 scales rounded to bf16 first).
    const float q = scalar_value(t[0], t[1]), o = scalar_value(dt, ours_hex);
    const int qb = float_to_bf16(q), ob = float_to_bf16(o);
    const size_t ulps = static_cast<size_t>(std::abs(qb - ob));
    const std::string line = name + ": " + std::to_string(ulps) + " bf16 ulp (ours " + std::to_string(o) +
                             ", Quark " + std::to_string(q) + ")";
    // bf16 goldens: only calibrated scales may differ; f32 goldens: every
    // scale is a value computed in another dtype, held to the bound.
    if (!std::isfinite(q) || !std::isfinite(o) || (!f32 && !is_calibrated_scale(name))) {
      bad.push_back(line);
      continue;
    }
    if (!ulps) continue;
    ulp_max = std::max(ulp_max, ulps);
    ++ulp_off;
    (ulps <= bound ? info : bad).push_back(line);
  }
  std::printf("[quark013] %-26s config mismatches %zu, tensors %zu, hashed %zu, scalars %zu (%zu off, max %zu bf16 "
              "ulp), listed differences %zu, failures %zu\n",
              id.c_str(), config_mismatches, tensors, hashed, scalars, ulp_off, ulp_max, info.size(), bad.size());
  for (const auto& i : info) std::printf("  [within rules] %s\n", i.c_str());
  std::string list;
  for (const auto& b : bad) list += "  " + b + "\n";
  EXPECT_TRUE(bad.empty()) << bad.size() << " mismatch(es) with amd-quark 0.13:\n" << list;
}

INSTANTIATE_TEST_SUITE_P(Real, Quark013Golden, ::testing::ValuesIn(golden_ids()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Quark013Golden);

}  // namespace
}  // namespace qloom
