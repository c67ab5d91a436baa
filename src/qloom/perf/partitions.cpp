#include "qloom/perf/partitions.h"

#include <algorithm>
#include <map>

#include "qloom/core/error.h"
#include "qloom/model/model_config.h"
#include "qloom/export/quark_exporter.h"
#include "qloom/quant/layer_selection.h"
#include "qloom/quant/scheme_registry.h"

namespace qloom::perf {
namespace {

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

std::string_view leaf_of(std::string_view module) {
  const size_t dot = module.rfind('.');
  return dot == std::string_view::npos ? module : module.substr(dot + 1);
}

bool is_mlp_leaf(std::string_view leaf) {
  static const char* const kLeaves[] = {"gate_proj", "up_proj", "down_proj", "gate_up_proj", "w1", "w2", "w3",
                                        "fc1", "fc2"};
  return std::any_of(std::begin(kLeaves), std::end(kLeaves), [&](const char* l) { return leaf == l; });
}

// Module order: by decoder layer, then by name.
bool module_less(const std::string& a, const std::string& b) {
  const int la = layer_of(a), lb = layer_of(b);
  return la != lb ? la < lb : a < b;
}

DType model_dtype_of(const io::ModelDir& dir, const std::vector<quant::LinearLayer>& linears) {
  if (auto d = exporter::config_model_dtype(dir.config())) return *d;
  for (const auto& l : linears) {
    const DType t = dir.weights().find(l.module + ".weight")->dtype;
    if (t == DType::kBF16 || t == DType::kF16 || t == DType::kF32) return t;
  }
  return DType::kBF16;
}

void fill_geometry(const io::ModelDir& dir, const PartitionPlan& plan, const std::vector<quant::LinearLayer>& linears,
                   ModelGeometry& g) {
  const model::ModelConfig c = model::ModelConfig::parse(dir.config(), (dir.path() / "config.json").string());
  g.model_type = c.model_type;
  g.model_dtype = model_dtype_of(dir, linears);
  g.num_layers = c.num_layers;
  g.hidden_size = c.hidden_size;
  g.num_kv_heads = c.num_kv_heads;
  g.head_dim = c.head_dim;
  g.vocab_size = c.vocab_size;
  g.sliding_window = c.sliding_window;
  g.layer_sliding = c.layer_sliding;
  g.tie_word_embeddings = c.tie_word_embeddings;
  const quant::ModelTemplate* t = quant::find_model_template(c.model_type);
  g.kv_layer_patterns = t && !t->kv_layers.empty() ? t->kv_layers : std::vector<std::string>{"*k_proj", "*v_proj"};

  std::map<std::string, bool> in_unit;
  for (const SearchUnit& u : plan.units)
    for (const UnitModule& m : u.modules) in_unit[m.module + ".weight"] = true;
  const io::WeightIndex& w = dir.weights();
  const bool lm_head_stored = w.find("lm_head.weight") != nullptr;
  for (const std::string& name : w.tensor_names()) {
    const io::TensorInfo* info = w.find(name);
    g.total_params += info->numel();
    if (in_unit.count(name)) continue;
    const bool embedding = info->shape.size() == 2 && contains(name, "embed");
    if (embedding && !(g.tie_word_embeddings && !lm_head_stored))
      g.fixed_bits_per_token += info->shape[1] * uint64_t(dtype_bits(info->dtype));  // one row looked up
    else
      g.fixed_bits_per_token += info->nbytes() * 8;
  }
}

}  // namespace

Granularity parse_granularity(std::string_view name, const std::string& flag) {
  if (name == "partition") return Granularity::kPartition;
  if (name == "layer") return Granularity::kLayer;
  throw Error(ErrorKind::kUsage, "", flag, "unknown granularity '" + std::string(name) + "'", "use partition or layer");
}

const char* granularity_name(Granularity g) { return g == Granularity::kLayer ? "layer" : "partition"; }

const std::vector<std::string>& partition_names() {
  static const std::vector<std::string> v = {"self_attn", "dense_mlp", "routed_moe", "shared_expert"};
  return v;
}

size_t partition_rank(std::string_view p) {
  const auto& names = partition_names();
  return size_t(std::find(names.begin(), names.end(), p) - names.begin());
}

int layer_of(std::string_view module) {
  const size_t at = module.find("layers.");
  if (at == std::string_view::npos || (at > 0 && module[at - 1] != '.')) return -1;
  size_t i = at + 7;
  int n = 0;
  bool digits = false;
  for (; i < module.size() && module[i] >= '0' && module[i] <= '9'; ++i) {
    n = n * 10 + (module[i] - '0');
    digits = true;
  }
  return digits && (i == module.size() || module[i] == '.') ? n : -1;
}

std::string classify_linear(std::string_view module) {
  if (layer_of(module) < 0) return {};
  if (contains(module, ".self_attn.")) return "self_attn";
  if (contains(module, ".shared_expert.") || contains(module, ".shared_experts.")) return "shared_expert";
  if (contains(module, ".experts.")) return "routed_moe";
  const bool mlp_block = contains(module, ".mlp.") || contains(module, ".block_sparse_moe.") ||
                         contains(module, ".feed_forward.");
  if (mlp_block && is_mlp_leaf(leaf_of(module))) return "dense_mlp";
  return {};
}

const SearchUnit* PartitionPlan::find_unit(std::string_view name) const {
  for (const SearchUnit& u : units)
    if (u.name == name) return &u;
  return nullptr;
}

std::vector<const SearchUnit*> PartitionPlan::units_of(std::string_view partition) const {
  std::vector<const SearchUnit*> out;
  for (const SearchUnit& u : units)
    if (u.partition == partition) out.push_back(&u);
  return out;
}

uint64_t PartitionPlan::partition_params(std::string_view partition) const {
  uint64_t n = 0;
  for (const SearchUnit* u : units_of(partition)) n += u->params;
  return n;
}

uint64_t PartitionPlan::unit_params() const {
  uint64_t n = 0;
  for (const SearchUnit& u : units) n += u.params;
  return n;
}

PartitionPlan plan_partitions(const io::ModelDir& dir, const PartitionRequest& req) {
  const io::WeightIndex& w = dir.weights();
  std::vector<std::pair<std::string, std::vector<uint64_t>>> shapes;
  for (const std::string& name : w.tensor_names()) shapes.emplace_back(name, w.find(name)->shape);
  std::vector<quant::LinearLayer> linears = quant::find_linear_layers(shapes);
  std::sort(linears.begin(), linears.end(),
            [](const quant::LinearLayer& a, const quant::LinearLayer& b) { return module_less(a.module, b.module); });
  // select_layers decides exclusions exactly as the exporter will (the scheme
  // named here is irrelevant: only the exclusion verdicts are used).
  quant::SelectionRequest sel_req;
  sel_req.model_type = dir.model_type();
  sel_req.quant_scheme = "fp8";
  sel_req.exclude_layers = req.exclude_layers;
  const quant::Selection sel = quant::select_layers(linears, sel_req);

  PartitionPlan plan;
  plan.granularity = req.granularity;
  plan.exclude_patterns = sel.exclude;
  for (const std::string& warn : sel.warnings)
    if (warn.rfind("--exclude_layers", 0) == 0) plan.warnings.push_back("--exclude-layers" + warn.substr(16));
  std::map<std::pair<int, size_t>, SearchUnit> units;  // (layer or -1, partition rank)
  for (const quant::LayerChoice& c : sel.layers) {
    const std::string part = classify_linear(c.module);
    if (!c.spec || part.empty()) {
      plan.native.push_back({c.module, c.shape[0], c.shape[1], c.spec ? "no partition (e.g. a router)" : c.reason});
      continue;
    }
    const int layer = req.granularity == Granularity::kLayer ? layer_of(c.module) : -1;
    SearchUnit& u = units[{layer, partition_rank(part)}];
    u.partition = part;
    u.layer = layer;
    u.name = layer < 0 ? part : "layers." + std::to_string(layer) + "." + part;
    u.modules.push_back({c.module, c.shape[0], c.shape[1], w.find(c.module + ".weight")->dtype});
    u.params += c.shape[0] * c.shape[1];
  }
  if (units.empty())
    throw Error(ErrorKind::kUsage, dir.path().string(), "--exclude-layers",
                "no linear layer of the model is left to search (all are excluded or belong to no partition)",
                "relax --exclude-layers");
  for (auto& [key, u] : units) plan.units.push_back(std::move(u));
  for (const std::string& p : partition_names())
    if (!plan.units_of(p).empty()) plan.partitions.push_back(p);
  fill_geometry(dir, plan, linears, plan.geometry);
  return plan;
}

nlohmann::ordered_json to_json(const PartitionPlan& plan) {
  nlohmann::ordered_json j;
  j["granularity"] = granularity_name(plan.granularity);
  j["partitions"] = nlohmann::ordered_json::array();
  for (const std::string& p : plan.partitions) {
    size_t modules = 0;
    for (const SearchUnit* u : plan.units_of(p)) modules += u->modules.size();
    j["partitions"].push_back({{"name", p},
                               {"params", plan.partition_params(p)},
                               {"units", plan.units_of(p).size()},
                               {"modules", modules}});
  }
  j["units"] = nlohmann::ordered_json::array();
  for (const SearchUnit& u : plan.units) {
    nlohmann::ordered_json mods = nlohmann::ordered_json::array();
    for (const UnitModule& m : u.modules) mods.push_back(m.module);
    j["units"].push_back({{"name", u.name},
                          {"partition", u.partition},
                          {"layer", u.layer < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(u.layer)},
                          {"params", u.params},
                          {"modules", std::move(mods)}});
  }
  j["native"] = nlohmann::ordered_json::array();
  for (const NativeLinear& n : plan.native) j["native"].push_back({{"module", n.module}, {"reason", n.reason}});
  j["exclude_patterns"] = plan.exclude_patterns;
  j["warnings"] = plan.warnings;
  return j;
}

}  // namespace qloom::perf
