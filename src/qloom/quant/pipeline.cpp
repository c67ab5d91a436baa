#include "qloom/quant/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "qloom/core/error.h"
#include "qloom/quant/activation_observer.h"
#include "qloom/quant/bf16_calibration.h"
#include "qloom/quant/phase_timer.h"
#include "qloom/quant/quantize_fast.h"
#include "qloom/quant/quantize_ref.h"

namespace qloom::quant {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

struct CalibrationPipeline::Impl {
  PipelineRequest req;
  std::unique_ptr<engine::LayerRunner> runner;
  std::vector<std::vector<float>> acts;  // per sample: [T, hidden] input of the next layer
  // The float model's inputs of the next layer (only when a stage
  // wants_float_stream()); empty otherwise.
  std::vector<std::vector<float>> float_acts;
  bool float_stream = false;
  std::vector<int64_t> lengths;
  std::vector<std::unique_ptr<AlgorithmStage>> stages;
  PipelineProgress progress;
  PipelineSummary summary;
  int64_t next = 0;
  bool finished = false;
  Clock::time_point t0 = Clock::now();
};

namespace {

// The hooks of the pass that produces the next layer's inputs: they record
// the static-scale amax of the observed linears' inputs and outputs.
engine::ForwardHooks observe_hooks(const PipelineRequest& req, LayerResult& out) {
  engine::ForwardHooks hooks;
  const bool bf16 = req.bf16_activations;
  if (!req.observe_inputs.empty() || bf16)
    hooks.linear_input = [&req, &out, bf16](const engine::LinearSite& s, float* x, int64_t rows, int64_t cols) {
      if (bf16) round_to_bf16(x, rows * cols);
      if (req.observe_inputs.count(s.module)) record_amax(out.input_amax, s.module, observed_amax(s.module, "input", x, rows * cols));
    };
  if (!req.observe_outputs.empty() || bf16)
    hooks.linear_output = [&req, &out, bf16](const engine::LinearSite& s, float* y, int64_t rows, int64_t cols) {
      if (bf16) round_to_bf16(y, rows * cols);
      if (req.observe_outputs.count(s.module)) record_amax(out.output_amax, s.module, observed_amax(s.module, "output", y, rows * cols));
    };
  if (!req.observe_rotated_keys.empty())
    hooks.rotated_keys = [&req, &out](const engine::LinearSite& s, const float* k, int64_t rows, int64_t cols) {
      if (req.observe_rotated_keys.count(s.module)) record_amax(out.output_amax, s.module, observed_amax(s.module, "keys after RoPE", k, rows * cols));
    };
  if (!req.observe_probs.empty() || bf16) {
    // Called concurrently from the attention's tasks: one lock per call.
    auto mu = std::make_shared<std::mutex>();
    hooks.attention_probs = [&req, &out, bf16, mu](const engine::AttentionSite& s, float* p, int64_t rows,
                                                   int64_t cols) {
      if (bf16) round_to_bf16(p, rows * cols);
      if (!req.observe_probs.count(s.module)) return;
      const float a = observed_amax(s.module, "attention probabilities", p, rows * cols);
      std::lock_guard<std::mutex> lock(*mu);
      record_amax(out.probs_amax, s.module, a);
    };
  }
  return hooks;
}

class Session final : public LayerSession {
 public:
  Session(CalibrationPipeline::Impl& p, LayerResult& out) : p_(p), out_(out) {
    for (const engine::LayerLinear& l : p_.runner->linears()) {
      auto it = p_.req.weight_specs.find(l.name);
      if (it == p_.req.weight_specs.end()) continue;
      const auto in = p_.req.input_specs.find(l.name);
      pending_.push_back({l, it->second, quark_scale_dtype(it->second, p_.req.model_dtype),
                          in == p_.req.input_specs.end() ? std::nullopt : std::optional<QuantSpec>(in->second)});
    }
  }

  int64_t layer() const override { return p_.runner->loaded_layer(); }
  engine::LayerRunner& runner() override { return *p_.runner; }
  ThreadPool& pool() override { return p_.runner->pool(); }
  DType model_dtype() const override { return p_.req.model_dtype; }
  PipelineSummary& summary() override { return p_.summary; }
  void warn(const std::string& m) override { p_.summary.warnings.push_back(m); }
  std::vector<QuantTarget> pending() const override { return pending_; }

  // Which of the layer's stages is running (layer_io is for the last one).
  void set_stage(size_t i) { last_stage_ = i + 1 == p_.stages.size(); }
  std::vector<std::vector<float>>* layer_io() override { return last_stage_ && !written_ ? &p_.acts : nullptr; }

