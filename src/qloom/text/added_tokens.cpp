#include "qloom/text/added_tokens.h"

#include <algorithm>

#include "qloom/core/error.h"
#include "qloom/text/tokenizer_limits.h"
#include "qloom/text/unicode.h"

namespace qloom::text {

void AddedVocabulary::Trie::insert(std::string_view s, int32_t token) {
  if (s.empty()) return;
  int32_t node = 0;
  for (char c : s) {
    const auto b = static_cast<unsigned char>(c);
    auto it = nodes[static_cast<size_t>(node)].next.find(b);
    if (it == nodes[static_cast<size_t>(node)].next.end()) {
      nodes.push_back(Node{});
      const auto fresh = static_cast<int32_t>(nodes.size() - 1);
      nodes[static_cast<size_t>(node)].next[b] = fresh;
      node = fresh;
    } else {
      node = it->second;
    }
  }
  // First insertion wins for duplicate strings, like the pattern order of HF.
  if (nodes[static_cast<size_t>(node)].token < 0) nodes[static_cast<size_t>(node)].token = token;
}

std::pair<size_t, int32_t> AddedVocabulary::Trie::longest_at(std::string_view text, size_t pos) const {
  std::pair<size_t, int32_t> best{0, -1};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto& nx = nodes[static_cast<size_t>(node)].next;
    auto it = nx.find(static_cast<unsigned char>(text[i]));
    if (it == nx.end()) break;
    node = it->second;
    if (nodes[static_cast<size_t>(node)].token >= 0) best = {i + 1 - pos, nodes[static_cast<size_t>(node)].token};
  }
  return best;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer,
                                 const std::string& source)
    : tokens_(std::move(tokens)) {
  size_t searched = 0;  // bytes put in the tries (a node of ~100 bytes each)
  for (size_t k = 0; k < tokens_.size(); ++k) {
    by_id_.emplace(tokens_[k].id, k);
    by_content_.emplace(tokens_[k].content, k);
    std::string s = tokens_[k].content;
    if (tokens_[k].normalized && normalizer) normalizer->normalize(s);
    searched += s.size();
    if (searched > kMaxAddedSearchBytes) {
      throw_invalid(source, "added_tokens[" + std::to_string(k) + "]",
                    "the added tokens, normalized, exceed " + std::to_string(kMaxAddedSearchBytes) +
                        " bytes together (the limit) at token " + shown_token(tokens_[k].content),
                    "the normalizer multiplies the added tokens' text, or there are too many; fix the file");
    }
    (tokens_[k].normalized ? normalized_trie_ : raw_trie_).insert(s, static_cast<int32_t>(k));
  }
}

const AddedToken* AddedVocabulary::find_id(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::find_content(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

namespace {
char32_t last_codepoint(std::string_view s) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return next_codepoint(s, i);
}
// Start of the run of whitespace that ends `s`.
size_t trailing_space_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t i = end - 1;
    while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
    size_t j = i;
    if (!is_whitespace(next_codepoint(s, j))) break;
    end = i;
  }
  return end;
}
size_t leading_space_len(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!is_whitespace(next_codepoint(s, j))) break;
    i = j;
  }
  return i;
}
}  // namespace

void AddedVocabulary::split(const Piece& piece, const Trie& trie, std::vector<Piece>& out) const {
  const std::string_view t = piece.text;
  const auto emit = [&](size_t s, size_t e, int32_t token) {
    if (e <= s) return;  // empty splits are dropped
    Piece p;
    p.text = std::string(t.substr(s, e - s));
    p.at_origin = piece.at_origin && s == 0;
    p.token = token;
    out.push_back(std::move(p));
  };
  if (trie.nodes[0].next.empty()) {
    emit(0, t.size(), -1);
    return;
  }
  size_t start_offset = 0;
  for (size_t pos = 0; pos < t.size();) {
    const auto [len, k] = trie.longest_at(t, pos);
    if (k < 0) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + len;
    pos = stop;
    const AddedToken& tok = tokens_[static_cast<size_t>(k)];
    if (tok.single_word) {
      const bool start_space = start == 0 || !is_word_char(last_codepoint(t.substr(0, start)));
      size_t j = stop;
      const bool stop_space = stop == t.size() || !is_word_char(next_codepoint(t, j));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) start = std::max(trailing_space_start(t.substr(0, start)), start_offset);
    if (tok.rstrip) stop += leading_space_len(t.substr(stop));
    if (start > start_offset) emit(start_offset, start, -1);
    emit(start, stop, tok.id);
    start_offset = stop;
  }
  if (start_offset < t.size()) emit(start_offset, t.size(), -1);
}

std::vector<Piece> AddedVocabulary::extract_and_normalize(std::string_view text,
                                                          const Normalizer* normalizer) const {
  Piece whole;
  whole.text = std::string(text);
  whole.at_origin = true;
  std::vector<Piece> raw;
  split(whole, raw_trie_, raw);
  std::vector<Piece> out;
  out.reserve(raw.size());
  for (auto& p : raw) {
    if (p.token >= 0) {
      out.push_back(std::move(p));
      continue;
    }
    if (normalizer) normalizer->normalize(p.text);
    split(p, normalized_trie_, out);
  }
  return out;
}

}  // namespace qloom::text
