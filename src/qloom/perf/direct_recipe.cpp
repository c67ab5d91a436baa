// The direct_ptq path: one fixed recipe (--quant-strategy, free text) runs
// the agent's path — intent parser, plan, manifest, the quantize job, export
// and validation (qloom run with evaluation skipped; perf's own gate judges
// accuracy next) — writing the checkpoint straight into <session>/quant_ckpt.
// The agent's workspace is <session>/agent/invocation-N (its assessment.json,
// plan and manifest stay there as evidence).
#include "qloom/agent/workflow.h"
#include "qloom/core/error.h"
#include "qloom/perf/session_ctx.h"

namespace qloom::perf {
namespace fs = std::filesystem;

namespace {

std::string recipe_prompt(const RunSpec& spec, const fs::path& out) {
  // The calibration settings in the words the intent parser reads.
  return "quantize " + spec.model + " with " + spec.quant_strategy + ", calibrate on " +
         std::to_string(spec.num_calib_data) + " samples with sequence length " + std::to_string(spec.calib_seqlen) +
         (spec.calib_dataset.empty() ? "" : " from " + spec.calib_dataset) + ", skip evaluation, write it to " +
         out.string();
}

nlohmann::ordered_json recipe_record(const RunSpec& spec, const std::string& prompt, const fs::path& workspace,
                                     const agent::RunResult& r) {
  nlohmann::ordered_json j;
  j["strategy"] = spec.quant_strategy;
  j["agent_prompt"] = prompt;
  j["agent_workspace"] = workspace.string();
  j["verdict"] = r.verdict;
  j["outcome_id"] = r.outcome_id.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.outcome_id);
  const auto& a = r.assessment;
  if (a.is_object() && a.contains("model"))
    for (const char* key : {"quant_scheme", "kv_cache_dtype", "quant_algo", "bits_per_weight", "layers_quantized",
                            "layers_excluded"})
      if (a["model"].contains(key)) j[key] = a["model"][key];
  if (a.is_object() && a.contains("validation")) j["validation_passed"] = a["validation"].value("passed", false);
  j["status"] = (r.verdict == "success" || r.verdict == "success_unverified") ? "exported" : "failed";
  return j;
}

}  // namespace

void direct_recipe_step(SessionCtx& ctx) {
  auto& s = ctx.st();
  const fs::path ckpt = ctx.dir() / "quant_ckpt";
  if (s["fixed_recipe"].is_object() && s["fixed_recipe"].value("status", "") == "exported" && fs::is_directory(ckpt))
    return;
  ctx.set_stage("quantize", "fixed recipe '" + ctx.spec.quant_strategy + "' through the agent");
  ctx.timed("quantize", [&] {
    // A checkpoint the state does not record (a kill between the agent's
    // rename and the state save) is redone, not trusted.
    std::error_code ec;
    fs::remove_all(ckpt, ec);
    const fs::path ws = ctx.dir() / "agent" / ("invocation-" + std::to_string(s.value("invocations", 1)));
    fs::remove_all(ws, ec);
    agent::RunOptions ro;
    ro.workspace = ws;
    ro.interactive = agent::Interactive::kOff;
    ro.threads = ctx.spec.threads;
    ro.log = ctx.log;
    const std::string prompt = recipe_prompt(ctx.spec, ckpt);
    agent::RunResult r = agent::quantize_via_prompt(prompt, ro);
    s["fixed_recipe"] = recipe_record(ctx.spec, prompt, ws, r);
    if (s["fixed_recipe"]["status"] == "exported" && fs::is_directory(ckpt)) {
      s["quant_ckpt_dir"] = ckpt.string();
      s["best_candidate"] = {{"config", {{"recipe", ctx.spec.quant_strategy}}}, {"rank", 1}};
    }
    ctx.store.save();
  });
  if (s["fixed_recipe"]["status"] != "exported" || !fs::is_directory(ckpt))
    ctx.terminate("failed", "accuracy_failed",
                  "the agent could not produce the fixed recipe's checkpoint (verdict " +
                      s["fixed_recipe"]["verdict"].get<std::string>() + ", outcome " +
                      s["fixed_recipe"]["outcome_id"].dump() + "; see " +
                      s["fixed_recipe"]["agent_workspace"].get<std::string>() + "/blocked.md)");
}

}  // namespace qloom::perf
