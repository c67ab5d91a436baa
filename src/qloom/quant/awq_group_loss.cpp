#include "qloom/quant/awq_group_loss.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "qloom/core/error.h"
#include "qloom/quant/activation_observer.h"
#include "qloom/quant/gptq.h"

namespace qloom::quant {

struct AwqReferenceCollector::State {
  AwqReference ref;
  std::optional<HessianAccumulator> gram;
};

AwqReferenceCollector::AwqReferenceCollector(std::vector<Group> groups, uint64_t direct_bytes, ThreadPool* pool)
    : groups_(std::move(groups)), direct_bytes_(direct_bytes), pool_(pool) {
  for (const Group& gr : groups_) {
    const ScalingGroup& g = *gr.group;
    const size_t n = static_cast<size_t>(g.channels);
    auto st = std::make_unique<State>();
    st->ref.abs_sum.assign(n, 0.0);
    const bool direct = g.linears.size() == 1 && gr.out_module == g.linears.front() && g.input_site == gr.out_module;
    st->ref.gram = direct && n * n * 12 <= direct_bytes;
    st->ref.direct = direct && !st->ref.gram;
    if (st->ref.gram) st->gram.emplace(static_cast<int64_t>(n));
    st_.push_back(std::move(st));
  }
}

AwqReferenceCollector::~AwqReferenceCollector() = default;

void AwqReferenceCollector::begin_sample() {
  for (auto& st : st_) {
    st->ref.out_off.push_back(st->ref.out.size());
    st->ref.xs_off.push_back(st->ref.xs.size());
  }
}

engine::ForwardHooks AwqReferenceCollector::hooks() {
  engine::ForwardHooks h;
  h.linear_input = [this](const engine::LinearSite& site, float* x, int64_t rows, int64_t cols) {
    for (size_t i = 0; i < groups_.size(); ++i) {
      const ScalingGroup& g = *groups_[i].group;
      if (site.module != g.input_site) continue;
      AwqReference& ref = st_[i]->ref;
      const size_t n = ref.abs_sum.size();
      if (static_cast<size_t>(cols) != n)
        throw Error(ErrorKind::kInternal, "", site.module, "the group's input width differs from its channel count");
      (void)observed_amax(site.module, "input", x, rows * cols);  // NaN / inf: an error naming it
      for (int64_t t = 0; t < rows; ++t)
        for (size_t j = 0; j < n; ++j)
          ref.abs_sum[j] += std::fabs(static_cast<double>(x[t * cols + static_cast<int64_t>(j)]));
      ref.tokens += rows;
      if (st_[i]->gram) st_[i]->gram->add(x, rows, pool_);
      if (!ref.direct) continue;
      if ((ref.xs.size() + static_cast<size_t>(rows * cols)) * sizeof(float) > direct_bytes_) {
        ref.direct = false;
        std::vector<float>().swap(ref.xs);
        continue;
      }
      ref.xs.insert(ref.xs.end(), x, x + rows * cols);
    }
  };
  h.linear_output = [this](const engine::LinearSite& site, float* y, int64_t rows, int64_t cols) {
    for (size_t i = 0; i < groups_.size(); ++i)
      if (site.module == groups_[i].out_module && !st_[i]->ref.gram)
        st_[i]->ref.out.insert(st_[i]->ref.out.end(), y, y + rows * cols);
  };
  return h;
}

std::vector<AwqReference> AwqReferenceCollector::finish() {
  std::vector<AwqReference> out;
  begin_sample();  // the closing offsets
  for (auto& st : st_) {
    AwqReference& ref = st->ref;
    if (!ref.direct) ref.xs_off.clear();
    if (st->gram) {  // hessian() is 2/n Σ x xᵀ
      ref.gram_sum = st->gram->take_hessian();
      const double half_n = static_cast<double>(ref.tokens) / 2.0;
      for (double& v : ref.gram_sum) v *= half_n;
    }
    out.push_back(std::move(ref));
  }
  st_.clear();
  return out;
}

AwqGroupLoss::AwqGroupLoss(engine::LayerRunner& runner, AwqReference ref, std::string out_module, AwqSampleRun run,
                           ThreadPool& pool, const std::vector<std::vector<float>>* ff_states)
    : runner_(runner), ref_(std::move(ref)), out_(std::move(out_module)), run_(std::move(run)), pool_(pool) {
  parts_ = static_cast<int64_t>(ref_.out_off.size()) - 1;
  permute_rows(ff_states);
  if (!ref_.direct) engine::prepack(runner_.linear(out_));  // fixed while the search re-runs the layer
}

void AwqGroupLoss::permute_rows(const std::vector<std::vector<float>>* ff) {
  const int64_t D = runner_.config().hidden_size;
  if (ref_.direct) {
    if (ref_.xs.empty() || ref_.out.empty()) return;
    const int64_t in = runner_.linear(out_).in;
    rows_ = static_cast<int64_t>(ref_.xs.size()) / in;
    if (rows_ * in != static_cast<int64_t>(ref_.xs.size()) || ref_.out.size() % static_cast<size_t>(rows_)) return;
    hidden_ = in;
  } else {
    if (ff == nullptr) return;
    int64_t n = 0;
    for (const auto& x : *ff) n += static_cast<int64_t>(x.size()) / D;
    rows_ = n;
    hidden_ = D;
    if (rows_ == 0 || ref_.out.size() % static_cast<size_t>(rows_)) return;
  }
  out_cols_ = static_cast<int64_t>(ref_.out.size()) / rows_;
  std::vector<double> norm(static_cast<size_t>(rows_), 0.0);
  for (int64_t t = 0; t < rows_; ++t)
    for (int64_t c = 0; c < out_cols_; ++c) {
      const double v = ref_.out[static_cast<size_t>(t * out_cols_ + c)];
      norm[static_cast<size_t>(t)] += v * v;
    }
  std::vector<int64_t> perm(static_cast<size_t>(rows_));
  for (int64_t t = 0; t < rows_; ++t) perm[static_cast<size_t>(t)] = t;
  std::stable_sort(perm.begin(), perm.end(),
                   [&](int64_t a, int64_t b) { return norm[static_cast<size_t>(a)] > norm[static_cast<size_t>(b)]; });
  auto gather = [&](const float* src, int64_t cols) {
    std::vector<float> out(static_cast<size_t>(rows_ * cols));
    for (int64_t t = 0; t < rows_; ++t)
      std::copy_n(src + perm[static_cast<size_t>(t)] * cols, cols, out.data() + t * cols);
    return out;
  };
  ref_.out = gather(ref_.out.data(), out_cols_);
  if (ref_.direct) {
    ref_.xs = gather(ref_.xs.data(), hidden_);
  } else {
    std::vector<const float*> row(static_cast<size_t>(rows_));  // global row -> its sample's row
    size_t g = 0;
    for (const auto& x : *ff)
      for (size_t t = 0; t < x.size() / static_cast<size_t>(D); ++t) row[g++] = x.data() + t * static_cast<size_t>(D);
    ff_in_.resize(static_cast<size_t>(rows_ * D));
    for (int64_t t = 0; t < rows_; ++t) std::copy_n(row[static_cast<size_t>(perm[static_cast<size_t>(t)])], D,
                                                    ff_in_.data() + t * D);
  }
  tokens_ = true;
  parts_ = (rows_ + kTokenPart - 1) / kTokenPart;
}

AwqGroupLoss::~AwqGroupLoss() {
  end();
  runner_.linear(out_).packed.reset();
}

void AwqGroupLoss::begin(const AwqCandidates& candidates) {
  end();
  if (ref_.direct) {
    direct_copy_ = candidates.at(out_);
    engine::prepack(direct_copy_);
    direct_w_ = &direct_copy_;
    return;
  }
  for (const auto& [name, w] : candidates) {
    engine::LinearWeight& slot = runner_.linear(name);
    saved_.emplace_back(&slot, std::move(slot));
    slot = w;
    engine::prepack(slot);  // used by every part of this grid point
  }
}

void AwqGroupLoss::end() {
  for (auto& [slot, orig] : saved_) *slot = std::move(orig);
  saved_.clear();
  direct_w_ = nullptr;
}

double AwqGroupLoss::part_se(int64_t p) {
  if (p < 0 || p >= parts()) throw Error(ErrorKind::kInternal, "", "part", "AWQ loss part out of range");
  const size_t i = static_cast<size_t>(p);
  if (tokens_) {
    const size_t r0 = i * kTokenPart, r1 = std::min<size_t>(static_cast<size_t>(rows_), r0 + kTokenPart);
    if (!ref_.direct) return ff_se(i);
    return direct_se(r0 * hidden_, r1 * hidden_, r0 * out_cols_, r1 * out_cols_);
  }
  if (ref_.direct) return direct_se(ref_.xs_off[i], ref_.xs_off[i + 1], ref_.out_off[i], ref_.out_off[i + 1]);
  return rerun_se(i);
}

double AwqGroupLoss::direct_se(size_t x0, size_t x1, size_t o0, size_t o1) {
  const engine::LinearWeight& w = *direct_w_;
  const int64_t rows = static_cast<int64_t>((x1 - x0) / static_cast<size_t>(w.in));
  if (static_cast<size_t>(rows * w.out) != o1 - o0) return std::numeric_limits<double>::quiet_NaN();
  if (rows == 0) return 0.0;
  y_.resize(o1 - o0);
  engine::linear(ref_.xs.data() + x0, rows, w, y_.data(), pool_);
  double se = 0.0;
  for (size_t i = 0; i < y_.size(); ++i) {
    const double d = static_cast<double>(y_[i]) - ref_.out[o0 + i];
    se += d * d;
  }
  return se;
}

namespace {

// Squared error of the output of linear `module` against ref[begin, end),
// in the order the forward pass produces it; NaN when the shapes disagree
// (more or fewer values than the reference range holds).
class OutputSquaredError {
 public:
  OutputSquaredError(const std::string& module, const std::vector<float>& ref, size_t begin, size_t end)
      : module_(module), ref_(ref), off_(begin), end_(end) {}

