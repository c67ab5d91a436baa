#include "qloom/validate/self_test.h"

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <system_error>

#include <nlohmann/json.hpp>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/io/text_file.h"
#include "qloom/io/model_dir.h"
#include "qloom/io/weight_index.h"
#include "qloom/validate/checkpoint_pair.h"
#include "qloom/validate/name_patterns.h"
#include "qloom/validate/validator.h"

namespace qloom::validate {

namespace fs = std::filesystem;
using oj = nlohmann::ordered_json;

namespace {

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  if (!out) throw_errno(errno, p.string(), "writing", /*writing=*/true);
}

void make_new_dir(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(dir, ec)))
    throw Error(ErrorKind::kUsage, dir.string(), "", "already exists",
                "pass a path that does not exist yet");
  fs::create_directories(dir, ec);
  if (ec) throw_errno(ec.value(), dir.string(), "creating the directory", /*writing=*/true);
}

bool matches(const std::vector<std::string>& globs, const std::string& name) {
  const std::string_view module = module_of(name);
  for (const auto& g : globs)
    if (glob_match(g, name) || glob_match(g, module)) return true;
  return false;
}

oj fp8_per_tensor_spec() {
  return {{"dtype", "fp8_e4m3"},
          {"is_dynamic", false},
          {"qscheme", "per_tensor"},
          {"ch_axis", nullptr},
          {"group_size", nullptr},
          {"symmetric", true},
          {"round_method", "half_even"},
          {"scale_type", "float"},
          {"scale_format", nullptr},
          {"scale_calculation_mode", nullptr},
          {"mx_element_dtype", nullptr},
          {"observer_cls", "PerTensorMinMaxObserver"},
          {"is_scale_quant", false}};
}

oj fake_quantization_config(const FakeQuarkOptions& o) {
  oj global = oj::object();
  global["weight"] = fp8_per_tensor_spec();
  global["input_tensors"] = o.input_scale ? fp8_per_tensor_spec() : oj();
  global["output_tensors"] = nullptr;
  global["bias"] = nullptr;
  global["target_device"] = nullptr;
  oj qc = oj::object();
  qc["quant_method"] = "quark";
  qc["global_quant_config"] = std::move(global);
  qc["exclude"] = o.exclude;
  qc["algo_config"] = nullptr;
  qc["softmax_quant_spec"] = nullptr;
  qc["layer_type_quant_config"] = oj::object();
  qc["layer_quant_config"] = oj::object();
  qc["kv_cache_quant_config"] = oj::object();
  qc["kv_cache_post_rope"] = false;
  qc["quant_mode"] = "eager_mode";
  qc["version"] = "qloom-validator-fake";
  qc["export"] = {{"kv_cache_group", oj::array()},
                  {"min_kv_scale", 0.0},
                  {"pack_method", "reorder"},
                  {"weight_format", "real_quantized"},
                  {"weight_merge_groups", nullptr}};
  return qc;
}

// `value` stored as one element of `dtype`.
std::vector<std::byte> scalar_bytes(DType dtype, float value) {
  std::vector<std::byte> b(static_cast<size_t>(dtype_bits(dtype) / 8));
  from_f32(dtype, &value, b.data(), 1);
  return b;
}

float round_to(DType dtype, float value) {
  const auto b = scalar_bytes(dtype, value);
  float back = 0;
  to_f32(dtype, b.data(), &back, 1);
  return back;
}

}  // namespace

