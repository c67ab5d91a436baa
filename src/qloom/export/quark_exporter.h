// QuarkExporter: writes a quantized model directory in AMD Quark's hf_format,
// streaming one tensor at a time.
//
//   QuarkExporter ex(src, "out/model-fp8", {.model_dtype = DType::kBF16});
//   ex.plan(plan_quark_export(src.weights(), modules));   // full tensor list
//   for (const PlannedTensor& p : ex.planned()) {          // in plan order
//     switch (p.kind) {
//       case PlannedKind::kCopy: ex.write_plain(p.name, src.weights().view(p.name)); break;
//       case PlannedKind::kQuantizedWeight: ex.write_quantized(p.module, quantize(...)); break;
//       case PlannedKind::kActivation: ex.write_activation(p.module, p.role, scale, zp); break;
//     }
//   }
//   ex.finish(build_quantization_config(...));            // config, aux files, commit
//
// Output directory (through io::AtomicDir: built under a hidden staging name
// beside the target and renamed into place by finish(); an exporter destroyed
// before finish(), or a failing finish(), leaves no output directory):
//   - the safetensors shards (io::SafetensorsWriter: model.safetensors, or
//     model-0000i-of-0000N.safetensors + model.safetensors.index.json),
//     tensors in plan order;
//   - config.json = the source config.json + "quantization_config"
//     (quantized_config_json, serialized like transformers: sorted keys,
//     indent 2, trailing newline);
//   - every other top-level non-weight file of the source
//     (ModelDir::aux_files() minus config.json: tokenizer files,
//     generation_config.json, README.md, LICENSE, ...) copied byte for byte.
//     (Quark re-serializes generation_config.json through transformers; qloom
//     copies it unchanged, which keeps it byte-identical to the source.)
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/core/dtype.h"
#include "qloom/core/int4_pack.h"
#include "qloom/export/quark_tensors.h"
#include "qloom/io/model_dir.h"
#include "qloom/io/safetensors_reader.h"
#include "qloom/io/safetensors_writer.h"
#include "qloom/io/weight_index.h"
#include "qloom/quant/progressive.h"
#include "qloom/quant/quant_spec.h"
#include "qloom/quant/quantized_tensor.h"

namespace qloom::exporter {

struct ExportOptions {
  bool overwrite = false;  // replace an existing output directory
  // transformers' save_pretrained default max_shard_size ("5GB").
  uint64_t max_shard_bytes = 5'000'000'000ULL;
  // Floating dtype of the model (decides scale dtypes); nullopt: from the
  // source config's "torch_dtype" (or "dtype", or text_config's).
  std::optional<DType> model_dtype;
  PackOrder pack_order = PackOrder::kReorder;  // export.pack_method "reorder"
};

enum class PlannedKind : uint8_t {
  kCopy,             // a source tensor written unchanged (name = its name)
  kQuantizedWeight,  // <module>.weight -> weight, weight_scale[, weight_zero_point]
  kActivation,       // <module>.{input,output}_scale[, _zero_point]
};

struct PlannedTensor {
  PlannedKind kind = PlannedKind::kCopy;
  std::string name;     // kCopy: the tensor name
  std::string module;   // kQuantizedWeight / kActivation: e.g. model.layers.0.self_attn.k_proj
  quant::QuantSpec spec;                // kQuantizedWeight / kActivation
  // A two-stage spec's second stage (LayerQuantSpec::weight_stage2 /
  // input_stage2); `spec` is then the first. kQuantizedWeight: a
  // ProgressiveSpec pair (int4_fp8, quark_progressive.h) or a ScaleQuantSpec
  // pair (spec2->is_scale_quant: nvfp4, amdfp4_global*, fp4_block_tensors.h).
  // kActivation with spec2: the (static) second stage of a dynamic input,
  // written as <module>.input_scale_2 (fp4_block_tensors.h).
  std::optional<quant::QuantSpec> spec2;
  std::vector<uint64_t> weight_shape;   // kQuantizedWeight: the source weight's [out, in]
  ActivationRole role = ActivationRole::kInput;  // kActivation

  // A progressive weight (written with QuarkExporter::write_progressive).
  bool progressive() const { return kind == PlannedKind::kQuantizedWeight && spec2 && !spec2->is_scale_quant; }

