#include "qloom/eval/progress.h"

#include <cstdio>

namespace qloom::eval {

std::string format_duration(double seconds) {
  if (!(seconds >= 0)) seconds = 0;
  const int64_t s = int64_t(seconds + 0.5);
  char buf[48];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(s / 3600),
                  (long long)(s / 60 % 60), (long long)(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", (long long)(s / 60), (long long)(s % 60));
  return buf;
}

Progress::Progress(std::ostream* out, bool is_tty, std::string label, std::string unit,
                   int64_t total)
    : out_(out), tty_(is_tty), label_(std::move(label)), unit_(std::move(unit)), total_(total),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

void Progress::set_total(int64_t total) { total_ = total; }

double Progress::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string Progress::line(int64_t done) const {
  const double el = elapsed_seconds();
  const double pct = total_ > 0 ? 100.0 * double(done) / double(total_) : 100.0;
  std::string s = "[" + label_ + "] " + std::to_string(done) + "/" + std::to_string(total_) + " " +
                  unit_;
  char buf[96];
  std::snprintf(buf, sizeof buf, " %5.1f%%  elapsed %s", pct, format_duration(el).c_str());
  s += buf;
  if (done > 0 && done < total_) {
    s += "  ETA ";
    s += format_duration(el / double(done) * double(total_ - done));
  }
  return s;
}

void Progress::update(int64_t done) {
  if (out_ == nullptr || total_ <= 0) return;
  if (tty_) {
    const auto now = std::chrono::steady_clock::now();
    if (done < total_ && drew_ && now - last_draw_ < std::chrono::milliseconds(250)) return;
    last_draw_ = now;
    drew_ = true;
    *out_ << "\r" << line(done) << "\033[K" << std::flush;
    return;
  }
  const int64_t decile = done * 10 / total_;
  if (decile > last_decile_ || done == total_) {
    if (decile == last_decile_ && drew_) return;
    last_decile_ = decile;
    drew_ = true;
    *out_ << line(done) << "\n" << std::flush;
  }
}

void Progress::finish() {
  if (out_ != nullptr && tty_ && drew_) *out_ << "\n" << std::flush;
}

}  // namespace qloom::eval
