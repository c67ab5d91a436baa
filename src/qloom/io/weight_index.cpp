#include "qloom/io/weight_index.h"

#include <algorithm>
#include <map>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "qloom/core/strings.h"
#include "qloom/core/error.h"
#include "qloom/io/json_read.h"

namespace qloom::io {
namespace fs = std::filesystem;

namespace {

constexpr const char* kMismatchRemedy =
    "the index and the shards do not match; re-download the model's safetensors files and "
    "index together";

// True when `p` lies strictly below `root` (both absolute, canonical).
bool is_within(const fs::path& root, const fs::path& p) {
  auto r = root.begin();
  auto q = p.begin();
  for (; r != root.end(); ++r, ++q) {
    if (q == p.end() || *r != *q) return false;
  }
  return q != p.end();
}

// Where a weight file may resolve to: the model directory and, for a
// HuggingFace cache snapshot (<repo>/snapshots/<rev>/), the repo's blobs/.
std::vector<fs::path> allowed_roots(const fs::path& canon_dir) {
  std::vector<fs::path> roots{canon_dir};
  const fs::path parent = canon_dir.parent_path();
  if (parent.filename() == "snapshots") {
    std::error_code ec;
    const fs::path blobs = parent.parent_path() / "blobs";
    if (fs::is_directory(blobs, ec)) {
      const fs::path cb = fs::canonical(blobs, ec);
      if (!ec) roots.push_back(cb);
    }
  }
  return roots;
}

// Validates one weight file name (as written in the index, or found on disk)
// and returns its full path. `referrer` is the file that names it (the index),
// or the model directory itself.
fs::path resolve_weight_file(const fs::path& dir, const fs::path& canon_dir,
                             const std::string& name, const std::string& referrer,
                             const std::string& tensor) {
  const std::string item = tensor.empty() ? name : tensor;
  if (name.empty())
    throw_invalid(referrer, item, "shard file name is empty", kMismatchRemedy);
  if (name.find('\0') != std::string::npos)
    throw_invalid(referrer, item, "shard file name contains a NUL character", kMismatchRemedy);
  const fs::path rel(name);
  if (rel.is_absolute() || rel.has_root_directory() || rel.has_root_name())
    throw_invalid(referrer, item,
                  "shard \"" + name + "\" is an absolute path; shards must be named relative "
                  "to the model directory",
                  "fix the index so it names files inside the model directory");
  for (const auto& part : rel) {
    if (part == "..")
      throw_invalid(referrer, item,
                    "shard \"" + name + "\" has a \"..\" component and would leave the model "
                    "directory",
                    "fix the index so it names files inside the model directory");
    if (part.empty())
      throw_invalid(referrer, item, "shard \"" + name + "\" is not a file name",
                    kMismatchRemedy);
  }

  const fs::path full = dir / rel;
  std::error_code ec;
  const auto lst = fs::symlink_status(full, ec);
  if (ec || !fs::exists(lst) || !fs::exists(fs::status(full, ec)))
    throw_not_found(referrer, item,
                    "shard \"" + name + "\" does not exist in " + dir.string() +
                        (fs::is_symlink(lst) ? " (it is a dangling symlink)" : ""),
                    "re-download the missing shard \"" + name + "\"");
  const fs::path canon = fs::canonical(full, ec);
  if (ec) throw_errno(ec.value(), full.string(), "resolving the path", /*writing=*/false);
  bool inside = false;
  for (const auto& root : allowed_roots(canon_dir)) inside = inside || is_within(root, canon);
  if (!inside)
    throw_invalid(referrer, item,
                  "shard \"" + name + "\" resolves to " + canon.string() +
                      ", outside the model directory",
                  "copy the shard into the model directory instead of linking to it");
  if (!fs::is_regular_file(fs::status(canon, ec)))
    throw_invalid(referrer, item, "shard \"" + name + "\" is not a regular file",
                  kMismatchRemedy);
  return full;
}

}  // namespace

struct WeightIndex::Impl {
  fs::path dir;
  bool sharded = false;
  nlohmann::json index_metadata;  // null unless sharded with "metadata"
  std::vector<std::string> shard_names;
  std::vector<SafetensorsFile> shards;
  struct Loc {
    size_t shard;
    const TensorInfo* info;
  };
  std::unordered_map<std::string, Loc, TransparentStringHash, std::equal_to<>> by_name;
  uint64_t total_bytes = 0;
  uint64_t size_on_disk = 0;
};

WeightIndex::WeightIndex(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WeightIndex::WeightIndex(WeightIndex&&) noexcept = default;
WeightIndex& WeightIndex::operator=(WeightIndex&&) noexcept = default;
WeightIndex::~WeightIndex() = default;

WeightIndex WeightIndex::open(const fs::path& model_dir) {
  auto impl = std::make_unique<Impl>();
  impl->dir = model_dir;
  const std::string dir_label = model_dir.string();

  std::error_code ec;
  const auto dst = fs::status(model_dir, ec);
  if (!fs::exists(dst))
    throw_not_found(dir_label, "", "model directory does not exist", "check the path");
  if (!fs::is_directory(dst))
    throw_invalid(dir_label, "", "is not a directory",
                  "pass the model directory (the one holding config.json and the weights)");
  const fs::path canon_dir = fs::canonical(model_dir, ec);
  if (ec) throw_errno(ec.value(), dir_label, "resolving the path", false);

  const fs::path index_path = model_dir / kSafetensorsIndexName;
  const std::string index_label = index_path.string();
  std::map<std::string, std::string> weight_map;  // tensor -> shard name

  if (fs::exists(fs::symlink_status(index_path, ec))) {
    impl->sharded = true;
    JsonReadOptions opts;
    opts.reject_duplicate_keys = true;
    opts.remedy = "the index is corrupt; re-download model.safetensors.index.json";
    const nlohmann::json idx = read_json_file(index_path, opts);
    if (!idx.is_object())
      throw_invalid(index_label, "", "the index must be a JSON object", opts.remedy);
    const auto wm = idx.find("weight_map");
    if (wm == idx.end())
      throw_invalid(index_label, "weight_map", "the index has no \"weight_map\"", opts.remedy);
    if (!wm->is_object())
      throw_invalid(index_label, "weight_map",
                    "\"weight_map\" must be an object mapping tensor names to shard files",
                    opts.remedy);
    if (wm->empty())
      throw_invalid(index_label, "weight_map", "\"weight_map\" lists no tensors", opts.remedy);
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it.value().is_string())
        throw_invalid(index_label, it.key(),
                      "the weight_map entry must be a shard file name (a string)", opts.remedy);
      weight_map.emplace(it.key(), it.value().get<std::string>());
    }
    const auto md = idx.find("metadata");
    if (md != idx.end() && !md->is_null()) {
      if (!md->is_object())
        throw_invalid(index_label, "metadata", "\"metadata\" must be an object", opts.remedy);
      impl->index_metadata = *md;
    }
    // Validate every distinct shard name once, naming a tensor that uses it.
    std::map<std::string, std::string> first_user;
    for (const auto& [tensor, shard] : weight_map) first_user.emplace(shard, tensor);
    for (const auto& [shard, tensor] : first_user) {
      resolve_weight_file(model_dir, canon_dir, shard, index_label, tensor);
      impl->shard_names.push_back(shard);
    }
  } else {
    std::string chosen;
    if (fs::exists(fs::symlink_status(model_dir / kSafetensorsSingleName, ec))) {
      chosen = kSafetensorsSingleName;
    } else {
      std::vector<std::string> found, pickles;
      fs::directory_iterator it(model_dir, ec);
      if (ec) throw_errno(ec.value(), dir_label, "listing the directory", false);
      for (const auto& e : it) {
        const std::string fname = e.path().filename().string();
        std::error_code ec2;
        if (!e.is_regular_file(ec2)) continue;
        auto ends_with = [&](std::string_view suf) {
          return fname.size() >= suf.size() &&
                 fname.compare(fname.size() - suf.size(), suf.size(), suf) == 0;
        };
        if (ends_with(".safetensors")) found.push_back(fname);
        else if (ends_with(".bin") || ends_with(".pt") || ends_with(".pth") || ends_with(".ckpt"))
          pickles.push_back(fname);
      }
      std::sort(found.begin(), found.end());
      std::sort(pickles.begin(), pickles.end());
      if (found.empty()) {
        std::string msg = "the directory holds no *.safetensors weights";
        if (!pickles.empty()) {
          msg += " (it has pickle checkpoints:";
          for (const auto& p : pickles) msg += " " + p;
          msg += ")";
        }
        throw_not_found(dir_label, "", msg,
                        "qloom reads safetensors weights only and never loads pickle "
                        "checkpoints (*.bin, *.pt); download the model's safetensors version");
      }
      if (found.size() > 1) {
        std::string msg = "found " + std::to_string(found.size()) + " *.safetensors files (";
        for (size_t i = 0; i < found.size(); ++i) msg += (i ? ", " : "") + found[i];
        msg += ") but no " + std::string(kSafetensorsIndexName) + " saying which to use";
        throw_invalid(dir_label, "", msg,
                      "add the model's index file, or keep only one *.safetensors file");
      }
      chosen = found.front();
    }
    resolve_weight_file(model_dir, canon_dir, chosen, dir_label, "");
    impl->shard_names.push_back(chosen);
  }

