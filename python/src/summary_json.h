// job::QuantizeSummary as JSON (the facts `qloom quantize` prints).
#pragma once

#include <nlohmann/json.hpp>

#include "qloom/job/quantize_job.h"

namespace qloom::python {

nlohmann::ordered_json quantize_summary_json(const job::QuantizeSummary& s);

}  // namespace qloom::python
