// A SentencePiece tokenizer.model through Debian's libsentencepiece: encode /
// decode where qloom runs the model itself, and its pieces where qloom builds
// transformers 5's LlamaTokenizer from it (tokenizer_choice.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace qloom::text {

class SentencePieceModel {
 public:
  // Throws kInvalidInput naming the file when it does not load.
  explicit SentencePieceModel(const std::filesystem::path& file);
  ~SentencePieceModel();

  // Pieces only (no BOS/EOS), as SentencePieceProcessor::Encode.
  std::vector<int32_t> encode(std::string_view text) const;
  // Ids outside the vocabulary are dropped; skip_special also drops control
  // pieces (<s>, </s>; they decode to nothing anyway).
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const;

  int64_t vocab_size() const;
  std::optional<int32_t> piece_to_id(std::string_view piece) const;
  std::optional<std::string> id_to_piece(int32_t id) const;
  // Piece types (false for ids outside the vocabulary).
  bool is_control(int32_t id) const;
  bool is_user_defined(int32_t id) const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string file_;
  std::vector<uint8_t> types_;  // piece types of the proto, by id
};

}  // namespace qloom::text