  engine::ForwardHooks hooks() {
    engine::ForwardHooks h;
    h.linear_output = [this](const engine::LinearSite& site, float* out, int64_t rows, int64_t cols) {
      if (site.module != module_) return;
      const size_t m = static_cast<size_t>(rows * cols);
      if (off_ + m > end_) {
        bad_ = true;
        return;
      }
      for (size_t i = 0; i < m; ++i) {
        const double d = static_cast<double>(out[i]) - ref_[off_ + i];
        se_ += d * d;
      }
      off_ += m;
    };
    return h;
  }
  double result() const { return bad_ || off_ != end_ ? std::numeric_limits<double>::quiet_NaN() : se_; }

 private:
  const std::string& module_;
  const std::vector<float>& ref_;
  size_t off_, end_;
  bool bad_ = false;
  double se_ = 0.0;
};

}  // namespace

double AwqGroupLoss::ff_se(size_t p) {
  const int64_t r0 = static_cast<int64_t>(p) * kTokenPart, r1 = std::min(rows_, r0 + kTokenPart);
  OutputSquaredError se(out_, ref_.out, static_cast<size_t>(r0 * out_cols_), static_cast<size_t>(r1 * out_cols_));
  const engine::ForwardHooks h = se.hooks();
  runner_.forward_layer(ff_in_.data() + r0 * hidden_, r1 - r0, &h, engine::LayerPart::kFeedForward);
  return se.result();
}

double AwqGroupLoss::rerun_se(size_t p) {
  OutputSquaredError se(out_, ref_.out, ref_.out_off[p], ref_.out_off[p + 1]);
  const engine::ForwardHooks h = se.hooks();
  run_(p, h);
  return se.result();
}

}  // namespace qloom::quant
