#include "qloom/text/normalizers.h"

#include "qloom/text/json_util.h"
#include "qloom/text/onig_regex.h"
#include "qloom/text/unicode.h"

namespace qloom::text {

namespace ju = json_util;
using nlohmann::json;

namespace {

class SequenceNorm : public Normalizer {
 public:
  explicit SequenceNorm(std::vector<std::unique_ptr<Normalizer>> n) : n_(std::move(n)) {}
  void normalize(std::string& t) const override {
    for (const auto& n : n_) n->normalize(t);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> n_;
};

class PrependNorm : public Normalizer {
 public:
  explicit PrependNorm(std::string p) : p_(std::move(p)) {}
  void normalize(std::string& t) const override {
    if (!t.empty()) t.insert(0, p_);
  }

 private:
  std::string p_;
};

class ReplaceNorm : public Normalizer {
 public:
  ReplaceNorm(Pattern p, std::string content) : p_(std::move(p)), content_(std::move(content)) {}
  void normalize(std::string& t) const override {
    const auto matches = p_.find_all(t);
    if (matches.empty()) return;
    std::string out;
    size_t last = 0;
    for (const auto& [s, e] : matches) {
      out.append(t, last, s - last);
      out += content_;
      last = e;
    }
    out.append(t, last, std::string::npos);
    t = std::move(out);
  }

 private:
  Pattern p_;
  std::string content_;
};

class UnicodeNorm : public Normalizer {
 public:
  explicit UnicodeNorm(NormalForm f) : f_(f) {}
  void normalize(std::string& t) const override { t = unicode_normalize(t, f_); }

 private:
  NormalForm f_;
};

class LowercaseNorm : public Normalizer {
 public:
  void normalize(std::string& t) const override { t = unicode_lowercase(t); }
};

class StripNorm : public Normalizer {
 public:
  StripNorm(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& t) const override {
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
    return Pattern::regex(j["Regex"].get<std::string>(), item);
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
  if (type == "Prepend") {
    return std::make_unique<PrependNorm>(ju::get<std::string>(j, "prepend", source, item));
  }
  if (type == "Replace") {
    return std::make_unique<ReplaceNorm>(
        parse_pattern(ju::get<json>(j, "pattern", source, item), source, item + ".pattern"),
        ju::get<std::string>(j, "content", source, item));
  }
  if (type == "NFC") return std::make_unique<UnicodeNorm>(NormalForm::kNFC);
  if (type == "NFD") return std::make_unique<UnicodeNorm>(NormalForm::kNFD);
  if (type == "NFKC") return std::make_unique<UnicodeNorm>(NormalForm::kNFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNorm>(NormalForm::kNFKD);
  if (type == "Lowercase") return std::make_unique<LowercaseNorm>();
  if (type == "Strip") {
    return std::make_unique<StripNorm>(ju::get_or<bool>(j, "strip_left", true, source, item),
                                       ju::get_or<bool>(j, "strip_right", true, source, item));
  }
  ju::unsupported(source, item + ".type", "unsupported normalizer type \"" + type + "\"");
}

}  // namespace qloom::text