void write_fake_quark_checkpoint(const fs::path& source_dir, const fs::path& out_dir,
                                 const FakeQuarkOptions& o) {
  const io::ModelDir src = io::ModelDir::open(source_dir, /*open_weights=*/true);
  const io::WeightIndex& w = src.weights();
  make_new_dir(out_dir);

  for (const auto& f : src.aux_files()) {
    if (f == "config.json") continue;
    std::error_code ec;
    fs::copy_file(source_dir / f, out_dir / f, ec);
    if (ec) throw_errno(ec.value(), (out_dir / f).string(), "copying", /*writing=*/true);
  }
  oj config = oj::parse(io::read_text_file(source_dir / "config.json"));
  config["quantization_config"] = fake_quantization_config(o);
  write_text(out_dir / "config.json", config.dump(2) + "\n");

  std::vector<std::pair<io::TensorSpec, std::vector<std::byte>>> tensors;
  for (const auto& name : w.tensor_names()) {
    const io::TensorView v = w.view(name);
    const std::string module(module_of(name));
    const bool quantize = name.ends_with(".weight") && v.shape().size() == 2 &&
                          module.find("embed") == std::string::npos && !matches(o.exclude, name);
    if (!quantize) {
      std::vector<std::byte> bytes(v.data.begin(), v.data.end());
      tensors.push_back({{name, v.dtype(), v.shape()}, std::move(bytes)});
      continue;
    }
    if (!dtype_is_float(v.dtype()) || dtype_bits(v.dtype()) < 16)
      throw Error(ErrorKind::kUnsupported, source_dir.string(), name,
                  "the fake FP8 writer needs F32, F16 or BF16 weights");
    const size_t n = static_cast<size_t>(v.numel());
    std::vector<float> x(n);
    to_f32(v.dtype(), v.data.data(), x.data(), n);
    float amax = 0;
    for (float f : x) amax = std::max(amax, std::fabs(f));
    float scale = round_to(v.dtype(), amax / 448.0f);
    if (!(scale > 0) || !std::isfinite(scale)) scale = 1.0f;
    for (float& f : x) f /= scale;
    std::vector<std::byte> codes(n);
    from_f32(DType::kF8_E4M3, x.data(), codes.data(), n);
    tensors.push_back({{name, DType::kF8_E4M3, v.shape()}, std::move(codes)});
    if (o.input_scale)
      tensors.push_back({{module + ".input_scale", v.dtype(), {}},
                         scalar_bytes(v.dtype(), 1.0f / 64.0f)});
    tensors.push_back({{module + ".weight_scale", v.dtype(), {}}, scalar_bytes(v.dtype(), scale)});
  }

  std::vector<std::pair<io::TensorSpec, std::vector<std::byte>>> kept;
  for (auto& t : tensors)
    if (!o.edit || o.edit(t.first, t.second)) kept.push_back(std::move(t));
  for (const auto& t : o.extra_tensors) kept.push_back(t);

  std::vector<io::TensorSpec> specs;
  for (const auto& t : kept) specs.push_back(t.first);
  io::WriterOptions wopts;
  if (o.max_shard_bytes > 0) wopts.max_shard_bytes = o.max_shard_bytes;
  io::SafetensorsWriter writer(out_dir, specs, wopts);
  for (const auto& t : kept) writer.write(t.first.name, t.second);
  writer.finish();
}

void write_self_test_source_model(const fs::path& dir) {
  make_new_dir(dir);
  constexpr int kHidden = 16, kInter = 32, kLayers = 2, kKv = 8, kVocab = 32;
  const oj config = {{"architectures", {"LlamaForCausalLM"}},
                     {"model_type", "llama"},
                     {"hidden_size", kHidden},
                     {"intermediate_size", kInter},
                     {"num_hidden_layers", kLayers},
                     {"num_attention_heads", 2},
                     {"num_key_value_heads", 1},
                     {"head_dim", 8},
                     {"vocab_size", kVocab},
                     {"max_position_embeddings", 64},
                     {"rms_norm_eps", 1e-05},
                     {"rope_theta", 10000.0},
                     {"rope_scaling", nullptr},
                     {"hidden_act", "silu"},
                     {"attention_bias", true},
                     {"mlp_bias", false},
                     {"tie_word_embeddings", false},
                     {"bos_token_id", 1},
                     {"eos_token_id", 2},
                     {"torch_dtype", "bfloat16"},
                     {"transformers_version", "4.46.0"}};
  write_text(dir / "config.json", config.dump(2) + "\n");
  write_text(dir / "generation_config.json",
             "{\n  \"bos_token_id\": 1,\n  \"eos_token_id\": 2,\n  \"transformers_version\": "
             "\"4.46.0\"\n}\n");
  write_text(dir / "tokenizer.json",
             "{\"version\":\"1.0\",\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"<unk>\":0,"
             "\"<s>\":1,\"</s>\":2},\"unk_token\":\"<unk>\"}}\n");
  write_text(dir / "tokenizer_config.json",
             "{\"bos_token\":\"<s>\",\"eos_token\":\"</s>\",\"unk_token\":\"<unk>\","
             "\"chat_template\":\"{% for m in messages %}{{ m['content'] }}{% endfor %}\"}\n");
  write_text(dir / "special_tokens_map.json",
             "{\"bos_token\":\"<s>\",\"eos_token\":\"</s>\",\"unk_token\":\"<unk>\"}\n");
  write_text(dir / "README.md", "# tiny self-test model\n\nSynthetic weights for qloom's validator self-test.\n");
  write_text(dir / "LICENSE", "Public domain test data.\n");

  // Fixed-seed values in a small range; norms near 1.
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>((state >> 40) & 0xFFFFFF) / 16777216.0f - 0.5f;
  };
  std::vector<std::pair<io::TensorSpec, std::vector<std::byte>>> tensors;
  auto add = [&](const std::string& name, std::vector<uint64_t> shape, float scale, float offset) {
    io::TensorSpec spec{name, DType::kBF16, std::move(shape)};
    const size_t n = static_cast<size_t>(spec.numel());
    std::vector<float> x(n);
    for (float& f : x) f = offset + scale * next();
    std::vector<std::byte> b(n * 2);
    from_f32(DType::kBF16, x.data(), b.data(), n);
    tensors.push_back({std::move(spec), std::move(b)});
  };
  add("model.embed_tokens.weight", {kVocab, kHidden}, 0.2f, 0);
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {kHidden}, 0.1f, 1.0f);
    add(p + "self_attn.q_proj.weight", {kHidden, kHidden}, 0.5f, 0);
    add(p + "self_attn.q_proj.bias", {kHidden}, 0.1f, 0);
    add(p + "self_attn.k_proj.weight", {kKv, kHidden}, 0.5f, 0);
    add(p + "self_attn.k_proj.bias", {kKv}, 0.1f, 0);
    add(p + "self_attn.v_proj.weight", {kKv, kHidden}, 0.5f, 0);
    add(p + "self_attn.v_proj.bias", {kKv}, 0.1f, 0);
    add(p + "self_attn.o_proj.weight", {kHidden, kHidden}, 0.5f, 0);
    add(p + "post_attention_layernorm.weight", {kHidden}, 0.1f, 1.0f);
    add(p + "mlp.gate_proj.weight", {kInter, kHidden}, 0.5f, 0);
    add(p + "mlp.up_proj.weight", {kInter, kHidden}, 0.5f, 0);
    add(p + "mlp.down_proj.weight", {kHidden, kInter}, 0.5f, 0);
  }
  add("model.norm.weight", {kHidden}, 0.1f, 1.0f);
  add("lm_head.weight", {kVocab, kHidden}, 0.2f, 0);

  std::vector<std::pair<io::TensorSpec, std::span<const std::byte>>> views;
  for (const auto& t : tensors) views.push_back({t.first, t.second});
  io::write_safetensors_file(dir / "model.safetensors", views, {{"format", "pt"}});
}

