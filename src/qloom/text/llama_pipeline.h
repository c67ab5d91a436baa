// The tokenizer.json document of the pipeline transformers 5's
// LlamaTokenizer builds (see tokenizer_choice.h), for parse_tokenizer_json.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/text/tokenizer_choice.h"

namespace qloom::text {

class SentencePieceModel;

// The added tokens transformers 5 gives a LlamaTokenizer, from
// tokenizer_config.json (not from tokenizer.json's "added_tokens").
struct LlamaSpecials {
  // bos_token / eos_token / unk_token / pad_token: LlamaTokenizer's defaults
  // when absent, "" (none) when null.
  std::string bos = "<s>", eos = "</s>", unk = "<unk>";
  std::optional<std::string> pad;
  std::vector<std::string> extra;  // additional_special_tokens
  nlohmann::json added = nlohmann::json::array();  // added_tokens_decoder, as tokenizer.json entries
  // tokenizer.model only (transformers 5 drops them when tokenizer.json
  // exists): the post-processor puts BOS / EOS around a sequence; both
  // default false (TokenizersBackend's defaults).
  bool add_bos = false, add_eos = false;
};

// Reads LlamaSpecials from tokenizer_config.json (`cfg`, read from `file`);
// throws kInvalidInput naming the file and field for mistyped values.
LlamaSpecials llama_specials(const nlohmann::json& cfg, const std::string& file);

// From the tokenizer.json document `doc` (read from `source`): its BPE vocab
// and merges, added tokens and post_processor, LlamaTokenizer's normalizer,
// pre-tokenizer, decoder and BPE options. Throws kUnsupported naming
// `source` and model.type when the model is not BPE.
nlohmann::json llama_pipeline_from_json(const nlohmann::json& doc, const TokenizerChoice& c,
                                        const LlamaSpecials& s, const std::string& source);

// From tokenizer.model alone: the vocabulary is the pieces by id, the merges
// every split of a piece into two pieces, ordered by the piece's id, then by
// the left part's length (transformers' generate_merges); control pieces are
// special added tokens, user-defined ones plain added tokens. Throws
// kInvalidInput naming the piece where one is longer than kMaxSpmPieceBytes
// (tokenizer_limits.h).
nlohmann::json llama_pipeline_from_sentencepiece(const SentencePieceModel& sp, const TokenizerChoice& c,
                                                 const LlamaSpecials& s);

// The top-level components of tokenizer.json ("normalizer", "pre_tokenizer",
// "decoder", "model options") that the LlamaTokenizer pipeline replaces by
// different ones, each with what tokenizer.json had, e.g.
// "normalizer (Sequence: Strip, Replace)". Empty when they agree.
std::vector<std::string> llama_replaced_components(const nlohmann::json& doc, const nlohmann::json& llama);

}  // namespace qloom::text
