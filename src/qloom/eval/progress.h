// Progress: a progress line with ETA for long evaluations, written to a
// stream (stderr in the CLI). On a terminal one line is redrawn in place
// (at most ~4 times a second); otherwise a line is printed each time another
// ~10% of the work is done, and at the end.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

namespace qloom::eval {

// "1:05:03" / "4:07" style durations.
std::string format_duration(double seconds);

class Progress {
 public:
  // `unit`: plural noun ("windows", "questions"). `out` may be null (silent).
  Progress(std::ostream* out, bool is_tty, std::string label, std::string unit, int64_t total);
  // Lowers the total (the time budget limited the work).
  void set_total(int64_t total);
  void update(int64_t done);
  void finish();
  double elapsed_seconds() const;

 private:
  std::string line(int64_t done) const;
  std::ostream* out_;
  bool tty_;
  std::string label_, unit_;
  int64_t total_;
  int64_t last_decile_ = 0;
  bool drew_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace qloom::eval
