#include "qloom/model/model_arg.h"

#include <unistd.h>

#include <iostream>

#include "qloom/model/gguf_convert.h"

namespace qloom::model {

std::filesystem::path resolve_model_arg(const std::string& spec, io::HubFetch fetch, std::ostream* log) {
  if (is_gguf_file(spec)) return resolve_gguf_model(spec, log);
  io::HubResolveOptions o;
  o.fetch = fetch;
  o.log = log;
  o.log_is_tty = log == &std::cerr && ::isatty(STDERR_FILENO) == 1;
  return io::resolve_model_path(spec, o);
}

}  // namespace qloom::model
