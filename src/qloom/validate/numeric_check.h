// qloom's numeric validation step (step 5): every quantized weight of the
// checkpoint is unpacked from its Quark layout and dequantized; it must
//  - reproduce exactly what qloom's reference quantizer gives for the source
//    weight under the spec the checkpoint's quantization_config assigns to it
//    (only when algo_config is null: GPTQ/AWQ legitimately choose other codes),
//  - and come within its format's SQNR floor of the source weight; for
//    linears an algorithm folded per-channel scales into (algo_config entries
//    with "scaling_layers": AWQ, SmoothQuant) the source weight with those
//    scales applied, the scales read from the exported norm / producer or
//    fitted (folded_scales.h), and a fold that explains the weight much worse
//    than a per-channel fit fails too.
// Then the engine loads both checkpoints (the quantized one as it computes:
// dequantized weights, simulated activation / KV quantization) and scores one
// fixed ~80-token window: non-finite logits or a failed load fail the step;
// KL(source || quantized) and top-1 agreement are reported. This holds both
// models in memory at once.
// Reads the validate <- export direction: the Quark layout lives in export/.
#pragma once

#include <optional>

#include "qloom/export/checkpoint_runtime.h"
#include "qloom/io/model_dir.h"
#include "qloom/quant/quant_spec.h"
#include "qloom/validate/report.h"

namespace qloom::validate {

// Lowest SQNR (dB) of a dequantized weight against its source that step 5
// accepts, by element format: 4-bit formats 6 dB, fp8 20 dB, int8 20 dB.
// Far below typical values (int4 g128 ~19 dB, fp8 ~31 dB on Gaussian
// weights): these catch broken scales, transposes and packing, not accuracy.
double sqnr_floor_db(const quant::QuantSpec& weight_spec);

// The floor one module is held to. An RTN export: sqnr_floor_db, lowered to
// what round-to-nearest itself reaches on this very tensor (`rtn_sqnr_db`,
// from re-quantizing the source) minus kRtnSqnrAllowanceDb (its codes must
// reproduce anyway). An algorithm's export (GPTQ / AWQ / SmoothQuant /
// AutoSmoothQuant, which trade weight error for output error): the lower of
// the two, minus kAlgoSqnrAllowanceDb — a smoothing fold that divides a
// producer's rows by s widens their range, and per-tensor int8 then loses a
// little on them (SmolLM2-135M autosmoothquant int8, layer 11 up_proj:
// 19.39 dB, while the model's KLD halves). A real weight with outliers sits
// below the fixed floor however correctly it is quantized (SmolLM2-135M
// layer 27 gate_proj, per-tensor int8: 18.68 dB); a broken scale, transpose
// or packing lands tens of dB below its RTN figure.
inline constexpr double kRtnSqnrAllowanceDb = 0.01;
inline constexpr double kAlgoSqnrAllowanceDb = 6.0;
double module_sqnr_floor_db(const quant::QuantSpec& weight_spec, std::optional<double> rtn_sqnr_db,
                            bool rtn_export);

// Usable as ValidateOptions::numeric_step (simulate). _on: `runtime`: how the engine window
// runs the quantized checkpoint (simulate by default, so the step's KLD keeps
// meaning Quark's arithmetic; validate --runtime native checks the kernels).
StepResult check_dequantized_weights_on(const io::ModelDir& source, const io::ModelDir& quantized,
                                        exporter::Runtime runtime);
inline StepResult check_dequantized_weights(const io::ModelDir& source, const io::ModelDir& quantized) {
  return check_dequantized_weights_on(source, quantized, exporter::Runtime::kSimulate);
}

}  // namespace qloom::validate
