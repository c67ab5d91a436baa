// Small helpers the validation steps share for building report lines and
// data. Internal to src/qloom/validate.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/core/dtype.h"
#include "qloom/validate/drift.h"
#include "qloom/validate/report.h"

namespace qloom::validate::detail {

// "BF16", "F8_E4M3", ... (the safetensors header string; qloom's name when
// the dtype has none).
std::string dtype_label(DType t);

// "[64, 172]".
std::string shape_label(const std::vector<uint64_t>& shape);

// The items separated by `sep`.
std::string join(const std::vector<std::string>& items, const std::string& sep);

// "1 tensor" / "3 tensors".
std::string plural(size_t n, const char* one, const char* many);

// Appends "<label>: a, b, c" (at most max_listed names, then "… and N more")
// to r.details, and data[key] = up to 10 * max_listed names plus
// data[key + "_count"] = items.size(). Adds nothing to details when items is
// empty (the count still goes into data).
void list_items(StepResult& r, const std::string& label, const std::string& key,
                const std::vector<std::string>& items, size_t max_listed);

// Up to `cap` elements of `items` as a JSON array.
nlohmann::ordered_json capped_array(const std::vector<std::string>& items, size_t cap);

// `r` marked skipped, with `summary` and data["reason"] = `reason`: what a
// step returns when it cannot run (no source, unreadable weights...).
StepResult skipped(StepResult r, std::string summary, const char* reason);

// A JSON value on one line, for "path: source / quantized" lines (long values
// are cut to ~120 characters).
std::string json_brief(const nlohmann::json& v);

// Appends one "benign drift: <drift_line>" detail per item (at most
// max_listed, then "… and N more"), prefixed "<prefix>: " when given, and
// returns the items as a JSON array of drift_json().
nlohmann::ordered_json add_drift(StepResult& r, const std::vector<DriftItem>& drift,
                                 size_t max_listed, const std::string& prefix = "");

// The items' keys, comma-separated.
std::string drift_keys(const std::vector<DriftItem>& drift);

}  // namespace qloom::validate::detail
