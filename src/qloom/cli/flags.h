// Flag spelling: every multi-word option is accepted both as snake_case (the
// spelling Quark's CLI uses) and kebab-case. Declare options through these.
#pragma once

#include <string>
#include <string_view>

namespace qloom::cli {

// "output_dir" -> "--output_dir,--output-dir"; "json" -> "--json".
inline std::string flag_names(std::string_view snake, std::string_view short_name = {}) {
  std::string names;
  if (!short_name.empty()) names += "-" + std::string(short_name) + ",";
  names += "--" + std::string(snake);
  if (snake.find('_') != std::string_view::npos) {
    std::string kebab(snake);
    for (char& c : kebab)
      if (c == '_') c = '-';
    names += ",--" + kebab;
  }
  return names;
}

}  // namespace qloom::cli
