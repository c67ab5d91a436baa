// HubProgress: download progress, one bar per file being fetched and one for
// the total, written to a stream (stderr in the CLI). Thread-safe: download
// workers report into it concurrently. On a terminal the block of bars is
// redrawn in place (at most ~8 times a second); otherwise one line is printed
// when each file completes and one at the end. A null stream is silent.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <ostream>
#include <string>

namespace qloom::io {

class HubProgress {
 public:
  HubProgress(std::ostream* out, bool is_tty);

  // The download is about to fetch `files` files, `bytes` in all (including
  // bytes already on disk in .incomplete files, counted as done at start()).
  void begin(const std::string& label, size_t files, uint64_t bytes);
  void start(const std::string& file, uint64_t size, uint64_t already_done);
  void advance(const std::string& file, uint64_t bytes);
  // `bytes` went back (a server ignored a Range request and resent the file).
  void rewind(const std::string& file, uint64_t bytes);
  void done(const std::string& file);
  void finish();

  uint64_t bytes_transferred() const;  // over the network, this run
  double seconds() const;

 private:
  struct FileState {
    uint64_t size = 0, done = 0;
  };
  void draw_locked(bool force);
  std::string bar(uint64_t done, uint64_t total) const;

  std::ostream* out_;
  bool tty_;
  mutable std::mutex mu_;
  std::string label_;
  std::map<std::string, FileState> active_;
  size_t files_ = 0, files_done_ = 0;
  uint64_t total_ = 0, done_ = 0, transferred_ = 0;
  size_t drawn_lines_ = 0;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace qloom::io
