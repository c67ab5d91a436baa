// The attempt's intake phase: the model named by the intent is found (a hub
// id, a local directory, a .gguf file) and analysed from its config alone
// (model_analysis.json, checkpoint 1). See attempt_runner.h.
#include <string>
#include <system_error>

#include "qloom/agent/attempt_runner.h"
#include "qloom/agent/environment.h"
#include "qloom/agent/model_analysis.h"
#include "qloom/agent/outcomes.h"
#include "qloom/io/hub.h"
#include "qloom/io/hub_error.h"
#include "qloom/io/model_dir.h"
#include "qloom/model/gguf_convert.h"

namespace qloom::agent::detail {
namespace fs = std::filesystem;

namespace {

// Size fields of config.json against the safetensors headers present
// (io/config_sizes.h; headers only, never tensor data), before the analysis
// derives layers from them: a config claiming more layers than the weights
// hold cannot be loaded, whatever the plan.
void check_sizes_against_weights(const fs::path& dir) {
  try {
    const io::ModelDir d = io::ModelDir::open(dir);
    if (!d.weight_files().empty()) (void)d.weights();
  } catch (const Error& e) {
    // Only the size check's own error (io/config_sizes.h: "config.json <field> = ...").
    if (e.kind() == ErrorKind::kInvalidInput && e.message().rfind("config.json ", 0) == 0)
      throw StopAttempt{"exec_model_load_failed", "the model's config.json does not match its weights: " + e.message(), {}};
    // Other problems with the weights are found (and classified) where they are read.
  }
}

}  // namespace

void AttemptRunner::phase_intake() {
  enter("intake");
  for (const auto& q : intent_.open_questions)
    if (q.field == "model") ask_open_question(q.field, q.question, "intake");
  const std::string spec = intent_.model.value;
  if (spec.empty()) ask_open_question("model", "Which model should I quantize (a Hugging Face id or a local directory)?", "intake");
  if (intent_.model_kind == "hub") {
    try {
      io::HubResolveOptions ho;
      ho.fetch = io::HubFetch::kConfigOnly;
      ho.log = &log_;
      ho.log_is_tty = opts_.log_is_tty;
      config_dir_ = io::resolve_model_path(spec, ho);
    } catch (const io::HubError& e) {
      const auto& o = outcome_for_hub_failure(e.failure(), "intake");
      throw StopAttempt{std::string(o.id), error_text(e), {}};
    } catch (const Error& e) {  // an id that reads as a missing local path ("no such directory")
      throw StopAttempt{"model_path_unreachable", error_text(e), {}};
    }
    model_source_ = "hub";
    model_arg_ = spec;
  } else {
    fs::path p = intent_.model_path.empty() ? fs::path(spec) : fs::path(intent_.model_path);
    p = fs::absolute(p).lexically_normal();
    std::error_code ec;
    if (model::is_gguf_file(p)) {
      intake_gguf(p);
      return;
    }
    if (!fs::is_directory(p, ec))
      throw StopAttempt{"model_path_unreachable", p.string() + " is not a readable directory", {}};
    if (!fs::exists(p / "config.json", ec))
      throw StopAttempt{"model_path_unreachable", (p / "config.json").string() + " does not exist", {}};
    config_dir_ = p;
    source_dir_ = p;
    model_source_ = intent_.model_kind == "demo" ? "demo" : "local";
    model_arg_ = p.string();
  }
  report_.source_dir = model_source_ == "hub" ? spec : source_dir_.string();
  finish_intake([&] { return analyze_model(spec, config_dir_, environment_); });
}

// A .gguf file: the analysis reads its metadata only (config.json built in
// memory); exec converts it once into the GGUF cache and quantizes that.
void AttemptRunner::intake_gguf(const fs::path& p) {
  const std::string spec = intent_.model.value;
  gguf_path_ = p;
  config_dir_ = p;
  source_dir_ = p.parent_path();  // the directory qloom must not write into
  model_source_ = "local";
  model_arg_ = p.string();
  report_.source_dir = p.string();
  finish_intake([&] {
    return analyze_config(model::gguf_config_json(p), p.string(), spec, "local", p.string(), environment_);
  });
}

template <class Analyze>
void AttemptRunner::finish_intake(Analyze analyze) {
  if (environment_.is_null()) environment_ = collect_environment_json();
  check_sizes_against_weights(config_dir_);
  for (int tries = 0;; ++tries) {
    try {
      analysis_ = analyze();
    } catch (const Error& e) {
      throw StopAttempt{"model_path_unreachable", "intake cannot read the model's config: " + error_text(e), {}};
    }
    ws_.write_json("model_analysis.json", analysis_, "model_analysis");
    try {
      analysis_ = ws_.read_json("model_analysis.json", "model_analysis");
      break;
    } catch (const Error& e) {
      if (tries >= 1) throw StopAttempt{"analysis_artifact_invalid_or_missing", error_text(e), {}};
      recovered("analysis_artifact_invalid_or_missing", "model_analysis.json did not read back; intake re-run");
    }
  }
  const Answer a = run_checkpoint(cio_, "intake", "model analysis", render_analysis_summary(analysis_),
                                  "Is this model analysis correct?");
  decide("intake", a);
  check_intake_compatibility();
}

// An analysis that says "unsupported" asks for another model (or a fix).
void AttemptRunner::check_intake_compatibility() {
  if (analysis_.value("compatibility", "") != "unsupported") return;
  std::string why;
  if (analysis_.contains("risks"))
    for (const auto& r : analysis_["risks"])
      if (r.value("severity", "") == "high") why += " " + r.value("message", r.value("id", "")) + ";";
  ask_open_question("model", "The model cannot be quantized as it is:" + why +
                                 " Which model (or which fix) should I use instead?",
                    "intake");
}

}  // namespace qloom::agent::detail
