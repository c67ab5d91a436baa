// Calibration data: token sequences pushed through the model to observe
// activations (static activation / KV-cache scales now, GPTQ / AWQ /
// SmoothQuant statistics later).
//
// `dataset` (quark-cli --dataset) names a data set of documents:
//   "", "default" or "c4"  the bundled sample datasets/calibration/c4.utf8
//                      (exllamav2's standard c4 sample: 118 web documents, one
//                      per line), found as io/data_files.h finds bundled data.
//   "pileval" (Quark's default; mit-han-lab/pile-val-backup), "wikitext",
//   "cnn_dailymail" and other names are not bundled: a local copy
//   datasets/calibration/<name>.jsonl in a data directory (io/data_files.h:
//   $QLOOM_DATA_DIR, the installed share/qloom/data, ...) or
//   $QLOOM_DATA_DIR/calibration/<name>.jsonl is used, else Error(kNotFound)
//   lists every path tried.
//   A path: *.jsonl — one JSON object per line, its "text" field one
//   document; any other file — plain text, each non-blank line (without its
//   line terminator) one document. So a named set and its file are the same
//   documents: `--dataset c4` and `--dataset .../calibration/c4.utf8` give
//   identical samples.
// What a sample is (Quark's get_calib_dataloader for pileval / wikitext /
// cnn_dailymail, quark/torch/utils/llm: dataset["text"][:num_calib_data],
// tokenizer(..., truncation=True, max_length=seq_len)): one document,
// tokenized on its own with the tokenizer's special tokens and truncated to
// seq_len tokens; the first num_samples documents that give at least one token
// are kept, in file order. A document shorter than seq_len stays a shorter
// sample: no packing of documents into windows. Quark pads the batch to its
// longest row (and feeds the pads through the model); qloom runs each sample
// alone, so no pad tokens are observed (batch_size then only groups samples
// for progress), and blank documents, which would be pad-only rows, are
// skipped.
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

// The documents of a calibration data file, as defined above (jsonl "text"
// fields, else non-blank lines), in file order.
std::vector<std::string> calibration_documents(const std::filesystem::path& file);

}  // namespace qloom::quant
