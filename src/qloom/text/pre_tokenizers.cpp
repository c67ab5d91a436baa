#include "qloom/text/pre_tokenizers.h"

#include <algorithm>

#include "qloom/text/json_util.h"
#include "qloom/text/normalizers.h"
#include "qloom/text/unicode.h"

namespace qloom::text {

namespace ju = json_util;
using nlohmann::json;

void split_piece(const Piece& piece, const std::vector<Range>& matches, SplitBehavior behavior,
                 bool invert, std::vector<Piece>& out) {
  const std::string& t = piece.text;
  // (range, is_match) covering the whole text, as HF's Pattern::find_matches.
  struct Part {
    size_t s, e;
    bool m;
  };
  std::vector<Part> parts;
  if (t.empty()) {
    parts.push_back({0, 0, false});
  } else {
    size_t prev = 0;
    for (const auto& [s, e] : matches) {
      if (prev != s) parts.push_back({prev, s, false});
      parts.push_back({s, e, true});
      prev = e;
    }
    if (prev != t.size()) parts.push_back({prev, t.size(), false});
  }
  if (invert) {
    for (auto& p : parts) p.m = !p.m;
  }
  // (range, removed)
  std::vector<Part> keep;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      keep = parts;
      break;
    case SplitBehavior::kIsolated:
      for (auto p : parts) keep.push_back({p.s, p.e, false});
      break;
    case SplitBehavior::kContiguous: {
      bool prev_match = false;
      for (const auto& p : parts) {
        if (p.m == prev_match && !keep.empty()) {
          keep.back().e = p.e;
        } else {
          keep.push_back({p.s, p.e, false});
        }
        prev_match = p.m;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool prev_match = false;
      for (const auto& p : parts) {
        if (p.m && !prev_match && !keep.empty()) {
          keep.back().e = p.e;
        } else {
          keep.push_back({p.s, p.e, false});
        }
        prev_match = p.m;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool prev_match = false;
      for (size_t k = parts.size(); k-- > 0;) {
        const auto& p = parts[k];
        if (p.m && !prev_match && !keep.empty()) {
          keep.back().s = p.s;
        } else {
          keep.push_back({p.s, p.e, false});
        }
        prev_match = p.m;
      }
      std::reverse(keep.begin(), keep.end());
      break;
    }
  }
  for (const auto& p : keep) {
    if (p.m || p.e <= p.s) continue;  // removed, or empty
    Piece np;
    np.text = t.substr(p.s, p.e - p.s);
    np.at_origin = piece.at_origin && p.s == 0;
    out.push_back(std::move(np));
  }
}

namespace {

// Applies `f(piece, out)` to every piece without a token.
template <class F>
void for_each_split(std::vector<Piece>& pieces, F&& f) {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  for (auto& p : pieces) {
    if (p.token >= 0) {
      out.push_back(std::move(p));
    } else {
      f(p, out);
    }
  }
  pieces = std::move(out);
}

const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

class SequencePre : public PreTokenizer {
 public:
  explicit SequencePre(std::vector<std::unique_ptr<PreTokenizer>> v) : v_(std::move(v)) {}
  void apply(std::vector<Piece>& pieces) const override {
    for (const auto& p : v_) p->apply(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> v_;
};

class ByteLevelPre : public PreTokenizer {
 public:
  ByteLevelPre(bool add_prefix_space, bool use_regex, const std::string& source, const std::string& item)
      : add_prefix_space_(add_prefix_space) {
    if (use_regex) re_ = std::make_unique<OnigRegex>(kGpt2Pattern, item, source);
  }
  void apply(std::vector<Piece>& pieces) const override {
    for_each_split(pieces, [&](Piece& p, std::vector<Piece>& out) {
      if (add_prefix_space_ && (p.text.empty() || p.text[0] != ' ')) {
        std::string t(1, ' ');  // (insert(0, " ") trips gcc 12's false -Wrestrict)
        t += p.text;
        p.text = std::move(t);
      }
      const size_t first = out.size();
      if (re_) {
        split_piece(p, re_->find_all(p.text), SplitBehavior::kIsolated, false, out);
      } else if (!p.text.empty()) {
        out.push_back(std::move(p));
      }
      const auto& table = byte_level_chars();
      for (size_t k = first; k < out.size(); ++k) {
        std::string mapped;
        mapped.reserve(out[k].text.size() * 2);
        for (char c : out[k].text) mapped += table[static_cast<unsigned char>(c)];
        out[k].text = std::move(mapped);
      }
    });
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<OnigRegex> re_;
};

class SplitPre : public PreTokenizer {
 public:
  SplitPre(Pattern p, SplitBehavior b, bool invert) : p_(std::move(p)), b_(b), invert_(invert) {}
  void apply(std::vector<Piece>& pieces) const override {
    for_each_split(pieces, [&](Piece& p, std::vector<Piece>& out) {
      split_piece(p, p_.find_all(p.text), b_, invert_, out);
    });
  }

 private:
  Pattern p_;
  SplitBehavior b_;
  bool invert_;
};

enum class Prepend { kAlways, kFirst, kNever };

class MetaspacePre : public PreTokenizer {
 public:
  MetaspacePre(std::string replacement, Prepend prepend, bool split)
      : rep_(std::move(replacement)), prepend_(prepend), split_(split) {}
  void apply(std::vector<Piece>& pieces) const override {
    for_each_split(pieces, [&](Piece& p, std::vector<Piece>& out) {
      std::string t;
      t.reserve(p.text.size() + rep_.size());
      for (char c : p.text) {
        if (c == ' ') {
          t += rep_;
        } else {
          t += c;
        }
      }
      const bool starts = t.compare(0, rep_.size(), rep_) == 0;
      if (!starts && (prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && p.at_origin))) {
        t.insert(0, rep_);
      }
      p.text = std::move(t);
      if (split_) {
        split_piece(p, Pattern::literal(rep_).find_all(p.text), SplitBehavior::kMergedWithNext,
                    false, out);
      } else if (!p.text.empty()) {
        out.push_back(std::move(p));
      }
    });
  }

 private:
  std::string rep_;
  Prepend prepend_;
  bool split_;
};

// Digits: each numeric char alone (individual) or runs of them.
class DigitsPre : public PreTokenizer {
 public:
  explicit DigitsPre(bool individual) : individual_(individual) {}
  void apply(std::vector<Piece>& pieces) const override {
    for_each_split(pieces, [&](Piece& p, std::vector<Piece>& out) {
      std::vector<Range> m;
      for (size_t i = 0; i < p.text.size();) {
        const size_t s = i;
        if (is_numeric(next_codepoint(p.text, i))) m.emplace_back(s, i);
      }
      split_piece(p, m, individual_ ? SplitBehavior::kIsolated : SplitBehavior::kContiguous,
                  false, out);
    });
  }

 private:
  bool individual_;
};

// Whitespace: keeps \w+ and [^\w\s]+ runs. WhitespaceSplit: drops whitespace.
class RegexKeepPre : public PreTokenizer {
 public:
  RegexKeepPre(const std::string& pattern, bool invert, const std::string& source, const std::string& item)
      : re_(pattern, item, source), invert_(invert) {}
  void apply(std::vector<Piece>& pieces) const override {
    for_each_split(pieces, [&](Piece& p, std::vector<Piece>& out) {
      split_piece(p, re_.find_all(p.text), SplitBehavior::kRemoved, invert_, out);
    });
  }

 private:
  OnigRegex re_;
  bool invert_;
};

SplitBehavior parse_behavior(const std::string& b, const std::string& source,
                             const std::string& item) {
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  ju::bad_field(source, item, "unknown split behavior \"" + b + "\"");
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j, const std::string& source,
                                                 const std::string& item) {
  if (j.is_null()) return nullptr;
  const auto type = ju::get<std::string>(j, "type", source, item);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> v;
    const auto list = ju::get<json>(j, "pretokenizers", source, item);
    if (!list.is_array()) ju::bad_field(source, item + ".pretokenizers", "expected an array");
    for (size_t k = 0; k < list.size(); ++k) {
      auto p = make_pre_tokenizer(list[k], source,
                                  item + ".pretokenizers[" + std::to_string(k) + "]");
      if (p) v.push_back(std::move(p));
    }
    return std::make_unique<SequencePre>(std::move(v));
  }
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPre>(
        ju::get_or<bool>(j, "add_prefix_space", true, source, item),
        ju::get_or<bool>(j, "use_regex", true, source, item), source, item);
  }
  if (type == "Split") {
    return std::make_unique<SplitPre>(
        parse_pattern(ju::get<json>(j, "pattern", source, item), source, item + ".pattern"),
        parse_behavior(ju::get<std::string>(j, "behavior", source, item), source,
                       item + ".behavior"),
        ju::get_or<bool>(j, "invert", false, source, item));
  }
  if (type == "Metaspace") {
    const auto rep = ju::get_or<std::string>(j, "replacement", "\xE2\x96\x81", source, item);
    if (count_codepoints(rep) != 1) {
      ju::bad_field(source, item + ".replacement", "expected a single character");
    }
    Prepend prepend = Prepend::kAlways;
    if (j.contains("prepend_scheme") && !j["prepend_scheme"].is_null()) {
      const auto s = ju::get<std::string>(j, "prepend_scheme", source, item);
      if (s == "always") {
        prepend = Prepend::kAlways;
      } else if (s == "first") {
        prepend = Prepend::kFirst;
      } else if (s == "never") {
        prepend = Prepend::kNever;
      } else {
        ju::bad_field(source, item + ".prepend_scheme", "unknown prepend_scheme \"" + s + "\"");
      }
    } else if (!ju::get_or<bool>(j, "add_prefix_space", true, source, item)) {
      prepend = Prepend::kNever;  // legacy files: add_prefix_space false
    }
    return std::make_unique<MetaspacePre>(rep, prepend,
                                          ju::get_or<bool>(j, "split", true, source, item));
  }
  if (type == "Digits") {
    return std::make_unique<DigitsPre>(
        ju::get_or<bool>(j, "individual_digits", false, source, item));
  }
  if (type == "Whitespace") {
    // HF uses the Rust regex crate here: \w+|[^\w\s]+ with Rust's classes.
    std::string re = kRustWordClass;
    re += "+|";
    re += kRustNotWordOrSpaceClass;
    re += "+";
    return std::make_unique<RegexKeepPre>(re, true, source, item);
  }
  if (type == "WhitespaceSplit") {
    return std::make_unique<RegexKeepPre>("\\p{White_Space}+", false, source, item);
  }
  ju::unsupported(source, item + ".type", "unsupported pre_tokenizer type \"" + type + "\"");
}

}  // namespace qloom::text
