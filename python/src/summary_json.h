// exporter::QuantizeSummary as JSON (the facts `qloom quantize` prints).
#pragma once

#include <nlohmann/json.hpp>

#include "qloom/export/quantize_job.h"

namespace qloom::python {

nlohmann::ordered_json quantize_summary_json(const exporter::QuantizeSummary& s);

}  // namespace qloom::python
