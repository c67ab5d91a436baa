// ModelRotation: Quark 0.13's "rotation" algorithm (quark/torch/algorithm/
// rotation/rotation.py RotationProcessor with trainable=False,
// online_r1_rotation=False) as a pass over a model's float tensors, one
// tensor at a time. It runs before calibration and quantization: the
// quantizer then sees the rotated model (job/quantize_job.cpp writes it
// to a temporary directory and quantizes that), and validate compares a
// rotated checkpoint with the source rotated the same way.
//
// R1 (config.r1), in Quark's order, for every scaling_layers group resolved
// per decoder layer (first_layer for layer 0, middle_layers for the others,
// plus last_layer on the last; "layer_id" / "pre_layer_id" substituted; a
// template absent on a layer is dropped, a group whose prev or next modules
// all are absent is skipped, a template found on no layer is an error):
//   1. the norm's weight g is folded into each next linear, W <- W diag(g),
//      and the norm becomes ones;
//   2. each prev module's output is rotated: an embedding E <- E R, a linear
//      W <- R^T W (and its bias b <- b R);
//   3. each next linear's input is rotated: W <- W R.
// R is kron(H_K, H_m) / sqrt(n) of the hidden size (quant/hadamard.h), or of
// rotation_size applied per block of that many channels.
// R2 (config.r2), after R1, per layer with R2 of size head_dim: v_proj
// W <- R2^T W per head (rows), o_proj W <- W R2 per head (columns).
// Every step computes in double from the tensor's current value and rounds
// the result to the tensor's dtype (double -> float -> bf16 / f16, as torch's
// .to(dtype) does), so the bytes follow Quark's sequence of roundings.
// Tied embeddings (tie_word_embeddings, no lm_head.weight) are untied, as
// Quark does: lm_head.weight is added, the source embedding rotated as lm_head.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "qloom/engine/weight_source.h"
#include "qloom/io/model_dir.h"
#include "qloom/quant/rotation_config.h"

namespace qloom::quant {

struct RotationOp {
  enum Kind { kScaleColumns, kRotateIn, kRotateOut, kOnes } kind = kOnes;
  std::string norm;   // kScaleColumns: the norm tensor whose source value scales the columns
  int64_t size = 0;   // kRotateIn / kRotateOut: the rotation's size (blocks of it)
};

class ModelRotation {
 public:
  // Plans the rotation of `src` (config.json and tensor names only; nothing
  // is computed yet). Throws Error naming the config key / module / tensor:
  // kUnsupported for a model type Quark's rotation cannot handle here
  // (centered "1 + w" norms, norms with a bias, MoE layers), kInvalidInput for
  // templates that match nothing or sizes the rotation does not divide.
  ModelRotation(const io::ModelDir& src, RotationConfig config);

  const RotationConfig& config() const { return config_; }
  const io::ModelDir& source() const { return src_; }
  // The source tensor `tensor` is computed from (the embedding for an
  // untied lm_head.weight; else itself).
  std::string source_of(const std::string& tensor) const;
  // Every tensor of the rotated model, in the order written: the source's
  // (sorted), then the tensors the rotation adds (lm_head.weight when tied).
  const std::vector<std::string>& tensor_names() const { return names_; }
  // Tensors whose value the rotation changes (or adds).
  bool changes(const std::string& tensor) const { return ops_.count(tensor) != 0; }
  const std::map<std::string, std::vector<RotationOp>>& ops() const { return ops_; }
  // The rotated value of `tensor` (the source's for the others), in its
  // source dtype. Deterministic whatever `threads`.
  engine::HostTensor tensor(const std::string& name, unsigned threads) const;

 private:
  void plan_r1();
  void plan_r2();
  bool module_exists(const std::string& module) const;
  void add(const std::string& module, RotationOp op, bool with_bias);

  const io::ModelDir& src_;
  RotationConfig config_;
  int64_t layers_ = 0, hidden_ = 0, head_dim_ = 0;
  bool untie_ = false;
  std::vector<std::string> names_;
  std::map<std::string, std::vector<RotationOp>> ops_;
};

// Writes the rotated model of `src` to `out` (which must not exist): every
// tensor (rotated where the rotation changes it) in safetensors shards, and
// config.json plus every auxiliary file byte-identical to the source's.
void write_rotated_model(const ModelRotation& rotation, const std::filesystem::path& out, unsigned threads);

// A directory that is removed (recursively) when the object dies.
class ScratchDir {
 public:
  // A fresh directory named `<prefix>-<pid>-<n>` under `parent` (default:
  // the system temp directory).
  explicit ScratchDir(const std::string& prefix, std::filesystem::path parent = {});
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace qloom::quant
