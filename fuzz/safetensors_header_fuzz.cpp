// libFuzzer target: parse_safetensors_header on arbitrary bytes.
//
// A qloom::Error is the expected answer to bad input and is swallowed. Any
// other exception, a crash, a sanitizer report, or a parsed header that breaks
// the parser's own promises (checked below) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "qloom/core/dtype.h"
#include "qloom/core/error.h"
#include "qloom/io/safetensors_reader.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// What a successfully parsed header guarantees.
void check_invariants(const qloom::io::SafetensorsHeader& h, size_t size) {
  check(h.header_len <= qloom::io::kMaxSafetensorsHeaderBytes);
  check(8 + h.header_len + h.data_size == size);
  uint64_t expected = 0;
  for (const auto& t : h.tensors) {
    check(t.data_begin == expected);
    check(t.data_end >= t.data_begin);
    const auto bytes = qloom::dtype_storage_bytes(t.dtype, t.numel());
    check(bytes.has_value() && *bytes == t.nbytes());
    check(!qloom::dtype_info(t.dtype).safetensors_name.empty());
    expected = t.data_end;
  }
  check(expected == h.data_size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const auto h = qloom::io::parse_safetensors_header(bytes, "fuzz-input");
    check_invariants(h, size);
  } catch (const qloom::Error&) {
    // expected for malformed input
  }
  return 0;
}
