// Helpers of the compressed-tensors converter tests: quantizing the demo
// model, qloom's own dequantization of a Quark checkpoint, and a plain
// reference decoder of compressed-tensors tensors (written from the format's
// description, independent of the converter's code).
#pragma once

#include <bit>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qloom/core/float_codec.h"
#include "qloom/export/checkpoint_runtime.h"
#include "qloom/job/quantize_job.h"
#include "qloom/io/model_dir.h"
#include "qloom/io/weight_index.h"

namespace qloom::exporter::ct_test {

namespace fs = std::filesystem;

// The demo model quantized with `scheme` (down_proj excluded, layers int4
// cannot hold kept in bf16, small calibration); extra: "--kv_cache_dtype X",
// "--layer_quant_scheme PATTERN SCHEME".
inline void quantize_demo(const std::string& scheme, const fs::path& out, const std::vector<std::string>& extra = {}) {
  job::QuantizeOptions o;
  o.model_dir = QLOOM_DEMO_MODEL_DIR;
  o.output_dir = out;
  o.quant_scheme = scheme;
  o.exclude_layers = {"*down_proj"};
  o.exclude_unsupported = true;
  o.num_calib_data = 4;
  o.seq_len = 32;
  o.threads = 1;
  for (size_t i = 0; i < extra.size(); ++i) {
    if (extra[i] == "--kv_cache_dtype") o.kv_cache_dtype = extra.at(++i);
    else if (extra[i] == "--layer_quant_scheme") {
      o.layer_quant_scheme.emplace_back(extra.at(i + 1), extra.at(i + 2));
      i += 2;
    } else ADD_FAILURE() << "unknown flag " << extra[i];
  }
  job::quantize_model(o);
}

// An integer tensor's values (I8 / I32 / I64).
inline std::vector<int64_t> read_ints(const io::WeightIndex& w, const std::string& name) {
  const io::TensorView v = w.view(name);
  std::vector<int64_t> out(v.numel());
  for (size_t i = 0; i < out.size(); ++i) {
    const std::byte* p = v.data.data();
    if (v.dtype() == DType::kI8) out[i] = static_cast<int8_t>(p[i]);
    else if (v.dtype() == DType::kI32) { int32_t x; std::memcpy(&x, p + 4 * i, 4); out[i] = x; }
    else if (v.dtype() == DType::kI64) { int64_t x; std::memcpy(&x, p + 8 * i, 8); out[i] = x; }
    else ADD_FAILURE() << name << " is not an integer tensor";
  }
  return out;
}

inline std::vector<float> read_floats(const io::WeightIndex& w, const std::string& name) {
  const io::TensorView v = w.view(name);
  std::vector<float> out(v.numel());
  for (size_t i = 0; i < out.size(); ++i) {
    const std::byte* p = v.data.data();
    uint16_t h = 0;
    if (v.dtype() == DType::kF32) std::memcpy(&out[i], p + 4 * i, 4);
    else if (v.dtype() == DType::kBF16) { std::memcpy(&h, p + 2 * i, 2); out[i] = bf16_to_float(h); }
    else if (v.dtype() == DType::kF16) { std::memcpy(&h, p + 2 * i, 2); out[i] = f16_to_float(h); }
    else if (v.dtype() == DType::kF8_E4M3) out[i] = fp8_e4m3_to_float(static_cast<uint8_t>(p[i]));
    else ADD_FAILURE() << name << " is not a float tensor";
  }
  return out;
}

// qloom's dequantization (CheckpointRuntime's weight source, what the
// engine evaluates) of every quantized linear of a Quark checkpoint.
inline std::map<std::string, std::vector<float>> quark_dequantized(const fs::path& quark) {
  const io::ModelDir dir = io::ModelDir::open(quark, true);
  const CheckpointRuntime rt = open_checkpoint_runtime(dir);
  std::map<std::string, std::vector<float>> out;
  for (const std::string& n : dir.weights().tensor_names()) {
    if (!n.ends_with(".weight_scale")) continue;
    const std::string module = n.substr(0, n.size() - std::strlen(".weight_scale"));
    const engine::HostTensor t = rt.weights->load(module + ".weight");
    std::vector<float> v(t.bytes.size() / 4);
    std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
    out[module] = std::move(v);
  }
  return out;
}

// The weights QuantizationArgs of the config group targeting `module`.
inline nlohmann::json ct_weight_args_of(const nlohmann::json& qc, const std::string& module) {
  for (const auto& [name, g] : qc["config_groups"].items())
    for (const auto& t : g["targets"])
      if (t == module || (t == "Linear" && qc["config_groups"].size() == 1)) return g["weights"];
  ADD_FAILURE() << module << " is in no config group";
  return {};
}

// Unpacks pack_to_int32 rows: element c at bits [c*b, c*b+b) of the row's
// word stream, minus 2^(b-1).
inline std::vector<int32_t> unpack_rows(const std::vector<int64_t>& words, uint64_t rows, uint64_t cols, int b) {
  const uint64_t per_row = (cols * b + 31) / 32;
  std::vector<int32_t> out(rows * cols);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < cols; ++c) {
      const uint32_t w = static_cast<uint32_t>(words[r * per_row + c * b / 32]);
      out[r * cols + c] = static_cast<int32_t>((w >> (c * b % 32)) & ((1u << b) - 1)) - (1 << (b - 1));
    }
  return out;
}

