// CheckpointPair: the source model and the quantized checkpoint as the
// validation steps see them, each opened once. Opening the quantized side
// never throws for defects the steps report (no config.json, malformed JSON,
// no or broken weights): the defect is kept as a message instead, so every
// step can still run or say why it cannot.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "qloom/io/model_dir.h"
#include "qloom/io/weight_index.h"

namespace qloom::validate {

class CheckpointPair {
 public:
  // `source` may be empty (no source model: only the quantized side is
  // examined). Throws qloom::Error when a given source cannot be opened as a
  // model directory (bad input, not a validation finding), and when
  // `quantized` does not exist or is not a directory.
  static CheckpointPair open(const std::filesystem::path& source,
                             const std::filesystem::path& quantized);

  CheckpointPair(CheckpointPair&&) noexcept;
  CheckpointPair& operator=(CheckpointPair&&) noexcept;
  ~CheckpointPair();

  const std::filesystem::path& source_dir() const;  // empty when no source
  const std::filesystem::path& quantized_dir() const;

  // nullptr when no source was given.
  const io::ModelDir* source() const;
  // The model the quantized weights are to be compared with: the source, or,
  // when the checkpoint's quantization_config.algo_config holds a "rotation"
  // entry, the source rotated by that entry (quant/rotation.h), written to a
  // scratch directory that lives as long as the pair (a rotated checkpoint is
  // not weight-comparable with its source; its rotated float weights are).
  // source_weights() are this model's. nullptr when no source was given or
  // the rotation could not be reproduced (source_weights_error() says why).
  const io::ModelDir* weights_source() const;
  // nullptr when the quantized directory is not a readable model directory;
  // quantized_error() says why.
  const io::ModelDir* quantized() const;
  const std::string& quantized_error() const;

  // The weights of each side; nullptr with the reason in *_weights_error()
  // when they cannot be opened (none, broken header, bad index...). The
  // quantized weights are opened even when its config.json is unusable.
  const io::WeightIndex* source_weights() const;
  const std::string& source_weights_error() const;
  const io::WeightIndex* quantized_weights() const;
  const std::string& quantized_weights_error() const;

  struct Impl;  // opaque (checkpoint_pair.cpp)

 private:
  explicit CheckpointPair(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One line for a report: qloom::Error's "file: item: message — remedy",
// or what() of any other exception.
std::string describe_error(const std::exception& e);

}  // namespace qloom::validate