  // The float stream (pipeline.h): the float weights are snapshotted when
  // the first stage that wants the stream begins the layer.
  void begin_stage(const AlgorithmStage& st) {
    if (!st.wants_float_stream() || !float_weights_.empty()) return;
    for (const engine::LayerLinear& l : p_.runner->linears()) float_weights_.emplace(l.name, *l.weight);
  }
  const std::vector<std::vector<float>>& float_inputs() const override {
    require_float_stream();
    return p_.float_acts;
  }
  void with_float_weights(const std::function<void()>& fn) override {
    require_float_stream();
    if (float_weights_.empty())
      throw Error(ErrorKind::kInternal, "", "layer " + std::to_string(layer()),
                  "with_float_weights before a stage that wants the float stream began");
    struct Swap {
      Session& s;
      explicit Swap(Session& x) : s(x) { s.swap_float_weights(); }
      ~Swap() { s.swap_float_weights(); }
    } swap(*this);
    fn();
  }
  std::vector<std::vector<float>>* float_layer_io() override {
    return p_.float_stream && last_stage_ && !float_written_ ? &p_.float_acts : nullptr;
  }
  void float_outputs_written() override {
    if (!p_.float_stream || !last_stage_)
      throw Error(ErrorKind::kInternal, "", "layer " + std::to_string(layer()),
                  "float_outputs_written without the float stream or from a stage that is not the last");
    float_written_ = true;
  }
  // After the stages: the float layer's outputs become the next layer's
  // float inputs, unless a stage advanced them itself.
  void propagate_float() {
    if (!p_.float_stream || float_written_) return;
    with_float_weights([&] {
      for (size_t s = 0; s < p_.float_acts.size(); ++s)
        p_.runner->forward_layer(p_.float_acts[s].data(), p_.lengths[s], nullptr);
    });
  }
  engine::ForwardHooks propagation_hooks() override { return observe_hooks(p_.req, out_); }
  void outputs_written() override {
    if (!last_stage_ || !pending_.empty())
      throw Error(ErrorKind::kInternal, "", "layer " + std::to_string(layer()),
                  "outputs_written with linears still pending or from a stage that is not the last");
    written_ = true;
  }
  bool written() const { return written_; }
  bool quantized(const std::string& module) const override { return out_.weights.count(module) != 0; }

  void mark_modified(const std::string& tensor) override {
    const LayerTensorRef ref = find_layer_tensor(*p_.runner, tensor);
    if (ref.linear != nullptr && !ref.bias &&
        (quantized(ref.module) || std::any_of(pending_.begin(), pending_.end(), [&](const QuantTarget& t) {
           return t.linear.name == ref.module;
         })))
      throw Error(ErrorKind::kUsage, "", tensor,
                  "mark_modified on the weight of a quantized linear (its quantized form is exported)");
    const auto it = p_.req.tensor_dtypes.find(tensor);
    round_layer_tensor(ref, it == p_.req.tensor_dtypes.end() ? p_.req.model_dtype : it->second);
    modified_.insert(tensor);
  }

  // The final values of the modified tensors, into the layer's result.
  void collect_modified() {
    for (const std::string& t : modified_) out_.float_tensors[t] = layer_tensor_value(find_layer_tensor(*p_.runner, t));
  }

  void run(const engine::ForwardHooks& hooks, engine::LayerPart part) override {
    for (size_t s = 0; s < p_.acts.size(); ++s) run_sample(s, hooks, part);
  }

  size_t samples() const override { return p_.acts.size(); }

  void run_sample(size_t s, const engine::ForwardHooks& hooks, engine::LayerPart part) override {
    if (s >= p_.acts.size()) throw Error(ErrorKind::kInternal, "", "sample", "run_sample: no such sample");
    const int64_t T = p_.lengths[s];
    if (part == engine::LayerPart::kAttention || part == engine::LayerPart::kFeedForward) {
      p_.runner->forward_layer(p_.acts[s].data(), T, &hooks, part);  // leaves h unchanged: no copy
    } else {
      scratch_ = p_.acts[s];
      p_.runner->forward_layer(scratch_.data(), T, &hooks, part);
    }
  }

  std::vector<std::vector<float>> inputs() const override { return p_.acts; }

  void run_state(size_t s, std::vector<float>& state, const engine::ForwardHooks& hooks,
                 engine::LayerPart part) override {
    if (s >= p_.acts.size() || state.size() != p_.acts[s].size())
      throw Error(ErrorKind::kInternal, "", "states", "a state's size differs from its sample's");
    p_.runner->forward_layer(state.data(), p_.lengths[s], &hooks, part);
  }

