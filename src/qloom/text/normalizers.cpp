#include "qloom/text/normalizers.h"

#include "qloom/text/json_util.h"
#include "qloom/text/onig_regex.h"
#include "qloom/text/tokenizer_limits.h"
#include "qloom/text/unicode.h"

namespace qloom::text {

namespace ju = json_util;
using nlohmann::json;

namespace {

// Where a normalizer sits in the file, for the growth error.
struct Where {
  std::string source, item;
  void check(size_t input_bytes, size_t new_size, const char* what) const {
    check_growth(input_bytes, new_size, source, item, what);
  }
};

class SequenceNorm : public Normalizer {
 public:
  explicit SequenceNorm(std::vector<std::unique_ptr<Normalizer>> n) : n_(std::move(n)) {}
  void apply(std::string& t, size_t input_bytes) const override {
    for (const auto& n : n_) n->apply(t, input_bytes);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> n_;
};

class PrependNorm : public Normalizer {
 public:
  PrependNorm(std::string p, Where w) : p_(std::move(p)), w_(std::move(w)) {}
  void apply(std::string& t, size_t input_bytes) const override {
    if (t.empty()) return;
    w_.check(input_bytes, t.size() + p_.size(), "Prepend normalizer");
    t.insert(0, p_);
  }

 private:
  std::string p_;
  Where w_;
};

class ReplaceNorm : public Normalizer {
 public:
  ReplaceNorm(Pattern p, std::string content, Where w)
      : p_(std::move(p)), content_(std::move(content)), w_(std::move(w)) {}
  void apply(std::string& t, size_t input_bytes) const override {
    const auto matches = p_.find_all(t);
    if (matches.empty()) return;
    const size_t size = replaced_size(t, matches, content_.size(), growth_limit(input_bytes));
    w_.check(input_bytes, size, "Replace normalizer");
    t = replace_ranges(t, matches, content_, size);
  }

 private:
  Pattern p_;
  std::string content_;
  Where w_;
};

// NFC/NFD/NFKC/NFKD grow a character at most ~11x (in bytes), Lowercase a
// little; checked after the fact.
class UnicodeNorm : public Normalizer {
 public:
  UnicodeNorm(NormalForm f, Where w) : f_(f), w_(std::move(w)) {}
  void apply(std::string& t, size_t input_bytes) const override {
    t = unicode_normalize(t, f_);
    w_.check(input_bytes, t.size(), "Unicode normalizer");
  }

 private:
  NormalForm f_;
  Where w_;
};

class LowercaseNorm : public Normalizer {
 public:
  explicit LowercaseNorm(Where w) : w_(std::move(w)) {}
  void apply(std::string& t, size_t input_bytes) const override {
    t = unicode_lowercase(t);
    w_.check(input_bytes, t.size(), "Lowercase normalizer");
  }

 private:
  Where w_;
};

class StripNorm : public Normalizer {
 public:
  StripNorm(bool left, bool right) : left_(left), right_(right) {}
  void apply(std::string& t, size_t /*input_bytes*/) const override {
    size_t begin = 0, end = t.size();
    if (left_) {
      while (begin < end) {
        size_t i = begin;
        if (!is_whitespace(next_codepoint(t, i))) break;
        begin = i;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t s = end - 1;
        while (s > begin && (static_cast<unsigned char>(t[s]) & 0xC0) == 0x80) --s;
        size_t i = s;
        if (!is_whitespace(next_codepoint(t, i))) break;
        end = s;
      }
    }
    t = t.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

}  // namespace

Pattern parse_pattern(const json& j, const std::string& source, const std::string& item) {
  if (j.is_object() && j.contains("String") && j["String"].is_string()) {
    return Pattern::literal(j["String"].get<std::string>());
  }
  if (j.is_object() && j.contains("Regex") && j["Regex"].is_string()) {
    return Pattern::regex(j["Regex"].get<std::string>(), item, source);
  }
  ju::bad_field(source, item, "expected {\"String\": ...} or {\"Regex\": ...}");
}

std::unique_ptr<Normalizer> make_normalizer(const json& j, const std::string& source,
                                            const std::string& item) {
  if (j.is_null()) return nullptr;
  const auto type = ju::get<std::string>(j, "type", source, item);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> v;
    const auto list = ju::get<json>(j, "normalizers", source, item);
    if (!list.is_array()) ju::bad_field(source, item + ".normalizers", "expected an array");
    for (size_t k = 0; k < list.size(); ++k) {
      auto n = make_normalizer(list[k], source, item + ".normalizers[" + std::to_string(k) + "]");
      if (n) v.push_back(std::move(n));
    }
    return std::make_unique<SequenceNorm>(std::move(v));
  }
  const Where w{source, item};
  if (type == "Prepend") {
    return std::make_unique<PrependNorm>(ju::get<std::string>(j, "prepend", source, item), w);
  }
  if (type == "Replace") {
    return std::make_unique<ReplaceNorm>(
        parse_pattern(ju::get<json>(j, "pattern", source, item), source, item + ".pattern"),
        ju::get<std::string>(j, "content", source, item), w);
  }
  if (type == "NFC") return std::make_unique<UnicodeNorm>(NormalForm::kNFC, w);
  if (type == "NFD") return std::make_unique<UnicodeNorm>(NormalForm::kNFD, w);
  if (type == "NFKC") return std::make_unique<UnicodeNorm>(NormalForm::kNFKC, w);
  if (type == "NFKD") return std::make_unique<UnicodeNorm>(NormalForm::kNFKD, w);
  if (type == "Lowercase") return std::make_unique<LowercaseNorm>(w);
  if (type == "Strip") {
    return std::make_unique<StripNorm>(ju::get_or<bool>(j, "strip_left", true, source, item),
                                       ju::get_or<bool>(j, "strip_right", true, source, item));
  }
  ju::unsupported(source, item + ".type", "unsupported normalizer type \"" + type + "\"");
}

}  // namespace qloom::text
