// libFuzzer target: arbitrary bytes as tokenizer.json (Tokenizer::from_json),
// then a fixed short text encoded (with and without special tokens) and the
// ids decoded back (with and without skipping special tokens).
//
// A qloom::Error is the expected answer to bad input (at load, or at encode /
// decode: a regex over Oniguruma's retry limit, a normalizer or decoder over
// its growth limit) and is swallowed. Any other exception, a crash, a
// sanitizer report, or an encoding that breaks the tokenizer's own promises
// (checked below) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "qloom/core/error.h"
#include "qloom/text/tokenizer.h"
#include "qloom/text/tokenizer_limits.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// Covers spaces (leading, repeated, tab, newline), digits, punctuation,
// accents (NFC/NFD differ), runs of one letter, CJK, an emoji and common special-token spellings.
constexpr std::string_view kText =
    " Hi <s>, h\xC3\xA9llo  w\xC3\xB6rld!\t12 345 abc aaaa\n\xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80</s>";

void round_trip(const qloom::text::Tokenizer& tok) {
  using qloom::text::kMaxTokenId;
  for (const bool special : {false, true}) {
    std::vector<int32_t> ids;
    try {
      ids = tok.encode(kText, special);
    } catch (const qloom::Error&) {
      continue;
    }
    for (const int32_t id : ids) check(id >= 0 && id < kMaxTokenId);
    // Without special tokens every id is one the tokenizer knows.
    if (!special) {
      for (const int32_t id : ids) check(tok.id_to_token(id).has_value());
    }
    for (const bool skip : {false, true}) {
      try {
        (void)tok.decode(ids, skip);
      } catch (const qloom::Error&) {
      }
    }
  }
  // Ids the tokenizer may not know are dropped, never read out of bounds.
  const std::vector<int32_t> odd = {-1, 0, 1, 2, 255, 65'535, kMaxTokenId, 2'147'483'647};
  try {
    (void)tok.decode(odd, false);
  } catch (const qloom::Error&) {
  }
  check(tok.vocab_size() >= 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const qloom::text::Tokenizer tok = qloom::text::Tokenizer::from_json(text, "fuzz/tokenizer.json");
    round_trip(tok);
  } catch (const qloom::Error&) {
    // Expected: a clean, typed rejection.
  }
  return 0;
}