// compressed-tensors' dequantization of `module` in float32:
// (q - zero_point) * scale.
inline std::vector<float> ct_dequantize(const io::WeightIndex& w, const nlohmann::json& qc, const std::string& m) {
  const nlohmann::json a = ct_weight_args_of(qc, m);
  const int b = a["num_bits"];
  const bool packed = w.find(m + ".weight_packed") != nullptr;
  uint64_t out = 0, in = 0;
  std::vector<float> q;
  if (packed) {
    const std::vector<int64_t> shape = read_ints(w, m + ".weight_shape");
    out = shape[0], in = shape[1];
    for (int32_t v : unpack_rows(read_ints(w, m + ".weight_packed"), out, in, b)) q.push_back(static_cast<float>(v));
  } else {
    out = w.find(m + ".weight")->shape[0], in = w.find(m + ".weight")->shape[1];
    if (a["type"] == "float") q = read_floats(w, m + ".weight");
    else for (int64_t v : read_ints(w, m + ".weight")) q.push_back(static_cast<float>(v));
  }
  const std::vector<float> s = read_floats(w, m + ".weight_scale");
  const uint64_t groups = a["strategy"] == "group" ? (in + a["group_size"].get<uint64_t>() - 1) / a["group_size"].get<uint64_t>() : 1;
  std::vector<float> zp(s.size(), 0.0f);
  if (w.find(m + ".weight_zero_point")) {
    const std::vector<int64_t> raw = read_ints(w, m + ".weight_zero_point");
    if (packed) {  // packed along dim 0: unpack the transpose
      std::vector<int64_t> tr(raw.size());
      const uint64_t words = (out * b + 31) / 32;
      for (uint64_t wi = 0; wi < words; ++wi)
        for (uint64_t g = 0; g < groups; ++g) tr[g * words + wi] = raw[wi * groups + g];
      const std::vector<int32_t> z = unpack_rows(tr, groups, out, b);
      for (uint64_t o = 0; o < out; ++o)
        for (uint64_t g = 0; g < groups; ++g) zp[o * groups + g] = static_cast<float>(z[g * out + o]);
    } else {
      for (size_t i = 0; i < raw.size(); ++i) zp[i] = static_cast<float>(raw[i]);
    }
  }
  std::vector<float> r(out * in);
  const uint64_t gs = a["strategy"] == "group" ? a["group_size"].get<uint64_t>() : in;
  for (uint64_t o = 0; o < out; ++o)
    for (uint64_t i = 0; i < in; ++i) {
      const size_t si = s.size() == 1 ? 0 : o * groups + i / gs;
      r[o * in + i] = (q[o * in + i] - zp[si]) * s[si];
    }
  return r;
}

}  // namespace qloom::exporter::ct_test
