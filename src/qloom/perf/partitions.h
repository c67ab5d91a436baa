// The units of `qloom perf`'s mixed-precision search: a model's linear layers
// grouped, as quark-quant-perf groups them, into partitions by type —
//   self_attn      the attention projections (q/k/v/o, fused qkv_proj)
//   dense_mlp      the dense MLP (gate/up/down, fused gate_up_proj)
//   routed_moe     the routed experts of MoE blocks (".experts.N.")
//   shared_expert  a MoE block's shared expert (".shared_expert(s).")
// — at partition granularity one unit per partition ("self_attn"), at layer
// granularity one unit per decoder layer x partition ("layers.3.self_attn").
//
// Which linears take part: every 2-D "<module>.weight" except embeddings
// (quant::find_linear_layers), minus those matched by the model type's Quark
// default exclusions (lm_head, MoE routers, ...) and the user's
// --exclude-layers patterns (quant::select_layers' fnmatch rules, exclusion
// wins), minus linears of no partition (a router of a model type without a
// template, a shared_expert_gate): those stay native and are listed in
// `native` with the reason.
//
// The plan also carries what the bytes model needs (ModelGeometry): the
// bits every decoded token reads from tensors that are not in a unit, and
// the KV-cache shape.
//
// Errors (qloom::Error): ModelDir / WeightIndex errors as they throw them;
// kUnsupported when the engine cannot parse the config (naming the field);
// kUsage for an unknown granularity, or when no linear is left to search.
// Deterministic order: units by (layer, partition order), modules by (layer,
// name). Thread-safety: pure functions of their inputs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/core/dtype.h"
#include "qloom/io/model_dir.h"

namespace qloom::perf {

enum class Granularity { kPartition, kLayer };
// "partition" | "layer"; anything else throws kUsage naming `flag`.
Granularity parse_granularity(std::string_view name, const std::string& flag = "--granularity");
const char* granularity_name(Granularity g);

// self_attn, dense_mlp, routed_moe, shared_expert: the canonical order.
const std::vector<std::string>& partition_names();
// The index of `p` in partition_names() (its size when `p` is not one).
size_t partition_rank(std::string_view p);

// The partition of a linear module by its name, or "" for none (routers,
// lm_head, linears outside decoder layers).
std::string classify_linear(std::string_view module);
// N of "...layers.N....", or -1.
int layer_of(std::string_view module);

struct UnitModule {
  std::string module;        // e.g. "model.layers.3.self_attn.q_proj"
  uint64_t rows = 0, cols = 0;  // weight [out, in]
  DType dtype = DType::kBF16;   // stored dtype of the weight
  uint64_t params() const { return rows * cols; }
};

struct SearchUnit {
  std::string name;       // "self_attn" | "layers.3.self_attn"
  std::string partition;
  int layer = -1;         // -1 at partition granularity
  std::vector<UnitModule> modules;
  uint64_t params = 0;    // weight elements of the modules
};

struct NativeLinear {
  std::string module;
  uint64_t rows = 0, cols = 0;
  std::string reason;  // "excluded by 'lm_head'", "no partition (router)"
};

struct ModelGeometry {
  std::string model_type;
  DType model_dtype = DType::kBF16;  // config torch_dtype, else the first linear's dtype
  int64_t num_layers = 0, hidden_size = 0, num_kv_heads = 0, head_dim = 0, vocab_size = 0;
  int64_t sliding_window = 0;          // 0: none
  std::vector<uint8_t> layer_sliding;  // per layer: 1 = sliding-window attention
  bool tie_word_embeddings = false;
  // Bits every decoded token reads outside the units, at their stored dtype:
  // native linears (lm_head, routers, excluded), norms and biases, and the
  // token embedding (the whole matrix when tied — it is lm_head too — else
  // one row).
  uint64_t fixed_bits_per_token = 0;
  // Quark's KV layer patterns for the model type (kv_layers_name), default
  // "*k_proj", "*v_proj".
  std::vector<std::string> kv_layer_patterns;
  uint64_t total_params = 0;  // every tensor's elements
};

struct PartitionRequest {
  Granularity granularity = Granularity::kPartition;
  std::vector<std::string> exclude_layers;  // --exclude-layers patterns
};

struct PartitionPlan {
  Granularity granularity = Granularity::kPartition;
  std::vector<std::string> partitions;  // present ones, canonical order
  std::vector<SearchUnit> units;
  std::vector<NativeLinear> native;     // linears kept native, model order
  std::vector<std::string> exclude_patterns;  // effective: defaults + user
  std::vector<std::string> warnings;    // user patterns matching no linear
  ModelGeometry geometry;

  const SearchUnit* find_unit(std::string_view name) const;  // nullptr when absent
  std::vector<const SearchUnit*> units_of(std::string_view partition) const;
  uint64_t partition_params(std::string_view partition) const;
  uint64_t unit_params() const;  // all units
};

PartitionPlan plan_partitions(const io::ModelDir& dir, const PartitionRequest& req);

// {"granularity", "partitions": [{"name", "params", "units", "modules"}],
//  "units": [{"name", "partition", "layer", "params", "modules": [...]}],
//  "native": [{"module", "reason"}], "exclude_patterns", "warnings"}
nlohmann::ordered_json to_json(const PartitionPlan& plan);

}  // namespace qloom::perf