  void run_on(std::vector<std::vector<float>>& states, const engine::ForwardHooks& hooks,
              engine::LayerPart part) override {
    if (states.size() != p_.acts.size())
      throw Error(ErrorKind::kInternal, "", "states", "run_on needs one state per calibration sample");
    for (size_t s = 0; s < states.size(); ++s) run_state(s, states[s], hooks, part);
  }

  void set_quantized(const std::string& module, QuantizedTensor qt, std::vector<float> dequantized) override {
    if (written_)
      throw Error(ErrorKind::kInternal, "", module, "set_quantized after the layer's outputs were written");
    auto it = std::find_if(pending_.begin(), pending_.end(),
                           [&](const QuantTarget& t) { return t.linear.name == module; });
    if (it == pending_.end())
      throw Error(ErrorKind::kUsage, "", module, "set_quantized on a linear that is not pending quantization");
    engine::LinearWeight& w = *it->linear.weight;
    if (dequantized.size() != static_cast<size_t>(w.out * w.in))
      throw Error(ErrorKind::kInternal, "", module, "dequantized weight has the wrong size");
    w.type = engine::WeightType::kF32;
    w.f32 = std::move(dequantized);
    std::vector<uint16_t>().swap(w.bf16);
    out_.weights[module] = std::move(qt);
    pending_.erase(it);
  }

  // Records the quantized weight of a layer that has already produced the
  // next layer's inputs: its float weight is freed instead of replaced by the
  // dequantized one (nothing runs the layer again).
  void record_final(const std::string& module, QuantizedTensor qt) {
    auto it = std::find_if(pending_.begin(), pending_.end(),
                           [&](const QuantTarget& t) { return t.linear.name == module; });
    if (it == pending_.end())
      throw Error(ErrorKind::kUsage, "", module, "record_final on a linear that is not pending quantization");
    engine::LinearWeight& w = *it->linear.weight;
    std::vector<float>().swap(w.f32);
    std::vector<uint16_t>().swap(w.bf16);
    out_.weights[module] = std::move(qt);
    pending_.erase(it);
  }

 private:
  CalibrationPipeline::Impl& p_;
  LayerResult& out_;
  void require_float_stream() const {
    if (!p_.float_stream)
      throw Error(ErrorKind::kUsage, "", "layer " + std::to_string(layer()),
                  "the float-model stream is carried only for stages that want it (wants_float_stream)");
  }
  void swap_float_weights() {
    for (auto& [name, w] : float_weights_) std::swap(p_.runner->linear(name), w);
  }

