#include "qloom/text/decoders.h"

#include <algorithm>

#include "qloom/text/json_util.h"
#include "qloom/text/normalizers.h"
#include "qloom/text/tokenizer_limits.h"
#include "qloom/text/unicode.h"

namespace qloom::text {

namespace ju = json_util;
using nlohmann::json;

void Decoder::decode_chain(std::vector<std::string>& tokens) const {
  size_t bytes = 0;
  for (const auto& t : tokens) bytes += t.size();
  apply(tokens, bytes);
}

namespace {

class SequenceDec : public Decoder {
 public:
  explicit SequenceDec(std::vector<std::unique_ptr<Decoder>> v) : v_(std::move(v)) {}
  void apply(std::vector<std::string>& t, size_t input_bytes) const override {
    for (const auto& d : v_) d->apply(t, input_bytes);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> v_;
};

// Maps the byte-level stand-ins back to bytes (a token with any other
// character keeps its own bytes) and repairs invalid UTF-8 lossily.
class ByteLevelDec : public Decoder {
 public:
  void apply(std::vector<std::string>& t, size_t /*input_bytes*/) const override {
    std::string bytes;
    for (const auto& tok : t) {
      std::string mine;
      bool ok = true;
      for (size_t i = 0; i < tok.size() && ok;) {
        const int b = byte_level_byte(next_codepoint(tok, i));
        if (b < 0) {
          ok = false;
        } else {
          mine += static_cast<char>(b);
        }
      }
      bytes += ok ? mine : tok;
    }
    t.assign(1, lossy_utf8(bytes));
  }
};

class MetaspaceDec : public Decoder {
 public:
  MetaspaceDec(char32_t rep, bool strip_first) : rep_(rep), strip_first_(strip_first) {}
  void apply(std::vector<std::string>& t, size_t /*input_bytes*/) const override {
    for (size_t k = 0; k < t.size(); ++k) {
      std::string out;
      for (size_t i = 0; i < t[k].size();) {
        const size_t s = i;
        const char32_t cp = next_codepoint(t[k], i);
        if (cp == rep_) {
          if (!(k == 0 && strip_first_)) out += ' ';
        } else {
          out.append(t[k], s, i - s);
        }
      }
      t[k] = std::move(out);
    }
  }

 private:
  char32_t rep_;
  bool strip_first_;
};

class ReplaceDec : public Decoder {
 public:
  ReplaceDec(Pattern p, std::string content, std::string source, std::string item)
      : p_(std::move(p)), content_(std::move(content)), source_(std::move(source)), item_(std::move(item)) {}
  void apply(std::vector<std::string>& t, size_t input_bytes) const override {
    size_t total = 0;
    for (const auto& tok : t) total += tok.size();
    const size_t limit = growth_limit(input_bytes);
    for (auto& tok : t) {
      const auto m = p_.find_all(tok);
      if (m.empty()) continue;
      const size_t size = replaced_size(tok, m, content_.size(), limit);
      check_growth(input_bytes, total - tok.size() + std::min(size, limit + 1), source_, item_,
                   "Replace decoder");
      total = total - tok.size() + size;
      tok = replace_ranges(tok, m, content_, size);
    }
  }

