#include "qloom/perf/utc_time.h"

#include <ctime>

namespace qloom::perf {
namespace {

std::string format_time(const char* fmt, bool utc) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  if (utc) gmtime_r(&t, &tm);
  else localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, fmt, &tm);
  return buf;
}

}  // namespace

std::string utc_timestamp() { return format_time("%Y-%m-%dT%H:%M:%SZ", true); }
std::string session_dir_stamp() { return format_time("%Y%m%d-%H%M%S", false); }

}  // namespace qloom::perf