  std::vector<QuantTarget> pending_;
  std::set<std::string> modified_;
  std::map<std::string, engine::LinearWeight> float_weights_;  // swapped in by with_float_weights
  bool last_stage_ = false, written_ = false, float_written_ = false;
  std::vector<float> scratch_;
};

}  // namespace

CalibrationPipeline::CalibrationPipeline(PipelineRequest request, const CalibrationData& data,
                                         std::vector<std::unique_ptr<AlgorithmStage>> stages,
                                         PipelineProgress progress)
    : impl_(std::make_unique<Impl>()) {
  Impl& p = *impl_;
  p.req = std::move(request);
  p.stages = std::move(stages);
  p.progress = std::move(progress);
  if (data.samples.empty())
    throw Error(ErrorKind::kUsage, p.req.model_dir.string(), "--num_calib_data", "no calibration sample to run",
                "check --dataset / --num_calib_data");
  engine::LoadOptions lo;
  lo.threads = p.req.threads;
  p.runner = engine::LayerRunner::open(p.req.model_dir, lo, p.req.weights);
  for (const auto& s : data.samples) {
    if (s.empty()) continue;
    p.acts.push_back(p.runner->embed(s));
    p.lengths.push_back(static_cast<int64_t>(s.size()));
    p.summary.tokens += s.size();
    p.summary.activation_bytes += p.acts.back().size() * sizeof(float);
  }
  p.summary.samples = p.acts.size();
  p.float_stream = std::any_of(p.stages.begin(), p.stages.end(), [](const auto& st) { return st->wants_float_stream(); });
  if (p.float_stream) {
    p.float_acts = p.acts;
    p.summary.activation_bytes *= 2;
  }
  p.runner->release_embedding();  // vocab x hidden floats not needed past layer 0's inputs
  for (auto& st : p.stages) st->start(p.runner->config());
}

CalibrationPipeline::~CalibrationPipeline() = default;

int64_t CalibrationPipeline::num_layers() const { return impl_->runner->config().num_layers; }
int64_t CalibrationPipeline::next_layer() const { return impl_->next; }
const PipelineSummary& CalibrationPipeline::summary() const { return impl_->summary; }
const std::vector<std::unique_ptr<AlgorithmStage>>& CalibrationPipeline::stages() const { return impl_->stages; }

LayerResult CalibrationPipeline::run_layer(int64_t i) {
  Impl& p = *impl_;
  if (i != p.next || i >= num_layers())
    throw Error(ErrorKind::kUsage, "", "layer",
                "calibration runs layers in order: expected layer " + std::to_string(p.next) + ", got " +
                    std::to_string(i));
  const auto t_layer = Clock::now();
  LayerResult out;
  out.layer = i;
  p.runner->load_layer(i);
  // One pass over the samples produces the next layer's inputs and observes
  // the static activation / KV amax.
  auto observe_and_propagate = [&] {
    const engine::ForwardHooks hooks = observe_hooks(p.req, out);
    for (size_t s = 0; s < p.acts.size(); ++s) {
      p.runner->forward_layer(p.acts[s].data(), p.lengths[s], &hooks);
      if (p.req.bf16_activations) round_to_bf16(p.acts[s].data(), static_cast<int64_t>(p.acts[s].size()));
    }
  };
  // Without algorithm stages (round-to-nearest weights, static scales only)
  // the pass runs on the float layer, before quantization: Quark calibrates
  // static scales with its observers on and fake quantization off, i.e. on
  // the float model. With stages (GPTQ...) the quantized layer produces the
  // next layer's inputs, as sequential GPTQ does.
  const bool float_calibration = p.stages.empty();
  if (float_calibration) observe_and_propagate();
  bool propagated = float_calibration;
  {
    Session s(p, out);
    for (size_t k = 0; k < p.stages.size(); ++k) {
      s.set_stage(k);
      s.begin_stage(*p.stages[k]);
      p.stages[k]->process_layer(s);
    }
    propagated = propagated || s.written();
    // Round-to-nearest for every linear no stage claimed.
    for (const QuantTarget& t : s.pending()) {
      const engine::LinearWeight& w = *t.linear.weight;
      const std::vector<float> wf = w.values_f32();
      QuantizedTensor qt = quantize_weight(wf.data(), static_cast<uint64_t>(w.out), static_cast<uint64_t>(w.in),
                                           t.spec, t.scale_dtype, t.linear.name + ".weight", p.req.model_dtype,
                                           p.runner->pool().size());
      ++p.summary.rtn_linears;
      if (float_calibration) {
        s.record_final(t.linear.name, std::move(qt));
        continue;
      }
      std::vector<float> deq = dequantize(qt, p.runner->pool().size());
      s.set_quantized(t.linear.name, std::move(qt), std::move(deq));
    }
    s.collect_modified();
    s.propagate_float();
  }
  if (!propagated) {
    PhaseTimer t(p.summary, "pipeline.propagate");
    observe_and_propagate();
  }
  p.runner->unload();
  ++p.next;
  ++p.summary.layers;
  p.summary.layer_seconds.push_back(since(t_layer));
  p.summary.seconds = since(p.t0);
  if (p.progress) p.progress(static_cast<size_t>(p.next), static_cast<size_t>(num_layers()), p.summary.seconds);
  return out;
}

std::map<std::string, float> CalibrationPipeline::finish() {
  Impl& p = *impl_;
  if (p.next != num_layers() || p.finished)
    throw Error(ErrorKind::kUsage, "", "pipeline",
                p.finished ? "finish() was already called" : "finish() before the last layer ran");
  p.finished = true;
  std::map<std::string, float> amax;
  std::vector<std::string> heads;
  for (const auto& m : p.req.observe_inputs)
    if (m.find(".layers.") == std::string::npos) heads.push_back(m);
  if (!heads.empty()) {
    std::vector<float> normed;
    for (size_t s = 0; s < p.acts.size(); ++s) {
      normed.resize(p.acts[s].size());
      p.runner->final_norm(p.acts[s].data(), p.lengths[s], normed.data());
      const float a = observed_amax(heads.front(), "input", normed.data(), static_cast<int64_t>(normed.size()));
      for (const auto& m : heads) record_amax(amax, m, a);
    }
  }
  for (auto& st : p.stages) st->finish(p.summary);
  std::vector<std::vector<float>>().swap(p.acts);
  std::vector<std::vector<float>>().swap(p.float_acts);
  p.summary.seconds = since(p.t0);
  return amax;
}

}  // namespace qloom::quant
