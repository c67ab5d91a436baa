// PhaseTimer: adds the wall and process-CPU seconds of its scope to
// PipelineSummary::phase_seconds / phase_cpu_seconds under a name, so a
// stage can say where its time goes (bench/awq_layer_bench prints them).
#pragma once

#include <time.h>

#include <chrono>
#include <string>
#include <utility>

#include "qloom/quant/algorithm_stage.h"

namespace qloom::quant {

inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

class PhaseTimer {
 public:
  PhaseTimer(PipelineSummary& s, std::string name)
      : s_(s), name_(std::move(name)), t0_(std::chrono::steady_clock::now()), cpu0_(process_cpu_seconds()) {}
  ~PhaseTimer() {
    s_.phase_seconds[name_] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    s_.phase_cpu_seconds[name_] += process_cpu_seconds() - cpu0_;
  }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  PipelineSummary& s_;
  std::string name_;
  std::chrono::steady_clock::time_point t0_;
  double cpu0_;
};

}  // namespace qloom::quant
