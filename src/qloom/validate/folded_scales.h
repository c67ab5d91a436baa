// Step 5 on exports with folded per-channel scales (AWQ, SmoothQuant): a
// linear listed in "layers" of a quantization_config.algo_config
// "scaling_layers" entry holds Q(W · diag(s)), its producer (the entry's
// "prev_op", a linear) holds rows divided by s, so neither can be compared
// with its source weight as it is. plan_folded_scales recovers s per layer
// and entry (union over the algorithms; scales folded by two algorithms
// multiply and are recovered together):
//   norm      prev_op is a norm left unquantized: s_j = f(w_src_j) / f(w_q_j),
//             f(w) = w, gemma family 1 + w. Exact up to the norm's storage
//             rounding (bf16: 2^-9 relative).
//   producer  prev_op is an unquantized linear: s_j = |src_r|^2 / <src_r, q_r>
//             for its row r feeding channel j (the last `channels` rows: a
//             fused qkv_proj's v rows, gate_up_proj's up rows).
//   fit       otherwise (a quantized producer): per channel least squares over
//             the readers' columns, s_j = sum <src_col_j, deq_col_j> /
//             sum |src_col_j|^2 (readers with their other known scales applied).
// Channels a rule cannot give (a zero norm entry, a zero column) fall back to
// the fit, then to 1. Each reader's expected weight is then src · diag(s)
// (composed with a row scale when it is itself a producer), a quantized
// producer's is diag(1/s) · src on its feeding rows — under grouped-query
// attention (Quark folds v_proj -> o_proj there with one scale per KV head
// and head dim, awq/scale.py), the producer's last kv_heads * head_dim rows,
// each divided by the geometric mean of its query heads' column scales.
// fold_check then measures the SQNR of the dequantized weight against the
// expected one (compared with the scheme's floor by the caller) and, for
// every input channel whose scale was read exactly (norm / producer), the
// least-squares gain g_j = <e_j, d_j> / |e_j|^2 of the dequantized column d_j
// on the expected one e_j: it is ~1 for a consistent fold, and a channel with
// g_j outside [1/kFoldRatioLimit, kFoldRatioLimit] means the exported norm /
// producer and the quantized weight disagree (e.g. a corrupted folded norm,
// which step 2 exempts from byte identity). Columns quantized mostly to zero
// (fewer than half their entries non-zero: coarse groups shrink their gain)
// are not judged. Scales that were fitted are consistent by construction and
// are judged by the SQNR floor only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/io/model_dir.h"

namespace qloom::validate {

inline constexpr double kFoldRatioLimit = 2.0;

struct FoldTransform {
  std::vector<double> col;  // multiply column j by col[j] (empty: none)
  std::vector<double> row;  // divide row r by row[r] (empty: none)
  std::vector<uint8_t> col_exact;  // 1 where col[j] holds a scale read exactly (norm / producer)
  std::string how;          // how the scales were read: "norm", "producer", "fit", joined by '+'
};

struct FoldPlan {
  std::map<std::string, FoldTransform> modules;  // by module name
  uint64_t entries = 0;                          // (layer, scaling_layers entry) pairs applied
  std::vector<std::string> notes;                // entries that could not be applied, and why
};

// The dequantized weight of a quantized module ([out, in] row-major), or
// nullopt when the checkpoint does not quantize it. May throw.
using DequantizedFn = std::function<std::optional<std::vector<float>>(const std::string& module)>;

// Reads every algo_config entry with "scaling_layers" (none: an empty plan).
// Throws qloom::Error for unreadable tensors.
FoldPlan plan_folded_scales(const nlohmann::json& quantization_config, const io::ModelDir& source,
                            const io::ModelDir& quantized, const DequantizedFn& dequantized);

// diag(1/row) · src · diag(col), in place; src is [rows, cols].
void apply_fold(const FoldTransform& t, std::vector<float>& src, uint64_t rows, uint64_t cols);

struct FoldFit {
  double expected_db = 0;           // SQNR of deq against the fold's expected weight
  std::vector<uint64_t> mismatched;  // exactly read channels whose gain is off (see above)
  double worst_gain = 1;            // the gain furthest from 1 (as a ratio) among judged channels
};
// src: the source weight (untransformed), deq: the dequantized weight.
FoldFit fold_check(const FoldTransform& t, const std::vector<float>& src, const std::vector<float>& deq,
                   uint64_t rows, uint64_t cols);

}  // namespace qloom::validate