  static PlannedTensor copy(std::string name);
  static PlannedTensor quantized(std::string module, quant::QuantSpec spec,
                                 std::vector<uint64_t> weight_shape,
                                 std::optional<quant::QuantSpec> spec2 = std::nullopt);
  static PlannedTensor activation(std::string module, ActivationRole role, quant::QuantSpec spec,
                                  std::optional<quant::QuantSpec> spec2 = std::nullopt);
};

// The default plan, in a deterministic order: the source tensors in file
// order (shards in index order, tensors by data offset); a module of
// `modules` (module path -> spec) with a weight spec has its "<module>.weight"
// replaced by a kQuantizedWeight entry; right after the weight (quantized or
// copied) come the module's static activation entries, input then output
// (dynamic activation specs write nothing, unless they have a static second
// stage: then its <module>.input_scale_2). A module of `modules` without a
// "<module>.weight" in the source throws kNotFound naming it. Modules not in
// `modules` are copied.
std::vector<PlannedTensor> plan_quark_export(const io::WeightIndex& src,
                                             const std::map<std::string, quant::LayerQuantSpec>& modules);

// The floating dtype a source config declares ("torch_dtype", or "dtype",
// top level first, then "text_config"); nullopt when absent or not one of
// bfloat16 / float16 / float32.
std::optional<DType> config_model_dtype(const nlohmann::json& config);

// Refuses (kUsage, naming both paths) an output directory equal to the
// source, inside it, or containing it (overwrite would delete the source).
void check_output_location(const std::filesystem::path& out_dir, const std::filesystem::path& source_dir);

// Writes staging/config.json (`config`, serialized as transformers does) and
// copies every other top-level non-weight file of `src` byte for byte;
// kInvalidInput when one has the name of a written weight file.
void write_config_and_aux_files(const io::ModelDir& src, const std::filesystem::path& staging,
                                const nlohmann::json& config, const std::vector<std::string>& weight_files);

class QuarkExporter {
 public:
  // Validates the output location and creates the staging directory.
  // Refuses (kUsage, naming both paths) an output directory equal to the
  // source, inside it, or containing it (overwrite would delete the source);
  // refuses an existing output directory unless opts.overwrite (kUsage, from
  // io::AtomicDir). Throws kUsage when no model dtype is given or found in
  // the source config.
  QuarkExporter(const io::ModelDir& src, std::filesystem::path out_dir, ExportOptions opts = {});
  QuarkExporter(QuarkExporter&&) noexcept;
  QuarkExporter& operator=(QuarkExporter&&) noexcept;
  QuarkExporter(const QuarkExporter&) = delete;
  QuarkExporter& operator=(const QuarkExporter&) = delete;
  ~QuarkExporter();  // without finish(): the staging directory is removed

  // Fixes the full output tensor list (once). kCopy entries take dtype and
  // shape from the source; quantized and activation entries expand to
  // quark_weight_specs / quark_activation_specs. Throws what those throw, and
  // kNotFound for a kCopy of a tensor the source lacks; kUsage for a repeated
  // output name or a second plan() call.
  void plan(std::vector<PlannedTensor> plan);
  const std::vector<PlannedTensor>& planned() const;
  // Every output tensor, in write order (after plan()).
  const std::vector<io::TensorSpec>& output_specs() const;
  // Name of the tensor expected next ("" when all are written).
  std::string next_tensor() const;

  // The write calls must follow the plan's order; each checks that the
  // tensors it would write are the next planned ones (kUsage naming the
  // expected and the offered tensor otherwise; nothing is written then).
  // I/O failures (ENOSPC...) propagate from the writer as kIo.
  void write_plain(const std::string& name, const io::TensorView& view);
  void write_quantized(const std::string& module, const quant::QuantizedTensor& qt);
  // A planned progressive weight (PlannedTensor::spec2 set): pack_progressive_weight.
  void write_progressive(const std::string& module, const quant::ProgressiveTensor& t);
  void write_activation(const std::string& module, ActivationRole role, float scale,
                        int32_t zero_point = 0);
  // Writes one planned scalar float tensor (e.g. "<module>.input_scale" of a
  // kActivation entry without a zero point) by name.
  void write_scale(const std::string& name, float value);

  // Checks all tensors were written, closes the shards (and the index),
  // writes config.json = source config + quantization_config, copies the
  // auxiliary files and publishes the directory. Any failure leaves no output
  // directory.
  void finish(const nlohmann::ordered_json& quantization_config);

  DType model_dtype() const;
  // Staging directories of earlier runs killed by SIGKILL that were swept
  // from the output's parent (io::AtomicDir::swept()).
  std::vector<std::filesystem::path> swept_partials() const;
  const std::filesystem::path& out_dir() const;
  // Files of the finished output, relative to out_dir, sorted (after finish()).
  std::vector<std::string> output_files() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qloom::exporter
