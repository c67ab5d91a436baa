// ForwardContext: what every block of one forward() call shares — the thread
// pool and the caller's hooks — plus run_linear(), the single place where a
// linear layer runs, so every matmul (lm_head and MoE routers included)
// passes through the LinearSite hooks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qloom/core/thread_pool.h"
#include "qloom/engine/gemm.h"
#include "qloom/engine/model.h"

namespace qloom::engine {

// A linear layer with its hook name (checkpoint name minus ".weight").
struct NamedLinear {
  std::string name;
  LinearWeight w;
};

struct ForwardContext {
  ForwardContext(ThreadPool& p, const ForwardHooks* h) : pool(p), hooks(h) {}

  ThreadPool& pool;
  const ForwardHooks* hooks;  // may be null

  // y[rows, w.out] = x[rows, w.in]·Wᵀ (+bias). When a linear_input hook is
  // set it sees (and may rewrite) a private copy of x, so one projection's
  // hook never alters the input another projection (or the residual) reads.
  void run_linear(const std::string& name, const LinearWeight& w, int layer, const float* x,
                  int64_t rows, float* y);
  void run_linear(const NamedLinear& lin, int layer, const float* x, int64_t rows, float* y) {
    run_linear(lin.name, lin.w, layer, x, rows, y);
  }

 private:
  std::vector<float> input_copy_;
};

}  // namespace qloom::engine
