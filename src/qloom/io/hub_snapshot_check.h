// Whether a cached snapshot can be used without the network.
#pragma once

#include <string>

#include "qloom/io/hub.h"
#include "qloom/io/hub_cache.h"

namespace qloom::io {

// "" when snapshots/<commit> holds what `fetch` needs, else what is missing
// ("config.json", "model-00002-of-00002.safetensors", ...). kConfigOnly needs
// config.json. kModel also needs every shard the *.safetensors.index.json
// files name and, when huggingface_hub left a tree listing
// (trees/<commit>.json), every file of it that qloom would download. A link
// whose blob is gone counts as missing.
std::string missing_from_snapshot(const HubCache& cache, const std::string& commit, HubFetch fetch);

}  // namespace qloom::io
