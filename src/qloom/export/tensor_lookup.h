// Reading a checkpoint's tensors back by name, for the unpackers of the
// Quark layouts (quark_unpack.cpp, fp4_block_tensors.cpp,
// quark_progressive.cpp): the lookup itself, and the typed errors that name
// the tensor at fault when it is missing or not laid out as Quark's
// hf_format export lays out the scheme.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "qloom/core/dtype.h"
#include "qloom/io/weight_index.h"

namespace qloom::exporter {

// Looks up a tensor of the checkpoint by full name; nullopt when absent.
using TensorLookup = std::function<std::optional<io::TensorView>(const std::string&)>;

// The tensor `name`, or Error(kNotFound) naming it.
io::TensorView need_tensor(const TensorLookup& lookup, const std::string& name);

// Error(kInvalidInput) naming the tensor: `msg`, with the remedy that the
// tensor does not have the layout Quark's hf_format export gives `what`.
[[noreturn]] void tensor_layout_error(const std::string& name, const std::string& msg,
                                      const std::string& what = "this scheme");

// tensor_layout_error unless `v` has dtype `dt` and shape `shape`.
void expect_tensor_layout(const io::TensorView& v, DType dt, const std::vector<uint64_t>& shape);

}  // namespace qloom::exporter
