// TEMPORARY stub so the library links while the tokenizer is written; the
// tokenizer work replaces this file.
#include "qloom/engine/tokenizer.h"

#include "qloom/core/error.h"

namespace qloom::engine {

struct Tokenizer::Impl {};
Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;
[[noreturn]] static void pending() {
  throw Error(ErrorKind::kUnsupported, "", "", "tokenizer not implemented yet");
}
Tokenizer Tokenizer::load(const std::filesystem::path&) { pending(); }
Tokenizer Tokenizer::from_json(std::string_view, const std::string&) { pending(); }
std::vector<int32_t> Tokenizer::encode(std::string_view, bool) const { pending(); }
std::string Tokenizer::decode(std::span<const int32_t>, bool) const { pending(); }
int64_t Tokenizer::vocab_size() const { pending(); }
std::optional<int32_t> Tokenizer::token_to_id(std::string_view) const { pending(); }
std::optional<std::string> Tokenizer::id_to_token(int32_t) const { pending(); }
std::optional<int32_t> Tokenizer::bos_id() const { pending(); }
std::optional<int32_t> Tokenizer::eos_id() const { pending(); }

}  // namespace qloom::engine
