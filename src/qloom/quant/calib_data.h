// Calibration data: token sequences pushed through the model to observe
// activations (static activation / KV-cache scales now, GPTQ / AWQ /
// SmoothQuant statistics later).
//
// `dataset` (quark-cli --dataset):
//   "", "default" or "c4"  the bundled sample data/datasets/calibration/c4.utf8
//                      (exllamav2's standard c4 sample: 118 web documents, one
//                      per line).
//   "pileval" (Quark's default; mit-han-lab/pile-val-backup) and Quark's
//   other hub names are not bundled: $QLOOM_DATA_DIR/calibration/<name>.jsonl
//   is used when it exists, else Error(kNotFound) names that file.
//   A path: *.jsonl — one JSON object per line, its "text" field one document;
//   any other file — plain text, one document per non-blank line when
//   `lines_are_documents`, else the whole file as one document.
// As Quark's pileval loader does, each document is tokenized on its own
// (with the tokenizer's special tokens), truncated to seq_len tokens, and the
// first num_samples non-empty documents are kept. A single-document text
// file is instead cut into consecutive seq_len-token windows (the first
// num_samples), as GPTQ's wikitext2 calibration does. Quark pads a batch to
// its longest sample; qloom runs each sample alone, so no pad tokens are
// observed (batch_size then only groups samples for progress).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace qloom::quant {

struct CalibrationRequest {
  std::string dataset;
  uint64_t num_samples = 512;
  uint64_t seq_len = 512;
};

struct CalibrationData {
  std::vector<std::vector<int32_t>> samples;
  std::string source;              // the file read
  uint64_t tokens = 0;             // total tokens over samples
  std::vector<std::string> notes;  // substitutions, fewer samples than asked...
};

// Tokenizes with the tokenizer of `model_dir`. Throws qloom::Error (kNotFound
// naming a missing file, kInvalidInput for a malformed jsonl line, kUsage
// for num_samples or seq_len 0).
CalibrationData load_calibration_data(const std::filesystem::path& model_dir, const CalibrationRequest& req);

}  // namespace qloom::quant
