// Hub settings from the environment, read the way huggingface_hub reads them,
// so both tools share one cache and one login.
#pragma once

#include <filesystem>
#include <string>

namespace qloom::io {

struct HubSettings {
  std::string endpoint;              // no trailing '/'
  std::string token;                 // empty: anonymous
  std::filesystem::path token_file;  // where the token would be read from
  bool offline = false;              // never touch the network
  std::filesystem::path cache_dir;   // the hub cache root (holds models--org--name)
};

// endpoint: $HF_ENDPOINT, default https://huggingface.co.
// token: $HF_TOKEN (or the legacy $HUGGING_FACE_HUB_TOKEN), else the first
//   line of $HF_TOKEN_PATH, default $HF_HOME/token (what `hf auth login`
//   writes); surrounding whitespace dropped.
// offline: $HF_HUB_OFFLINE (or $TRANSFORMERS_OFFLINE) is 1/ON/YES/TRUE.
// cache_dir: $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub;
//   $HF_HOME defaults to $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface.
//   A leading "~" is expanded.
HubSettings hub_settings_from_env();

}  // namespace qloom::io
