// The eval layer's name for export/checkpoint_runtime.h: a model directory
// (plain or a Quark checkpoint) loaded into the engine exactly as it would
// compute when served. Shared with validate (step 5 runs one window).
#pragma once

#include "qloom/export/checkpoint_runtime.h"

namespace qloom::eval {

using exporter::CheckpointRuntime;
using exporter::LoadedModel;
using exporter::load_for_eval;
using exporter::open_checkpoint_runtime;

}  // namespace qloom::eval
