// --model_export: the formats one quantize job writes, and where they land.
//
//   hf_format            AMD Quark's hf_format checkpoint (QuarkExporter)
//   compressed-tensors   llm-compressor's format (export/compressed_tensors_export.h),
//                        converted from the Quark checkpoint (same codes and scales)
//   gguf                 llama.cpp's format (export/gguf_export.h), likewise
//
// Quark's flag is repeatable (--model_export hf_format --model_export gguf, or
// several values after one flag). Layout of --output_dir OUT:
//   - the first directory format given (hf_format or compressed-tensors) is
//     OUT itself; compressed-tensors given after hf_format goes to
//     OUT/compressed-tensors/;
//   - gguf is OUT/<model_type>.gguf, Quark's file name (OUT holds only that
//     file when gguf is the only format).
// Everything is built under hidden staging names beside OUT and published
// with one rename when all formats are written: a failure in any format
// leaves no OUT. With hf_format alone the Quark exporter publishes OUT
// itself, as before.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qloom/job/quantize_job.h"
#include "qloom/quant/quant_spec.h"

namespace qloom::job {

enum class ExportFormat { kHfFormat, kCompressedTensors, kGguf };

// Parses --model_export values ("compressed_tensors" is accepted for
// compressed-tensors). kUsage for an empty list or a repeated format;
// kUnsupported naming Quark's other formats (onnx, quark_safetensors,
// vllm_adopted_safetensors) and why qloom does not write them.
std::vector<ExportFormat> parse_export_formats(const std::vector<std::string>& names);
std::string export_format_name(ExportFormat f);

class OutputPublisher {
 public:
  // Checks the output location (not the source dir, not inside it, does not
  // contain it; existing only with overwrite) and creates the staging
  // directories. Throws kUsage.
  OutputPublisher(const QuantizeOptions& o, const std::filesystem::path& source_dir);
  ~OutputPublisher();
  OutputPublisher(const OutputPublisher&) = delete;
  OutputPublisher& operator=(const OutputPublisher&) = delete;

  // Before any tensor is written: refuses (kUnsupported naming the module)
  // what the other formats cannot hold — a non-llama model for gguf, a spec
  // compressed-tensors cannot express.
  void precheck(const std::string& model_type, const std::map<std::string, quant::LayerQuantSpec>& modules) const;

  // Where the Quark exporter writes, and with which overwrite flag.
  std::filesystem::path quark_dir() const;
  bool quark_overwrite() const;

  // After the Quark checkpoint is finished: converts it to the other
  // formats, assembles the layout above and publishes OUT. Records one
  // ExportedArtifact per format in `sum` (hf_format too).
  void publish(const std::string& model_type, QuantizeSummary& sum);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qloom::job
