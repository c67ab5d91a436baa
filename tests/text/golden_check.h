// Shared by the tokenizer suites: compares a Tokenizer with a goldens.json
// written by scripts/goldens/tokenizer_goldens.py or tokenizer_hf5_goldens.py
// (one case per line: text, ids, ids_plain, decoded, decoded_skip; or
// decode_ids, decoded, decoded_skip).
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "qloom/text/tokenizer.h"
#include "support/sha256.h"
#include "support/temp_dir.h"

namespace qloom::text {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Hex SHA-256 of `ids` as little-endian int32 (how the wikitext goldens
// record a whole text's ids).
inline std::string ids_sha256(const std::vector<int32_t>& ids) {
  std::vector<unsigned char> bytes;
  bytes.reserve(ids.size() * 4);
  for (int32_t id : ids)
    for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<unsigned char>(static_cast<uint32_t>(id) >> (8 * k)));
  return test::sha256_hex(bytes.data(), bytes.size());
}

inline std::string escape(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c >= 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

inline std::string show(const std::vector<int32_t>& ids) {
  std::ostringstream ss;
  ss << "[";
  for (size_t k = 0; k < ids.size(); ++k) ss << (k ? "," : "") << ids[k];
  ss << "]";
  return ss.str();
}

inline json read_json(const fs::path& p) {
  const std::string text = test::read_file(p);
  EXPECT_FALSE(text.empty()) << p;
  return json::parse(text);
}

struct GoldenResult {
  int cases = 0, passed = 0;
  std::string first_mismatch;
};

// Compares one tokenizer against goldens.json: per case the four checks
// (encode with/without special tokens, decode with/without skipping).
inline GoldenResult check_goldens(const Tokenizer& tok, const fs::path& goldens) {
  GoldenResult r;
  for (const json& c : read_json(goldens)) {
    ++r.cases;
    std::string why;
    std::vector<int32_t> ids;
    if (c.contains("text")) {
      const auto text = c["text"].get<std::string>();
      ids = c["ids"].get<std::vector<int32_t>>();
      const auto plain = c["ids_plain"].get<std::vector<int32_t>>();
      const auto got = tok.encode(text, true);
      const auto got_plain = tok.encode(text, false);
      if (got != ids) {
        why = "encode(\"" + escape(text) + "\", true) = " + show(got) + ", expected " + show(ids);
      } else if (got_plain != plain) {
        why = "encode(\"" + escape(text) + "\", false) = " + show(got_plain) + ", expected " + show(plain);
      }
    } else {
      ids = c["decode_ids"].get<std::vector<int32_t>>();
    }
    if (why.empty()) {
      const auto dec = tok.decode(ids, false), dec_skip = tok.decode(ids, true);
      const auto want = c["decoded"].get<std::string>(), want_skip = c["decoded_skip"].get<std::string>();
      if (dec != want) {
        why = "decode(" + show(ids) + ", false) = \"" + escape(dec) + "\", expected \"" + escape(want) + "\"";
      } else if (dec_skip != want_skip) {
        why = "decode(" + show(ids) + ", true) = \"" + escape(dec_skip) + "\", expected \"" +
              escape(want_skip) + "\"";
      }
    }
    if (why.empty()) {
      ++r.passed;
    } else if (r.first_mismatch.empty()) {
      r.first_mismatch = why;
    }
  }
  return r;
}

}  // namespace
}  // namespace qloom::text
