// Flag spelling shared by the CLI and the library's command parsers: every
// multi-word option is accepted both as snake_case (the spelling Quark's CLI
// uses) and kebab-case.
#pragma once

#include <string>
#include <string_view>

namespace qloom {

// "output_dir" -> "--output_dir,--output-dir"; "json" -> "--json";
// with a short name: "-o,--output_dir,--output-dir".
inline std::string flag_names(std::string_view snake, std::string_view short_name = {}) {
  std::string names;
  if (!short_name.empty()) {
    names += '-';
    names += short_name;
    names += ',';
  }
  names += "--";
  names += snake;
  if (snake.find('_') != std::string_view::npos) {
    std::string kebab(snake);
    for (char& c : kebab)
      if (c == '_') c = '-';
    names += ",--";
    names += kebab;
  }
  return names;
}

}  // namespace qloom
