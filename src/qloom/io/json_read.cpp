#include "qloom/io/json_read.h"

#include <string>
#include <vector>

#include "qloom/core/error.h"
#include "qloom/io/mapped_file.h"

namespace qloom::io {

bool is_valid_utf8(std::string_view text, size_t* bad_offset) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  auto fail = [&](size_t at) {
    if (bad_offset) *bad_offset = at;
    return false;
  };
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;         // no overlong 3-byte forms
      else if (c == 0xED) hi = 0x9F;    // no UTF-16 surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;         // no overlong 4-byte forms
      else if (c == 0xF4) hi = 0x8F;    // nothing above U+10FFFF
    } else {
      return fail(i);
    }
    if (n - i < len) return fail(i);
    if (s[i + 1] < lo || s[i + 1] > hi) return fail(i + 1);
    for (size_t k = 2; k < len; ++k)
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return fail(i + k);
    i += len;
  }
  return true;
}

namespace {

// nlohmann's messages start with "[json.exception.parse_error.101] "; the
// bracketed tag means nothing to a user.
std::string strip_tag(const std::string& what) {
  if (!what.empty() && what[0] == '[') {
    const auto close = what.find("] ");
    if (close != std::string::npos) return what.substr(close + 2);
  }
  return what;
}

// Builds a DOM like nlohmann's own SAX DOM parser, plus duplicate-key and
// depth checks. (nlohmann's callback parser would do the checks too, but it
// rescans the parent object after every nested object: quadratic on a
// safetensors header with 100k entries.)
class StrictDomBuilder {
 public:
  using json = nlohmann::json;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  StrictDomBuilder(json& root, const std::string& file, const JsonReadOptions& opts)
      : root_(root), file_(file), opts_(opts) {}

  bool null() { return put(nullptr); }
  bool boolean(bool v) { return put(v); }
  bool number_integer(json::number_integer_t v) { return put(v); }
  bool number_unsigned(json::number_unsigned_t v) { return put(v); }
  bool number_float(json::number_float_t v, const string_t&) { return put(v); }
  bool string(string_t& v) { return put(std::move(v)); }
  bool binary(binary_t& v) { return put(json::binary(std::move(v))); }

  bool start_object(std::size_t) { return open(json::value_t::object); }
  bool start_array(std::size_t) { return open(json::value_t::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(string_t& k) {
    if (stack_.size() == 1) top_key_ = k;
    auto& obj = stack_.back()->get_ref<json::object_t&>();
    auto [it, inserted] = obj.try_emplace(k, nullptr);
    if (!inserted && opts_.reject_duplicate_keys) {
      if (stack_.size() == 1)
        throw_invalid(file_, k, "key \"" + k + "\" appears twice in the JSON object",
                      opts_.remedy);
      throw_invalid(file_, top_key_, "key \"" + k + "\" appears twice in the same JSON object",
                    opts_.remedy);
    }
    // A repeated key (when allowed) keeps the last value, as Python's json does.
    it->second = nullptr;
    slot_ = &it->second;
    return true;
  }

  template <class Exception>
  bool parse_error(std::size_t position, const std::string&, const Exception& ex) {
    throw_invalid(file_, "",
                  "not valid JSON: " + strip_tag(ex.what()) + " (byte " +
                      std::to_string(position) + ")",
                  opts_.remedy);
  }

 private:
  // Stores a value where the parser is: the root, the end of the open array,
  // or the slot the last key made. Returns where it went.
  template <class V>
  json* place(V&& v) {
    if (stack_.empty()) {
      root_ = json(std::forward<V>(v));
      return &root_;
    }
    json* top = stack_.back();
    if (top->is_array()) {
      auto& arr = top->get_ref<json::array_t&>();
      arr.emplace_back(std::forward<V>(v));
      return &arr.back();
    }
    *slot_ = json(std::forward<V>(v));
    return slot_;
  }
  template <class V>
  bool put(V&& v) {
    place(std::forward<V>(v));
    return true;
  }
  bool open(json::value_t t) {
    if (static_cast<int>(stack_.size()) >= opts_.max_depth)
      throw_invalid(file_, top_key_,
                    "JSON is nested more than " + std::to_string(opts_.max_depth) +
                        " levels deep",
                    opts_.remedy);
    stack_.push_back(place(t));
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }

  json& root_;
  const std::string& file_;
  const JsonReadOptions& opts_;
  std::vector<json*> stack_;  // open containers, outermost first
  json* slot_ = nullptr;      // value slot of the last object key
  std::string top_key_;       // the root object's current key, for messages
};

}  // namespace

nlohmann::json parse_json_text(std::string_view text, const std::string& file_label,
                               const JsonReadOptions& opts) {
  using nlohmann::json;
  // nlohmann stops at a NUL byte as if the input ended there, so "{}\0junk"
  // would parse. JSON never contains a raw NUL: refuse it up front.
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    throw_invalid(file_label, "",
                  "not valid JSON: NUL byte at offset " + std::to_string(nul), opts.remedy);

  json root;
  StrictDomBuilder builder(root, file_label, opts);
  try {
    json::sax_parse(text.begin(), text.end(), &builder, json::input_format_t::json,
                    /*strict=*/true, /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    // Any other nlohmann failure while parsing (should not happen) still
    // becomes a user-facing error about this file.
    throw_invalid(file_label, "", "not valid JSON: " + strip_tag(e.what()), opts.remedy);
  }
  return root;
}

nlohmann::json read_json_file(const std::filesystem::path& file, const JsonReadOptions& opts) {
  MappedFile mf = MappedFile::open(file);
  const auto b = mf.bytes();
  const std::string_view text(reinterpret_cast<const char*>(b.data()), b.size());
  size_t bad = 0;
  if (!is_valid_utf8(text, &bad))
    throw_invalid(file.string(), "",
                  "not valid UTF-8 (bad byte at offset " + std::to_string(bad) + ")", opts.remedy);
  return parse_json_text(text, file.string(), opts);
}

}  // namespace qloom::io