  // Open (and validate) every shard.
  impl->shards.reserve(impl->shard_names.size());
  for (const auto& name : impl->shard_names) {
    impl->shards.push_back(SafetensorsFile::open(model_dir / name));
    impl->size_on_disk += impl->shards.back().file_size();
  }
  std::unordered_map<std::string, size_t> shard_pos;
  for (size_t i = 0; i < impl->shard_names.size(); ++i) shard_pos.emplace(impl->shard_names[i], i);

  if (impl->sharded) {
    for (const auto& [tensor, shard] : weight_map) {
      const size_t s = shard_pos.at(shard);
      if (impl->shards[s].find(tensor) == nullptr)
        throw_invalid(index_label, tensor,
                      "the index places this tensor in \"" + shard +
                          "\" but that shard does not contain it",
                      kMismatchRemedy);
    }
    for (size_t s = 0; s < impl->shards.size(); ++s) {
      for (const auto& t : impl->shards[s].tensors()) {
        const auto it = weight_map.find(t.name);
        if (it == weight_map.end())
          throw_invalid(index_label, t.name,
                        "shard \"" + impl->shard_names[s] +
                            "\" holds this tensor but the index does not list it",
                        kMismatchRemedy);
        if (it->second != impl->shard_names[s])
          throw_invalid(index_label, t.name,
                        "tensor is stored in two shards, \"" + it->second + "\" (per the index) "
                        "and \"" + impl->shard_names[s] + "\"; a tensor must be stored once",
                        kMismatchRemedy);
      }
    }
  }