namespace {

struct SelfTestCase {
  std::string title;
  int failing_step;  // 0: every step ok
  // Builds the checkpoint at `out` from the source at `src`.
  std::function<void(const fs::path& src, const fs::path& out)> make;
};

// Changes one byte of a file in place, keeping its size.
void change_byte(const fs::path& file, char from, char to) {
  std::string text = io::read_text_file(file);
  const size_t at = text.find(from);
  if (at == std::string::npos)
    throw Error(ErrorKind::kInternal, file.string(), "", "self-test: nothing to change");
  text[at] = to;
  write_text(file, text);
}

std::vector<SelfTestCase> self_test_cases() {
  FakeQuarkOptions sharded;
  sharded.max_shard_bytes = 4096;  // exercise the shard index
  auto plain = [sharded](const fs::path& s, const fs::path& o) {
    write_fake_quark_checkpoint(s, o, sharded);
  };
  std::vector<SelfTestCase> cases;
  cases.push_back({"correct checkpoint: every check passes", 0, plain});
  cases.push_back({"tokenizer.json missing", 1, [plain](const fs::path& s, const fs::path& o) {
                     plain(s, o);
                     fs::remove(o / "tokenizer.json");
                   }});
  cases.push_back({"generation_config.json: one byte changed", 1,
                   [plain](const fs::path& s, const fs::path& o) {
                     plain(s, o);
                     change_byte(o / "generation_config.json", '2', '3');  // eos_token_id 2 -> 3
                   }});
  cases.push_back({"config.json: a key changed", 3, [plain](const fs::path& s, const fs::path& o) {
                     plain(s, o);
                     oj c = oj::parse(io::read_text_file(o / "config.json"));
                     c["rms_norm_eps"] = 1e-06;
                     write_text(o / "config.json", c.dump(2) + "\n");
                   }});
  cases.push_back({"config.json: quantization_config missing", 3,
                   [plain](const fs::path& s, const fs::path& o) {
                     plain(s, o);
                     oj c = oj::parse(io::read_text_file(o / "config.json"));
                     c.erase("quantization_config");
                     write_text(o / "config.json", c.dump(2) + "\n");
                   }});
  cases.push_back({"excluded tensor (lm_head.weight): one byte flipped", 2,
                   [sharded](const fs::path& s, const fs::path& o) {
                     FakeQuarkOptions opt = sharded;
                     opt.edit = [](io::TensorSpec& spec, std::vector<std::byte>& b) {
                       if (spec.name == "lm_head.weight") b[7] ^= std::byte{0x01};
                       return true;
                     };
                     write_fake_quark_checkpoint(s, o, opt);
                   }});
  cases.push_back({"unquantized tensor (model.norm.weight) cast to F16", 2,
                   [sharded](const fs::path& s, const fs::path& o) {
                     FakeQuarkOptions opt = sharded;
                     opt.edit = [](io::TensorSpec& spec, std::vector<std::byte>& b) {
                       if (spec.name != "model.norm.weight") return true;
                       const size_t n = b.size() / 2;
                       std::vector<float> x(n);
                       to_f32(DType::kBF16, b.data(), x.data(), n);
                       from_f32(DType::kF16, x.data(), b.data(), n);
                       spec.dtype = DType::kF16;
                       return true;
                     };
                     write_fake_quark_checkpoint(s, o, opt);
                   }});
  cases.push_back({"layer tensor missing (model.layers.1.mlp.up_proj)", 4,
                   [sharded](const fs::path& s, const fs::path& o) {
                     FakeQuarkOptions opt = sharded;
                     opt.edit = [](io::TensorSpec& spec, std::vector<std::byte>&) {
                       return !spec.name.starts_with("model.layers.1.mlp.up_proj.");
                     };
                     write_fake_quark_checkpoint(s, o, opt);
                   }});
  cases.push_back({"unexpected tensor added", 4, [sharded](const fs::path& s, const fs::path& o) {
                     FakeQuarkOptions opt = sharded;
                     opt.extra_tensors.push_back(
                         {{"model.layers.0.self_attn.rotary_emb.inv_freq", DType::kF32, {4}},
                          std::vector<std::byte>(16)});
                     write_fake_quark_checkpoint(s, o, opt);
                   }});
  return cases;
}

}  // namespace

