// calib_ids: the calibration token ids `qloom quantize` uses for a model and
// --dataset / --num_calib_data / --seq_len (quant/calib_data.h), one JSON
// object per sample and line: {"input_ids": [...]}. For feeding the very
// same samples to another tool (bench/llmcompressor_side_by_side.sh).
//
//   calib_ids --model DIR --output FILE [--dataset X] [--num_calib_data 64] [--seq_len 256]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "qloom/quant/calib_data.h"

int main(int argc, char** argv) {
  std::string model, output, dataset;
  uint64_t num = 64, seq = 256;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--model") model = v;
    else if (a == "--output") output = v;
    else if (a == "--dataset") dataset = v;
    else if (a == "--num_calib_data") num = std::strtoull(v.c_str(), nullptr, 10);
    else if (a == "--seq_len") seq = std::strtoull(v.c_str(), nullptr, 10);
    else model.clear(), i = argc;
  }
  if (model.empty() || output.empty() || argc % 2 == 0) {
    std::fprintf(stderr,
                 "usage: calib_ids --model DIR --output FILE [--dataset X] [--num_calib_data N] [--seq_len N]\n");
    return 2;
  }
  try {
    const qloom::quant::CalibrationData d = qloom::quant::load_calibration_data(model, {dataset, num, seq});
    std::ofstream out(output);
    for (const auto& s : d.samples) out << nlohmann::json{{"input_ids", s}}.dump() << "\n";
    if (!out) throw std::runtime_error("cannot write " + output);
    std::printf("calib_ids: %zu samples, %llu tokens from %s -> %s\n", d.samples.size(),
                static_cast<unsigned long long>(d.tokens), d.source.c_str(), output.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
