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
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// Types: ByteLevel, Metaspace, Sequence, Replace, ByteFallback, Fuse, Strip.
// Null gives nullptr (tokens are then joined with spaces); others throw
// kUnsupported naming `item`.type.
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& j, const std::string& source,
                                      const std::string& item);

}  // namespace qloom::text
