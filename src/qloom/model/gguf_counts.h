// The counts of a GGUF's metadata against what the file holds, checked before
// anything is sized or looped by them (a hostile block_count of 2^31-1 would
// otherwise build billions of tensor names):
//   - <arch>.block_count is at most the number of distinct blocks that have
//     tensors (blk.N.*): a layer without a single tensor cannot be converted;
//   - every size key (embedding_length, feed_forward_length, head counts,
//     key/value lengths, rope.dimension_count, vocab_size, expert counts),
//     scalar or per-layer array, is at most the largest tensor dimension in
//     the file (each is a dimension of some tensor, or smaller than one).
// A file with no tensors at all (a vocabulary-only GGUF) is not checked here;
// read_gguf_model_info refuses to convert it. Metadata and tensor infos only.
#pragma once

namespace qloom::io {
class GgufFile;
}

namespace qloom::model {

// Throws kInvalidInput naming the key, the value and what the file holds.
void check_gguf_counts(const io::GgufFile& file);

}  // namespace qloom::model
