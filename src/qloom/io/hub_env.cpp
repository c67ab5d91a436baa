#include "qloom/io/hub_env.h"
#include "qloom/core/strings.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>

namespace qloom::io {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}


bool is_true(std::string v) {
  for (char& c : v) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return v == "1" || v == "ON" || v == "YES" || v == "TRUE";
}

std::filesystem::path expand_home(const std::string& p) {
  if (!p.empty() && p[0] == '~' && (p.size() == 1 || p[1] == '/')) {
    std::string out = env("HOME");
    out += p.substr(1);
    return out;
  }
  return p;
}

}  // namespace

HubSettings hub_settings_from_env() {
  HubSettings s;
  s.endpoint = env("HF_ENDPOINT");
  if (s.endpoint.empty()) s.endpoint = "https://huggingface.co";
  while (!s.endpoint.empty() && s.endpoint.back() == '/') s.endpoint.pop_back();

  std::filesystem::path home;
  if (const std::string h = env("HF_HOME"); !h.empty()) {
    home = expand_home(h);
  } else {
    const std::string xdg = env("XDG_CACHE_HOME");
    home = (xdg.empty() ? expand_home("~/.cache") : expand_home(xdg)) / "huggingface";
  }
  if (std::string c = env("HF_HUB_CACHE"); !c.empty()) s.cache_dir = expand_home(c);
  else if (c = env("HUGGINGFACE_HUB_CACHE"); !c.empty()) s.cache_dir = expand_home(c);
  else s.cache_dir = home / "hub";

  const std::string tp = env("HF_TOKEN_PATH");
  s.token_file = tp.empty() ? home / "token" : expand_home(tp);
  s.token = trim(env("HF_TOKEN"), kAsciiSpace);
  if (s.token.empty()) s.token = trim(env("HUGGING_FACE_HUB_TOKEN"), kAsciiSpace);
  if (s.token.empty()) {
    std::ifstream f(s.token_file);
    std::string line;
    if (f && std::getline(f, line)) s.token = trim(line, kAsciiSpace);
  }
  s.offline = is_true(env("HF_HUB_OFFLINE")) || is_true(env("TRANSFORMERS_OFFLINE"));
  return s;
}

}  // namespace qloom::io