 private:
  Pattern p_;
  std::string content_, source_, item_;
};

// <0xXX> runs become their bytes when valid UTF-8, else one U+FFFD per byte.
class ByteFallbackDec : public Decoder {
 public:
  void apply(std::vector<std::string>& t, size_t /*input_bytes*/) const override {
    std::vector<std::string> out;
    std::string pending;
    size_t pending_n = 0;
    const auto flush = [&] {
      if (pending_n == 0) return;
      if (is_valid_utf8(pending)) {
        out.push_back(pending);
      } else {
        for (size_t k = 0; k < pending_n; ++k) out.emplace_back("\xEF\xBF\xBD");
      }
      pending.clear();
      pending_n = 0;
    };
    for (auto& tok : t) {
      int byte = -1;
      if (tok.size() == 6 && tok.compare(0, 3, "<0x") == 0 && tok[5] == '>') {
        const auto hex = [](char c) {
          if (c >= '0' && c <= '9') return c - '0';
          if (c >= 'A' && c <= 'F') return c - 'A' + 10;
          if (c >= 'a' && c <= 'f') return c - 'a' + 10;
          return -1;
        };
        const int hi = hex(tok[3]), lo = hex(tok[4]);
        if (hi >= 0 && lo >= 0) byte = hi * 16 + lo;
      }
      if (byte >= 0) {
        pending += static_cast<char>(byte);
        ++pending_n;
      } else {
        flush();
        out.push_back(std::move(tok));
      }
    }
    flush();
    t = std::move(out);
  }
};

class FuseDec : public Decoder {
 public:
  void apply(std::vector<std::string>& t, size_t /*input_bytes*/) const override {
    std::string all;
    for (const auto& s : t) all += s;
    t.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing `content` characters of each token.
class StripDec : public Decoder {
 public:
  StripDec(char32_t c, size_t start, size_t stop) : c_(c), start_(start), stop_(stop) {}
  void apply(std::vector<std::string>& t, size_t /*input_bytes*/) const override {
    for (auto& tok : t) {
      std::vector<std::pair<size_t, size_t>> chars;  // byte ranges
      for (size_t i = 0; i < tok.size();) {
        const size_t s = i;
        next_codepoint(tok, i);
        chars.emplace_back(s, i);
      }
      const auto is_c = [&](size_t k) {
        size_t i = chars[k].first;
        return next_codepoint(tok, i) == c_;
      };
      size_t cut_start = 0;
      while (cut_start < start_ && cut_start < chars.size() && is_c(cut_start)) ++cut_start;
      size_t cut_stop = 0;
      while (cut_stop < stop_ && cut_stop < chars.size() && is_c(chars.size() - 1 - cut_stop)) ++cut_stop;
      if (cut_start + cut_stop >= chars.size()) {
        tok.clear();
        continue;
      }
      const size_t b = chars[cut_start].first, e = chars[chars.size() - 1 - cut_stop].second;
      tok = tok.substr(b, e - b);
    }
  }

 private:
  char32_t c_;
  size_t start_, stop_;
};

char32_t single_char(const std::string& s, const std::string& source, const std::string& item) {
  if (count_codepoints(s) != 1) ju::bad_field(source, item, "expected a single character");
  size_t i = 0;
  return next_codepoint(s, i);
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const json& j, const std::string& source, const std::string& item) {
  if (j.is_null()) return nullptr;
  const auto type = ju::get<std::string>(j, "type", source, item);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> v;
    const auto list = ju::get<json>(j, "decoders", source, item);
    if (!list.is_array()) ju::bad_field(source, item + ".decoders", "expected an array");
    for (size_t k = 0; k < list.size(); ++k) {
      auto d = make_decoder(list[k], source, item + ".decoders[" + std::to_string(k) + "]");
      if (d) v.push_back(std::move(d));
    }
    return std::make_unique<SequenceDec>(std::move(v));
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevelDec>();
  if (type == "Metaspace") {
    const auto rep = ju::get_or<std::string>(j, "replacement", "\xE2\x96\x81", source, item);
    bool strip_first = true;
    if (j.contains("prepend_scheme") && !j["prepend_scheme"].is_null()) {
      strip_first = ju::get<std::string>(j, "prepend_scheme", source, item) != "never";
    } else {
      strip_first = ju::get_or<bool>(j, "add_prefix_space", true, source, item);
    }
    return std::make_unique<MetaspaceDec>(single_char(rep, source, item + ".replacement"), strip_first);
  }
  if (type == "Replace") {
    return std::make_unique<ReplaceDec>(
        parse_pattern(ju::get<json>(j, "pattern", source, item), source, item + ".pattern"),
        ju::get<std::string>(j, "content", source, item), source, item);
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDec>();
  if (type == "Fuse") return std::make_unique<FuseDec>();
  if (type == "Strip") {
    return std::make_unique<StripDec>(
        single_char(ju::get<std::string>(j, "content", source, item), source, item + ".content"),
        ju::get_or<size_t>(j, "start", 0, source, item), ju::get_or<size_t>(j, "stop", 0, source, item));
  }
  ju::unsupported(source, item + ".type", "unsupported decoder type \"" + type + "\"");
}

}  // namespace qloom::text
