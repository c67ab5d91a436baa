#include "qloom/model/gguf_counts.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>

#include "qloom/core/error.h"
#include "qloom/io/gguf.h"

namespace qloom::model {
namespace {

constexpr const char* kRemedy =
    "the GGUF's metadata and tensors disagree: the file is corrupt or hand-edited; re-create it with llama.cpp";

// Size keys (under "<arch>.") bounded by the largest tensor dimension.
constexpr const char* kSizeKeys[] = {
    "embedding_length",     "feed_forward_length",  "attention.head_count", "attention.head_count_kv",
    "attention.key_length", "attention.value_length", "rope.dimension_count", "vocab_size",
    "expert_count",         "expert_used_count"};

// Distinct N of the tensors named blk.N.<...>.
uint64_t blocks_with_tensors(const io::GgufFile& f) {
  std::unordered_set<uint64_t> seen;
  for (const auto& t : f.tensors()) {
    const std::string_view n = t.name;
    if (n.rfind("blk.", 0) != 0) continue;
    uint64_t index = 0;
    const auto [end, ec] = std::from_chars(n.data() + 4, n.data() + n.size(), index);
    if (ec == std::errc() && end != n.data() + 4 && end < n.data() + n.size() && *end == '.') seen.insert(index);
  }
  return seen.size();
}

uint64_t largest_dimension(const io::GgufFile& f) {
  uint64_t most = 0;
  for (const auto& t : f.tensors())
    for (uint64_t d : t.ne) most = std::max(most, d);
  return most;
}

// Every integer the value holds (itself, or an array's elements); negative
// values are left to the typed getters, which name them.
void for_each_count(const io::GgufValue& v, const auto& fn) {
  if (v.type == io::GgufValueType::kArray) {
    for (const auto& e : v.array) for_each_count(e, fn);
  } else if (v.is_integer()) {
    const bool is_signed = v.type == io::GgufValueType::kI8 || v.type == io::GgufValueType::kI16 ||
                           v.type == io::GgufValueType::kI32 || v.type == io::GgufValueType::kI64;
    if (!is_signed) fn(v.u);
    else if (v.i > 0) fn(static_cast<uint64_t>(v.i));
  }
}

void check_block_count(const io::GgufFile& f, const std::string& key) {
  const io::GgufValue* v = f.find(key);
  if (!v || !v->is_integer()) return;  // absent or mistyped: the typed getter says so
  const uint64_t blocks = blocks_with_tensors(f);
  for_each_count(*v, [&](uint64_t n) {
    if (n > blocks)
      throw_invalid(f.path().string(), key,
                    "is " + std::to_string(n) + " but the file holds tensors for " + std::to_string(blocks) +
                        " block(s) (blk.N.*)",
                    kRemedy);
  });
}

void check_size(const io::GgufFile& f, const std::string& key, uint64_t largest) {
  const io::GgufValue* v = f.find(key);
  if (!v) return;
  for_each_count(*v, [&](uint64_t n) {
    if (n > largest)
      throw_invalid(f.path().string(), key,
                    "is " + std::to_string(n) + ", more than the largest tensor dimension in the file (" +
                        std::to_string(largest) + ")",
                    kRemedy);
  });
}

}  // namespace

void check_gguf_counts(const io::GgufFile& f) {
  if (f.tensors().empty()) return;
  const auto arch = f.get_string_opt("general.architecture");
  if (!arch) return;
  check_block_count(f, *arch + ".block_count");
  const uint64_t largest = largest_dimension(f);
  for (const char* k : kSizeKeys) check_size(f, *arch + "." + k, largest);
}

}  // namespace qloom::model
