// Decoders of tokenizer.json ("decoder"): token strings -> text, as
// HuggingFace tokenizers' decode_chain (each step maps the list of token
// strings; the result is their concatenation).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace qloom::text {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Throws kInvalidInput naming the decoder (file and field) that would make
  // the tokens longer together than growth_limit of their size before
  // (tokenizer_limits.h; only Replace can grow them much).
  void decode_chain(std::vector<std::string>& tokens) const;
  // One step; `input_bytes`: the tokens' total size before the whole decoder ran.
  virtual void apply(std::vector<std::string>& tokens, size_t input_bytes) const = 0;
};

// Types: ByteLevel, Metaspace, Sequence, Replace, ByteFallback, Fuse, Strip.
// Null gives nullptr (tokens are then joined with spaces); others throw
// kUnsupported naming `item`.type.
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& j, const std::string& source,
                                      const std::string& item);

}  // namespace qloom::text
