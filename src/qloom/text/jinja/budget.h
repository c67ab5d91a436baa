// Internal: what the render in progress on this thread may still spend
// (RenderLimits). The renderer installs a Budget for the length of a render;
// builtins anywhere in the engine charge it through the free functions below,
// which do nothing but the size checks when no render is in progress.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "qloom/text/jinja/template.h"
#include "qloom/text/jinja/value.h"

namespace qloom::text::jinja {

class Budget {
 public:
  explicit Budget(const RenderLimits& limits);
  ~Budget();  // uninstalls it and empties the namespaces (Python's GC for cycles)
  Budget(const Budget&) = delete;
  Budget& operator=(const Budget&) = delete;

  const RenderLimits& limits() const { return limits_; }
  void step(int64_t n);
  // A namespace created by this render: emptied when the render ends, which
  // frees the cycles a template can build through namespaces.
  void adopt(const Value& ns) { namespaces_.push_back(ns); }

 private:
  RenderLimits limits_;
  int64_t steps_ = 0;
  Budget* previous_;
  std::vector<Value> namespaces_;
};

// The budget of this thread's render, or null.
Budget* current_budget();
const RenderLimits& current_limits();

// Work on `n` bytes or items: n / 16 + 1 steps.
void charge_work(size_t n);
// A string or list of `bytes` is about to be created: over max_value_bytes is
// an error naming `what`. check_value_size also charges the work of creating it.
void check_size(size_t bytes, const char* what);
void check_value_size(size_t bytes, const char* what);
// Appends `piece` to `out` (a string being built), checking the size first and
// charging the piece.
void append_checked(std::string& out, const std::string& piece, const char* what);
// Python's int overflow: qloom has no big integers.
[[noreturn]] void fail_overflow(const std::string& what);

}  // namespace qloom::text::jinja
