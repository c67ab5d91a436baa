#include "qloom/text/sentencepiece_model.h"

#include <sentencepiece_processor.h>

#include "qloom/core/error.h"

namespace qloom::text {

namespace {

// The type of every piece (ModelProto.pieces[i].type; NORMAL = 1 when unset)
// read from the serialized proto: libsentencepiece 0.1.97 has no
// IsUserDefined. Wire format: ModelProto field 1 (length-delimited) is one
// SentencePiece, whose field 3 (varint) is its type. Empty on malformed input.
class ProtoScan {
 public:
  explicit ProtoScan(std::string_view b) : b_(b) {}
  bool done() const { return pos_ >= b_.size(); }
  bool varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64 && pos_ < b_.size(); shift += 7) {
      const auto byte = static_cast<unsigned char>(b_[pos_++]);
      v |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if (!(byte & 0x80)) return true;
    }
    return false;
  }
  // Reads one field; `body` is set for length-delimited ones, `value` for varints.
  bool field(uint64_t& number, std::string_view& body, uint64_t& value) {
    uint64_t key = 0;
    if (!varint(key)) return false;
    number = key >> 3;
    switch (key & 7) {
      case 0: return varint(value);
      case 1: return skip(8);
      case 5: return skip(4);
      case 2: {
        uint64_t n = 0;
        if (!varint(n) || n > b_.size() - pos_) return false;
        body = b_.substr(pos_, n);
        pos_ += n;
        return true;
      }
      default: return false;
    }
  }

 private:
  bool skip(size_t n) {
    if (n > b_.size() - pos_) return false;
    pos_ += n;
    return true;
  }
  std::string_view b_;
  size_t pos_ = 0;
};

std::vector<uint8_t> spm_piece_types(std::string_view proto) {
  std::vector<uint8_t> types;
  ProtoScan top(proto);
  while (!top.done()) {
    uint64_t number = 0, value = 0;
    std::string_view body;
    if (!top.field(number, body, value)) return {};
    if (number != 1) continue;
    uint8_t type = 1;
    ProtoScan piece(body);
    while (!piece.done()) {
      uint64_t n = 0, v = 0;
      std::string_view ignored;
      if (!piece.field(n, ignored, v)) return {};
      if (n == 3) type = static_cast<uint8_t>(v);
    }
    types.push_back(type);
  }
  return types;
}

constexpr uint8_t kSpmControl = 3, kSpmUserDefined = 4;

}  // namespace

SentencePieceModel::SentencePieceModel(const std::filesystem::path& file)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()), file_(file.string()) {
  const auto status = sp_->Load(file_);
  if (!status.ok()) {
    throw Error(ErrorKind::kInvalidInput, file_, "", "not a loadable SentencePiece model: " + status.ToString(),
                "replace tokenizer.model with the model's original file");
  }
  const auto proto = sp_->serialized_model_proto();
  types_ = spm_piece_types(std::string_view(proto.data(), proto.size()));
  if (types_.size() != static_cast<size_t>(sp_->GetPieceSize())) {
    throw Error(ErrorKind::kInvalidInput, file_, "pieces", "the piece list of the model does not read back",
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

bool SentencePieceModel::is_control(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < types_.size() && types_[static_cast<size_t>(id)] == kSpmControl;
}

bool SentencePieceModel::is_user_defined(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < types_.size() && types_[static_cast<size_t>(id)] == kSpmUserDefined;
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