ValidationReport run_validator_self_test(const fs::path& scratch_dir) {
  std::error_code ec;
  fs::create_directories(scratch_dir, ec);
  if (ec) throw_errno(ec.value(), scratch_dir.string(), "creating the scratch directory", true);
  std::string tmpl = (scratch_dir / "qloom-validator-self-test-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr)
    throw_errno(errno, tmpl, "creating the self-test directory", /*writing=*/true);
  const fs::path work = tmpl;
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(p, e);
    }
  } cleanup{work};

  ValidationReport out;
  out.heading = "Validator self-test — qloom validate --self-test";
  out.step_label = "Case";
  out.source = "synthetic 2-layer Llama (BF16, attention biases, untied lm_head)";
  out.quantized = "fake Quark FP8 checkpoints of it, sharded, one planted defect each";

  const fs::path src = work / "source";
  write_self_test_source_model(src);
  ValidateOptions vopts;
  vopts.threads = 2;

  const auto cases = self_test_cases();
  for (size_t i = 0; i < cases.size(); ++i) {
    const SelfTestCase& c = cases[i];
    StepResult r;
    r.number = static_cast<int>(i + 1);
    r.title = c.title;
    const fs::path q = work / ("case-" + std::to_string(i + 1));
    oj expected = oj::object(), got = oj::object();
    for (int step : {4, 1, 3, 2})
      expected[std::to_string(step)] = step == c.failing_step ? "FAIL" : "ok";
    r.data["expected"] = expected;
    try {
      c.make(src, q);
      const ValidationReport rep = validate_checkpoint(src, q, vopts);
      // The writers must accept every report the validator produces.
      (void)render_markdown(rep);
      (void)report_to_json(rep).dump();
      bool as_expected = true;
      for (int step : {4, 1, 3, 2}) {
        const StepResult* s = rep.step(step);
        const std::string status = s ? status_name(s->status) : "absent";
        got[std::to_string(step)] = status;
        as_expected = as_expected && status == expected[std::to_string(step)];
        r.details.push_back("Step " + std::to_string(step) + " — " + (s ? s->title : "?") +
                            ": " + status + (s && !s->summary.empty() ? " — " + s->summary : ""));
      }
      r.status = as_expected ? StepResult::kOk : StepResult::kFail;
      if (as_expected)
        r.summary = c.failing_step == 0
                        ? "steps 4, 1, 3, 2 all ok"
                        : "caught by step " + std::to_string(c.failing_step) + " only";
      else
        r.summary = c.failing_step == 0
                        ? "expected every step ok, got something else"
                        : "expected a FAIL in step " + std::to_string(c.failing_step) +
                              " and ok elsewhere, got something else";
    } catch (const std::exception& e) {
      r.status = StepResult::kFail;
      r.summary = "the case could not run: " + describe_error(e);
    }
    r.data["got"] = got;
    std::error_code e2;
    fs::remove_all(q, e2);
    out.steps.push_back(std::move(r));
  }
  return out;
}

}  // namespace qloom::validate
