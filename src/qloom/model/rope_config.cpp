#include "qloom/model/rope_config.h"

#include <optional>
#include <string>
#include <vector>

#include "qloom/core/error.h"

namespace qloom::model {
namespace {

using nlohmann::json;

struct DictContext {
  const Architecture& arch;
  double theta;                       // from the top level (or the architecture's default)
  std::optional<double> partial;      // top-level partial_rotary_factor
  int64_t max_position_embeddings;
};

// One rope dict (a rope_scaling object, rope_parameters, or one of its layer
// type entries) -> Rope; `partial` receives its partial_rotary_factor.
ModelConfig::Rope parse_dict(const ConfigReader& d, const DictContext& ctx, std::optional<double>& partial) {
  ModelConfig::Rope rope;
  const std::string rt = d.string("rope_type", ""), legacy = d.string("type", "");
  if (!rt.empty() && !legacy.empty() && rt != legacy)
    d.bad("rope_type", "is \"" + rt + "\" but \"type\" says \"" + legacy + "\"");
  std::string type = !rt.empty() ? rt : (!legacy.empty() ? legacy : "default");
  const char* type_key = !rt.empty() || legacy.empty() ? "rope_type" : "type";
  if (ctx.arch.model_type == "phi3" && (type == "su" || type == "yarn")) type = "longrope";  // phi3's aliases
  std::vector<std::string> keys = {"rope_type", "type", "rope_theta", "partial_rotary_factor"};
  if (type == "default") {
    keys.push_back("factor");  // unused by transformers here; accepted only as 1
    if (d.number("factor", 1.0) != 1.0) d.unsupported("factor", "is set for rope type \"default\", which has no factor");
  } else if (type == "linear") {
    keys.push_back("factor");
    rope.factor = d.number("factor", 0.0);
    if (!d.has("factor")) d.bad("factor", "is missing (rope type \"linear\" needs it)");
    if (!(rope.factor > 0)) d.bad("factor", "must be positive");
  } else if (type == "llama3") {
    for (const char* k : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
      keys.emplace_back(k);
    for (const char* k : {"factor", "low_freq_factor", "high_freq_factor"})
      if (!d.has(k)) d.bad(k, "is missing (rope type \"llama3\" needs it)");
    rope.factor = d.number("factor", 0.0);
    rope.low_freq_factor = d.number("low_freq_factor", 0.0);
    rope.high_freq_factor = d.number("high_freq_factor", 0.0);
    const int64_t omp = ctx.max_position_embeddings > 0 ? ctx.max_position_embeddings : 0;
    rope.original_max_position_embeddings = d.positive("original_max_position_embeddings", omp, omp == 0);
    if (!(rope.factor > 0) || !(rope.high_freq_factor > rope.low_freq_factor) || !(rope.low_freq_factor > 0))
      d.bad("factor", "llama3 RoPE needs factor > 0 and high_freq_factor > low_freq_factor > 0");
  } else {
    d.unsupported(type_key, "= \"" + type + "\": this RoPE type is not implemented by qloom's engine "
                  "(supported: default, linear, llama3)",
                  "use a checkpoint without this RoPE scaling, or a weight-only RTN scheme (qloom's engine "
                  "would need a change)");
  }
  rope.type = type;
  for (auto it = d.j.begin(); it != d.j.end(); ++it) {
    bool known = false;
    for (const std::string& k : keys) known = known || k == it.key();
    if (!known) d.unsupported(it.key().c_str(), "is not a parameter of rope type \"" + type + "\" known to qloom");
  }
  rope.theta = d.number("rope_theta", ctx.theta);
  if (!(rope.theta > 0)) d.bad("rope_theta", "must be positive");
  if (d.has("partial_rotary_factor")) partial = d.number("partial_rotary_factor", 1.0);
  return rope;
}

void agree(const ConfigReader& r, const char* top, const std::string& nested, double a, double b) {
  if (a != b)
    r.bad(top, "= " + std::to_string(a) + " disagrees with " + nested + " = " + std::to_string(b) +
                   " (transformers 4.x and 5.x would read different values)");
}

}  // namespace

RopeConfig parse_rope_config(const ConfigReader& r, const Architecture& a, int64_t max_pos) {
  DictContext ctx{a, r.number("rope_theta", a.default_rope_theta), std::nullopt, max_pos};
  if (r.has("partial_rotary_factor")) ctx.partial = r.number("partial_rotary_factor", 1.0);
  RopeConfig out;
  std::optional<double> partial;  // from the dict(s)
  const json* params = r.get("rope_parameters");
  const json* scaling = r.get("rope_scaling");
  if (params && scaling && *params != *scaling)
    r.bad("rope_scaling", "and rope_parameters are both set and differ; keep one");
  if (params && !params->is_object()) r.bad("rope_parameters", "must be an object or null");
  if (scaling && !scaling->is_object()) r.bad("rope_scaling", "must be an object or null");
  const bool nested = params && (params->contains("full_attention") || params->contains("sliding_attention"));
  if (nested) {
    const std::string base = r.path + "rope_parameters.";
    for (auto it = params->begin(); it != params->end(); ++it)
      if (it.key() != "full_attention" && it.key() != "sliding_attention")
        r.bad("rope_parameters", "mixes per layer-type entries with \"" + it.key() + "\"");
    auto layer = [&](const char* type, double theta, ModelConfig::Rope& dst, bool required) {
      const json* e = params->contains(type) && !(*params)[type].is_null() ? &(*params)[type] : nullptr;
      if (!e) {
        if (required) r.bad("rope_parameters", std::string("has no \"") + type + "\" entry");
        dst = ModelConfig::Rope{};
        dst.theta = theta;
        return;
      }
      if (!e->is_object()) r.bad("rope_parameters", std::string("entry \"") + type + "\" must be an object");
      DictContext c = ctx;
      c.theta = theta;
      std::optional<double> p;
      dst = parse_dict(ConfigReader{*e, r.source, base + type + "."}, c, p);
      if (p && partial && *p != *partial) r.unsupported("rope_parameters", "gives layer types different partial_rotary_factor");
      if (p) partial = p;
    };
    const double local_theta = r.number("rope_local_base_freq", a.local_rope ? 10000.0 : ctx.theta);
    layer("full_attention", ctx.theta, out.global, !a.local_rope);
    layer("sliding_attention", local_theta, out.local, false);
    if (!params->contains("sliding_attention") && !a.local_rope) out.local = out.global;
    if (r.has("rope_theta")) agree(r, "rope_theta", "rope_parameters.full_attention.rope_theta", ctx.theta, out.global.theta);
    if (r.has("rope_local_base_freq"))
      agree(r, "rope_local_base_freq", "rope_parameters.sliding_attention.rope_theta", local_theta, out.local.theta);
  } else {
    if (params && a.local_rope)
      r.bad("rope_parameters", "must give \"full_attention\" and \"sliding_attention\" entries for gemma3_text");
    const json* dict = params ? params : scaling;
    const char* key = params ? "rope_parameters" : "rope_scaling";
    if (dict) out.global = parse_dict(ConfigReader{*dict, r.source, r.path + key + "."}, ctx, partial);
    else out.global.theta = ctx.theta;
    if (params && r.has("rope_theta")) agree(r, "rope_theta", "rope_parameters.rope_theta", ctx.theta, out.global.theta);
    out.local = out.global;
    if (a.local_rope) {  // 4.x gemma3_text: sliding layers use default RoPE at rope_local_base_freq
      out.local = ModelConfig::Rope{};
      out.local.theta = r.number("rope_local_base_freq", 10000.0);
    }
  }
  if (partial && ctx.partial) agree(r, "partial_rotary_factor", "rope_parameters.partial_rotary_factor", *ctx.partial, *partial);
  const std::optional<double> pf = partial ? partial : ctx.partial;
  if (pf && a.model_type != "phi3" && *pf != 1.0)
    r.unsupported("partial_rotary_factor", "is " + std::to_string(*pf) + "; qloom reads it for phi3 only");
  out.partial_rotary_factor = pf.value_or(1.0);
  return out;
}

}  // namespace qloom::model
