// libFuzzer target: parse_gguf_header on arbitrary bytes, then dequantizing
// every tensor of a header that parsed.
//
// A qloom::Error is the expected answer to bad input and is swallowed. Any
// other exception, a crash, a sanitizer report, or a parsed header that breaks
// the parser's own promises (checked below) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "qloom/core/error.h"
#include "qloom/io/gguf.h"
#include "qloom/io/gguf_dequant.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// What a successfully parsed header guarantees.
void check_invariants(const qloom::io::GgufHeader& h, size_t size) {
  using namespace qloom::io;
  check(h.version == 2 || h.version == 3);
  check(h.alignment != 0 && (h.alignment & (h.alignment - 1)) == 0);
  check(h.data_offset % h.alignment == 0);
  check(h.data_offset <= size ? h.data_size == size - h.data_offset : h.data_size == 0);
  std::set<std::string> keys, names;
  for (const auto& [k, v] : h.kv) check(!k.empty() && keys.insert(k).second);
  for (const auto& t : h.tensors) {
    check(!t.name.empty() && names.insert(t.name).second);
    check(t.ne.size() <= kMaxGgufDims);
    const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(t.type));
    check(info != nullptr);
    check(t.offset % h.alignment == 0);
    check(t.offset <= h.data_size && t.nbytes <= h.data_size - t.offset);
    check(t.numel() % info->block_elems == 0);
    check(t.nbytes == t.numel() / info->block_elems * info->block_bytes);
  }
}

void dequantize_all(const qloom::io::GgufHeader& h, std::span<const std::byte> bytes) {
  using namespace qloom::io;
  for (const auto& t : h.tensors) {
    if (!ggml_type_info(t.type).can_dequantize || t.nbytes == 0) continue;
    std::vector<float> out(static_cast<size_t>(t.numel()));
    gguf_dequantize(t.type, bytes.subspan(h.data_offset + t.offset, t.nbytes), out);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const auto h = qloom::io::parse_gguf_header(bytes, "fuzz-input");
    check_invariants(h, size);
    dequantize_all(h, bytes);
  } catch (const qloom::Error&) {
    // expected for malformed input
  }
  return 0;
}
