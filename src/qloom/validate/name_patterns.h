// Tensor-name helpers shared by the validation steps: the fuzzy pattern of a
// name (layer and expert indices collapsed to `*`), shell-style glob matching
// (Quark's exclude lists), and the suffixes a Quark export adds beside a
// quantized weight.
#pragma once

#include <string>
#include <string_view>

namespace qloom::validate {

// Replaces every dot-separated segment made only of ASCII digits with `*`:
// "model.layers.12.mlp.experts.3.down_proj.weight" ->
// "model.layers.*.mlp.experts.*.down_proj.weight". Digits inside a segment
// ("norm1", "w2", "h.0a") are kept.
std::string canonicalize_tensor_name(std::string_view name);

// fnmatch-style match of the whole `text`: `*` any run of characters (dots
// included), `?` one character, `[abc]`, `[a-z]`, `[!abc]` one character of (or
// not of) a set; every other character matches itself.
bool glob_match(std::string_view pattern, std::string_view text);

// The tensor-name suffixes a Quark export writes beside a quantized module's
// `weight`: weight_scale, weight_zero_point, input_scale, input_zero_point,
// output_scale, output_zero_point, and a two-stage weight's weight_scale_2,
// weight_zero_point_2. Returns the suffix `name` ends with (after a
// dot), or an empty view.
std::string_view quantization_suffix(std::string_view name);

// "a.b.c" -> "a.b"; a name without a dot -> "".
std::string_view module_of(std::string_view tensor_name);

}  // namespace qloom::validate
