// An in-memory checkpoint for the unpackers (unpack_quantized_weight,
// unpack_progressive_weight, ...): tensors added from the packers' output,
// served through a TensorLookup.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "qloom/export/quark_tensors.h"

namespace qloom::exporter::test_support {

struct FakeCheckpoint {
  std::map<std::string, ExportedTensor> tensors;
  std::map<std::string, io::TensorInfo> infos;
  void add(const std::vector<ExportedTensor>& ts) {
    for (const auto& t : ts) {
      tensors[t.name] = t;
      io::TensorInfo i;
      i.name = t.name;
      i.dtype = t.dtype;
      i.shape = t.shape;
      i.data_end = t.data.size();
      infos[t.name] = i;
    }
  }
  TensorLookup lookup() const {
    return [this](const std::string& n) -> std::optional<io::TensorView> {
      auto it = infos.find(n);
      if (it == infos.end()) return std::nullopt;
      const auto& d = tensors.at(n).data;
      return io::TensorView{&it->second, std::span<const std::byte>(d.data(), d.size())};
    };
  }
};

}  // namespace qloom::exporter::test_support
