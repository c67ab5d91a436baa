#include "qloom/text/sentencepiece_model.h"

#include <sentencepiece_processor.h>

#include "qloom/core/error.h"

namespace qloom::text {

SentencePieceModel::SentencePieceModel(const std::filesystem::path& file)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()), file_(file.string()) {
  const auto status = sp_->Load(file_);
  if (!status.ok()) {
    throw Error(ErrorKind::kInvalidInput, file_, "", "not a loadable SentencePiece model: " + status.ToString(),
                "replace tokenizer.model with the model's original file");
  }
}

SentencePieceModel::~SentencePieceModel() = default;

std::vector<int32_t> SentencePieceModel::encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  if (!status.ok()) {
    throw Error(ErrorKind::kInvalidInput, file_, "", "SentencePiece encode failed: " + status.ToString());
  }
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string SentencePieceModel::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::vector<int> kept;
  kept.reserve(ids.size());
  const int n = sp_->GetPieceSize();
  for (int32_t id : ids) {
    if (id < 0 || id >= n) continue;
    if (skip_special && sp_->IsControl(id)) continue;
    kept.push_back(id);
  }
  std::string out;
  const auto status = sp_->Decode(kept, &out);
  if (!status.ok()) {
    throw Error(ErrorKind::kInvalidInput, file_, "", "SentencePiece decode failed: " + status.ToString());
  }
  return out;
}

int64_t SentencePieceModel::vocab_size() const { return sp_->GetPieceSize(); }

std::optional<int32_t> SentencePieceModel::piece_to_id(std::string_view piece) const {
  const int id = sp_->PieceToId(piece);
  // PieceToId answers unk_id for unknown pieces; only the unk piece itself maps there.
  if (id == sp_->unk_id() && sp_->IdToPiece(id) != piece) return std::nullopt;
  return id;
}

std::optional<std::string> SentencePieceModel::id_to_piece(int32_t id) const {
  if (id < 0 || id >= sp_->GetPieceSize()) return std::nullopt;
  return sp_->IdToPiece(id);
}

std::optional<int32_t> SentencePieceModel::bos_id() const {
  const int id = sp_->bos_id();
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

std::optional<int32_t> SentencePieceModel::eos_id() const {
  const int id = sp_->eos_id();
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

}  // namespace qloom::text
