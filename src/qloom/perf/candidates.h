// The candidate queue of the mixed-precision search: every combination of
// one precision per partition x one KV-cache precision, minus those that
// break quark-quant-perf's precision hierarchy, each with its modelled cost
// and predicted accuracy, ordered by modelled throughput (fastest first).
//
// Hierarchy (precision.h levels; a higher level is more precise):
//   level(self_attn) >= level(dense_mlp) and >= level(routed_moe);
//   shared_expert is native or equal to routed_moe.
// Also dropped: configs where a precision cannot hold one of a unit's
// weights (sensitivity "unfit"), and configs that quantize no linear at all
// (the exporter refuses a checkpoint with every linear excluded; the
// all-native config is the baseline itself).
//
// Bytes model (per decoded token; `concurrency` sequences share one read of
// the weights):
//   weights     (fixed_bits_per_token + sum over units of the Quark-layout
//                stored bits of their weights) / 8 / concurrency
//   KV cache    reading the cache at context C = isl + osl / 2 (min(C,
//                sliding_window) on sliding layers): per layer 2 x kv_heads
//                x head_dim x C x (1 byte fp8 | the model dtype's bytes)
//   activations every linear reads its input (in_features x activation_bits
//                of its precision) and writes its output (out_features x 16 bits)
// modelled_gain = bytes_per_token(all native) / bytes_per_token(candidate),
// rounded to 1e-4 (configs whose bytes differ only by scale bytes, e.g. fp8
// vs int8, then tie and the predicted KLD orders them).
// bits_per_weight: stored bits per weight element over the searched units.
// predicted_kld = sum of the units' measured sensitivities at their
// precisions (+ the kv_cache entry at fp8): additive, first-order.
//
// Layer granularity (units "layers.N.<partition>"): the partition-level
// combinations are enumerated as above (a partition's sensitivity is the sum
// of its layers'), and each gets at most ONE more variant, so the queue is at
// most twice the partition-level count. Rule: in every quantized partition
// at precision P, the layers carrying the damage are protected — sort its
// layers by sensitivity at P (descending, ties by layer) and take those above
// the partition's mean until they hold half of its total or a quarter of its
// layers (rounded up); evenly spread damage protects nothing, as a uniform
// config already covers it — and moved to the next more precise candidate
// precision Q
// (the lowest level above P among the candidates, first listed on ties;
// native when none; a layer Q cannot hold stays at P). The hierarchy is then
// restored per layer (a layer's self_attn is raised to its MLP's precision,
// else the MLP override is dropped; a quantized shared_expert follows its
// routed_moe). With an fp8 KV cache attention gets no per-layer override
// (Quark's format gives every k/v projection one spec, candidate_export.h),
// so the MLP override is dropped where attention would have to rise.
//
// Order: modelled_gain descending, then predicted_kld ascending, then the
// config's canonical string; rank = position (1-based).
// Errors: kUsage when the candidates give more than max_combinations
// partition-level combinations, or no candidate survives; kInternal when the
// sensitivity table lacks a needed entry. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qloom/perf/candidate_entry.h"
#include "qloom/perf/partitions.h"
#include "qloom/perf/precision.h"
#include "qloom/perf/sensitivity.h"

namespace qloom::perf {

struct BytesModel {
  int64_t isl = 1024, osl = 1024;
  int64_t concurrency = 1;  // sequences decoded together (weights read once per step)
};

struct BytesEstimate {
  double weight_bytes = 0, kv_bytes = 0, activation_bytes = 0;  // per decoded token
  double bytes_per_token = 0;
  double bits_per_weight = 0;  // over the searched units
};

// kUsage for isl / osl < 0, concurrency < 1 or an unknown precision name.
BytesEstimate estimate_bytes(const PartitionPlan& plan, const CandidateConfig& config, const BytesModel& model);

// "" when the config keeps the hierarchy, else which rule it breaks.
std::string hierarchy_violation(const PartitionPlan& plan, const CandidateConfig& config);

struct EnumerationOptions {
  std::vector<Precision> precisions;               // layer candidates (parse_precision_candidates)
  std::vector<std::string> kv = {"native", "fp8"};  // parse_kv_candidates
  BytesModel bytes;
  uint64_t max_combinations = 200000;  // partition-level combinations enumerated at most
};

struct Enumeration {
  std::vector<CandidateEntry> queue;  // ranked, all pending
  uint64_t combinations = 0;          // partition-level combinations considered
  uint64_t dropped_hierarchy = 0, dropped_unfit = 0, dropped_nothing_quantized = 0;
  uint64_t layer_variants = 0;        // layer granularity: protected variants added
  double baseline_bytes_per_token = 0;
};

Enumeration enumerate_candidates(const PartitionPlan& plan, const SensitivityTable& sensitivity,
                                 const EnumerationOptions& options);

// Sorts by the order above and sets rank = 1..N.
void rank_candidates(std::vector<CandidateEntry>& queue);

// predicted_kld of a config: sum of its units' sensitivities (+ kv_cache).
double predicted_kld(const PartitionPlan& plan, const SensitivityTable& sensitivity, const CandidateConfig& config);

}  // namespace qloom::perf
