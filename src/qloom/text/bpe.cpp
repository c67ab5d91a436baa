#include "qloom/text/bpe.h"

#include <cstdio>
#include <queue>

#include "qloom/text/json_util.h"
#include "qloom/text/tokenizer_limits.h"
#include "qloom/text/unicode.h"

namespace qloom::text {

namespace ju = json_util;
using nlohmann::json;

Bpe::Bpe(const json& m, const std::string& source, const std::string& item, int64_t id_limit) {
  const auto type = ju::get_or<std::string>(m, "type", "BPE", source, item);
  if (type != "BPE") {
    ju::unsupported(source, item + ".type", "unsupported model type \"" + type + "\" (only BPE)");
  }
  const double dropout = ju::get_or<double>(m, "dropout", 0.0, source, item);
  if (dropout > 0.0) {
    ju::unsupported(source, item + ".dropout", "BPE dropout is not supported (encode must be deterministic)");
  }
  prefix_ = ju::get_or<std::string>(m, "continuing_subword_prefix", "", source, item);
  suffix_ = ju::get_or<std::string>(m, "end_of_word_suffix", "", source, item);
  fuse_unk_ = ju::get_or<bool>(m, "fuse_unk", false, source, item);
  byte_fallback_ = ju::get_or<bool>(m, "byte_fallback", false, source, item);
  ignore_merges_ = ju::get_or<bool>(m, "ignore_merges", false, source, item);

  const auto vocab_it = m.find("vocab");
  if (vocab_it == m.end() || !vocab_it->is_object()) {
    ju::bad_field(source, item + ".vocab", "expected an object of token -> id");
  }
  load_vocab(*vocab_it, id_limit, source, item + ".vocab");

  const auto unk = ju::get_or<std::string>(m, "unk_token", "", source, item);
  if (!unk.empty()) {
    auto it = vocab_.find(unk);
    if (it != vocab_.end()) unk_id_ = it->second;
  }
  if (byte_fallback_) {
    byte_ids_.assign(256, -1);
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      auto it = vocab_.find(name);
      if (it != vocab_.end()) byte_ids_[static_cast<size_t>(b)] = it->second;
    }
  }

  const auto merges_it = m.find("merges");
  if (merges_it == m.end() || !merges_it->is_array()) {
    ju::bad_field(source, item + ".merges", "expected an array");
  }
  load_merges(*merges_it, source, item);
}

// Ids are checked before the id -> token table grows to them: a hostile id
// would otherwise size it (tokenizer_limits.h).
void Bpe::load_vocab(const json& vocab, int64_t id_limit, const std::string& source, const std::string& item) {
  vocab_.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    check_token_size(it.key(), source, item);
    const int32_t id = checked_token_id(it.value(), id_limit, source, item, it.key());
    const auto at = static_cast<size_t>(id);
    if (at >= id_to_token_.size()) {
      id_to_token_.resize(at + 1);
      has_id_.resize(at + 1);
    }
    vocab_[it.key()] = id;
    // Two tokens with one id: HF tokenizers accepts them (both encode to the
    // id) and decodes the id to an arbitrary one of them; qloom decodes to the
    // first in key order (nlohmann's object order), so the choice is stable.
    if (has_id_[at]) continue;
    id_to_token_[at] = it.key();
    has_id_[at] = true;
  }
}

void Bpe::load_merges(const json& merges, const std::string& source, const std::string& item) {
  merges_.reserve(merges.size());
  int32_t rank = 0;
  for (const auto& e : merges) {
    std::string a, b;
    if (e.is_string()) {
      const auto s = e.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos) {
        ju::bad_field(source, item + ".merges[" + std::to_string(rank) + "]",
                      "merge " + shown_token(s) + " is not \"a b\"");
      }
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      ju::bad_field(source, item + ".merges[" + std::to_string(rank) + "]",
                    "expected \"a b\" or [a, b]");
    }
    const auto ia = vocab_.find(a), ib = vocab_.find(b);
    std::string merged = a;
    merged += (!prefix_.empty() && b.compare(0, prefix_.size(), prefix_) == 0)
                  ? b.substr(prefix_.size())
                  : b;
    const auto im = vocab_.find(merged);
    if (ia == vocab_.end() || ib == vocab_.end() || im == vocab_.end()) {
      ju::bad_field(source, item + ".merges[" + std::to_string(rank) + "]",
                    "merge " + shown_token(a + " " + b) + " uses a token missing from the vocab");
    }
    merges_[pair_key(ia->second, ib->second)] = Merge{rank, im->second};  // later wins, as HF
    ++rank;
  }
}

