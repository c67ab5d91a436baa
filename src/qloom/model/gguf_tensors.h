// GGUF tensors as HuggingFace names them: the name map (token_embd ->
// model.embed_tokens, blk.N.attn_q -> model.layers.N.self_attn.q_proj, ...),
// the shape (ggml's ne reversed, checked against the config), and the
// row permutation llama.cpp's converter applies to the llama family's Q and K
// projections, undone here.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace qloom::io {
class GgufFile;
struct GgufTensorInfo;
}  // namespace qloom::io

namespace qloom::model {

struct GgufModelInfo;

struct GgufTensorPlan {
  const io::GgufTensorInfo* info = nullptr;  // inside the GgufFile
  std::string hf_name;
  std::vector<uint64_t> shape;  // row-major (HF) shape
  int64_t unpermute_heads = 0;  // > 0: undo llama.cpp's Q/K row order over this many heads
};

// Every tensor of the file, in HF name order (sorted as safetensors sorts
// them). Throws kUnsupported naming a tensor qloom does not map, kInvalidInput
// naming a tensor whose shape disagrees with the config or is missing.
std::vector<GgufTensorPlan> plan_gguf_tensors(const io::GgufFile& file, const GgufModelInfo& info);

// In place: `w` is rows x cols (row-major), rows = heads x head_dim. Within
// each head llama.cpp stores HF row (i * head_dim/2 + j) at row (2j + i),
// i in {0, 1}; this puts every row back at its HF position.
void unpermute_qk_rows(std::span<float> w, int64_t rows, int64_t cols, int64_t heads);
// The inverse (HF -> llama.cpp order); tests build GGUFs with it.
void permute_qk_rows(std::span<float> w, int64_t rows, int64_t cols, int64_t heads);

}  // namespace qloom::model