  for (size_t s = 0; s < impl->shards.size(); ++s) {
    for (const auto& t : impl->shards[s].tensors()) {
      impl->by_name.emplace(t.name, Impl::Loc{s, &t});
      impl->total_bytes += t.nbytes();
    }
  }
  return WeightIndex(std::move(impl));
}

const std::vector<std::string>& WeightIndex::shard_files() const { return impl_->shard_names; }
size_t WeightIndex::num_shards() const { return impl_->shards.size(); }
const SafetensorsFile& WeightIndex::shard(size_t i) const {
  if (i >= impl_->shards.size())
    throw Error(ErrorKind::kUsage, impl_->dir.string(), "",
                "shard index " + std::to_string(i) + " out of range (" +
                    std::to_string(impl_->shards.size()) + " shards)");
  return impl_->shards[i];
}

std::vector<std::string> WeightIndex::tensor_names() const {
  std::vector<std::string> names;
  names.reserve(impl_->by_name.size());
  for (const auto& [n, loc] : impl_->by_name) names.push_back(n);
  std::sort(names.begin(), names.end());
  return names;
}
size_t WeightIndex::num_tensors() const { return impl_->by_name.size(); }

const TensorInfo* WeightIndex::find(std::string_view name) const {
  const auto it = impl_->by_name.find(name);
  return it == impl_->by_name.end() ? nullptr : it->second.info;
}

std::optional<size_t> WeightIndex::shard_of(std::string_view name) const {
  const auto it = impl_->by_name.find(name);
  if (it == impl_->by_name.end()) return std::nullopt;
  return it->second.shard;
}

TensorView WeightIndex::view(std::string_view name) const {
  const auto it = impl_->by_name.find(name);
  if (it == impl_->by_name.end())
    throw_not_found(impl_->dir.string(), std::string(name),
                    "the model has no tensor of this name",
                    "check the tensor name (qloom inspect lists them)");
  return impl_->shards[it->second.shard].view(*it->second.info);
}

uint64_t WeightIndex::total_bytes() const { return impl_->total_bytes; }
uint64_t WeightIndex::size_on_disk() const { return impl_->size_on_disk; }
bool WeightIndex::is_sharded() const { return impl_->sharded; }
const fs::path& WeightIndex::dir() const { return impl_->dir; }
const nlohmann::json& WeightIndex::index_metadata() const { return impl_->index_metadata; }

void WeightIndex::release(std::string_view name) const {
  const std::optional<size_t> i = shard_of(name);
  if (!i) return;
  const SafetensorsFile& f = shard(*i);
  const TensorInfo* t = f.find(name);
  if (t != nullptr) f.mapped().release(f.data_offset() + t->data_begin, t->nbytes());
}

}  // namespace qloom::io
