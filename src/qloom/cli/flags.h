// Flag spelling of the CLI: see core/flag_names.h (snake_case and kebab-case).
#pragma once

#include "qloom/core/flag_names.h"

namespace qloom::cli {
using qloom::flag_names;
}  // namespace qloom::cli