std::optional<int32_t> Bpe::token_to_id(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* Bpe::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !has_id_[static_cast<size_t>(id)]) {
    return nullptr;
  }
  return &id_to_token_[static_cast<size_t>(id)];
}

void Bpe::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    auto it = vocab_.find(std::string(word));
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // Initial symbols: one per character (prefix on all but the first, suffix
  // on the last), falling back to <0xXX> bytes, then to (fused) unk.
  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  int32_t pending_unk = -1;  // unk waiting to be emitted (fused)
  std::string key;
  for (size_t i = 0; i < word.size();) {
    const size_t start = i;
    i += utf8_len(static_cast<unsigned char>(word[i]));
    if (i > word.size()) i = word.size();
    key.clear();
    if (start > 0) key += prefix_;
    key.append(word.substr(start, i - start));
    if (i == word.size()) key += suffix_;
    auto it = vocab_.find(key);
    if (it != vocab_.end()) {
      if (pending_unk >= 0) {
        symbols.push_back(pending_unk);
        pending_unk = -1;
      }
      symbols.push_back(it->second);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (size_t k = start; k < i; ++k) all = all && byte_ids_[static_cast<unsigned char>(word[k])] >= 0;
      if (all) {
        // As HF: a pending unk is not flushed before the byte tokens.
        for (size_t k = start; k < i; ++k) symbols.push_back(byte_ids_[static_cast<unsigned char>(word[k])]);
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk >= 0 && !fuse_unk_) symbols.push_back(pending_unk);
      pending_unk = *unk_id_;
    }
  }
  if (pending_unk >= 0) symbols.push_back(pending_unk);
  merge_word(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
}

// HF Word::merge_all without dropout: repeatedly apply the lowest-rank merge
// (leftmost on ties), with a heap of candidate pairs and a linked list.
void Bpe::merge_word(std::vector<int32_t>& sym) const {
  const size_t n = sym.size();
  if (n < 2) return;
  std::vector<int32_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (size_t k = 0; k < n; ++k) {
    prev[k] = static_cast<int32_t>(k) - 1;
    next[k] = k + 1 < n ? static_cast<int32_t>(k + 1) : -1;
  }
  struct Cand {
    int32_t rank, pos, new_id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> queue;
  for (size_t k = 0; k + 1 < n; ++k) {
    auto it = merges_.find(pair_key(sym[k], sym[k + 1]));
    if (it != merges_.end()) queue.push({it->second.rank, static_cast<int32_t>(k), it->second.new_id});
  }
  while (!queue.empty()) {
    const Cand top = queue.top();
    queue.pop();
    const auto pos = static_cast<size_t>(top.pos);
    if (!alive[pos] || next[pos] < 0) continue;
    const auto right = static_cast<size_t>(next[pos]);
    auto it = merges_.find(pair_key(sym[pos], sym[right]));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;  // stale entry
    sym[pos] = top.new_id;
    alive[right] = false;
    next[pos] = next[right];
    if (next[right] >= 0) prev[static_cast<size_t>(next[right])] = static_cast<int32_t>(pos);
    if (prev[pos] >= 0) {
      const auto p = static_cast<size_t>(prev[pos]);
      auto pit = merges_.find(pair_key(sym[p], sym[pos]));
      if (pit != merges_.end()) queue.push({pit->second.rank, static_cast<int32_t>(p), pit->second.new_id});
    }
    if (next[pos] >= 0) {
      auto nit = merges_.find(pair_key(sym[pos], sym[static_cast<size_t>(next[pos])]));
      if (nit != merges_.end()) queue.push({nit->second.rank, static_cast<int32_t>(pos), nit->second.new_id});
    }
  }
  size_t w = 0;
  for (size_t k = 0; k < n; ++k) {
    if (alive[k]) sym[w++] = sym[k];
  }
  sym.resize(w);
}

}  // namespace qloom::text
