#include "qloom/io/hub_progress.h"

#include <algorithm>
#include <cstdio>

#include "qloom/core/format.h"

namespace qloom::io {
namespace {

constexpr auto kRedraw = std::chrono::milliseconds(120);

std::string pad(std::string s, size_t width) {
  if (s.size() > width) s = s.substr(0, width - 3) + "...";
  s.resize(width, ' ');
  return s;
}

}  // namespace

HubProgress::HubProgress(std::ostream* out, bool is_tty) : out_(out), tty_(is_tty) {
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

void HubProgress::begin(const std::string& label, size_t files, uint64_t bytes) {
  std::lock_guard lock(mu_);
  label_ = label;
  files_ = files;
  total_ = bytes;
  start_ = std::chrono::steady_clock::now();
  if (out_ && !tty_ && files > 0)
    *out_ << "qloom: downloading " << label << ": " << files << " file(s), "
          << format_bytes(bytes) << "\n";
}

void HubProgress::start(const std::string& file, uint64_t size, uint64_t already_done) {
  std::lock_guard lock(mu_);
  active_[file] = FileState{size, already_done};
  done_ += already_done;
  draw_locked(false);
}

void HubProgress::advance(const std::string& file, uint64_t bytes) {
  std::lock_guard lock(mu_);
  active_[file].done += bytes;
  done_ += bytes;
  transferred_ += bytes;
  draw_locked(false);
}

void HubProgress::rewind(const std::string& file, uint64_t bytes) {
  std::lock_guard lock(mu_);
  FileState& f = active_[file];
  f.done -= std::min(f.done, bytes);
  done_ -= std::min(done_, bytes);
}

void HubProgress::done(const std::string& file) {
  std::lock_guard lock(mu_);
  const auto it = active_.find(file);
  const uint64_t size = it == active_.end() ? 0 : it->second.size;
  if (it != active_.end()) active_.erase(it);
  ++files_done_;
  if (out_ && !tty_)
    *out_ << "qloom:   [" << files_done_ << "/" << files_ << "] " << file << " ("
          << format_bytes(size) << ")\n";
  draw_locked(true);
}

void HubProgress::finish() {
  std::lock_guard lock(mu_);
  if (!out_ || files_ == 0) return;
  draw_locked(true);
  const double s = seconds();
  char rate[64];
  std::snprintf(rate, sizeof rate, "%.1f MB/s", s > 0 ? double(transferred_) / s / 1e6 : 0.0);
  *out_ << "qloom: downloaded " << label_ << ": " << files_done_ << " file(s), "
        << format_bytes(transferred_) << " in " << format_duration(s) << " (" << rate << ")\n";
  out_->flush();
}

uint64_t HubProgress::bytes_transferred() const {
  std::lock_guard lock(mu_);
  return transferred_;
}

double HubProgress::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string HubProgress::bar(uint64_t done, uint64_t total) const {
  constexpr int kWidth = 24;
  const double frac = total ? std::min(1.0, double(done) / double(total)) : 1.0;
  const int fill = static_cast<int>(frac * kWidth);
  std::string s = "[";
  s.append(static_cast<size_t>(fill), '#');
  s.append(static_cast<size_t>(kWidth - fill), '.');
  char tail[96];
  std::snprintf(tail, sizeof tail, "] %3d%% ", static_cast<int>(frac * 100));
  s += tail;
  s += format_bytes(done);
  s += " / ";
  s += format_bytes(total);
  return s;
}

void HubProgress::draw_locked(bool force) {
  if (!out_ || !tty_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_draw_ < kRedraw) return;
  last_draw_ = now;
  std::string block;
  for (size_t i = 0; i < drawn_lines_; ++i) block += "\x1b[1A\x1b[2K";  // up one line, clear it
  block += '\r';
  size_t lines = 0;
  for (const auto& [name, f] : active_) {
    block += "  ";
    block += pad(name, 36);
    block += bar(f.done, f.size);
    block += '\n';
    ++lines;
  }
  block += "  ";
  std::string total = "total ";
  total += std::to_string(files_done_);
  total += '/';
  total += std::to_string(files_);
  total += " files";
  block += pad(total, 36);
  block += bar(done_, total_);
  const double s = seconds();
  char rate[48];
  std::snprintf(rate, sizeof rate, "  %.1f MB/s\n", s > 0 ? double(transferred_) / s / 1e6 : 0.0);
  block += rate;
  ++lines;
  drawn_lines_ = lines;
  *out_ << block;
  out_->flush();
}

}  // namespace qloom::io
