// Hostile tokenizer files (issue 30 items 5, 6, 9): regex searches that hit
// Oniguruma's limits, token ids that would size the id table, negative and
// non-integer ids, components that multiply text, oversized strings and
// nesting. Each is a qloom::Error naming the file and the field, never a
// silent change of the encoding, a crash or an allocation the size of an id.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "qloom/text/llama_pipeline.h"
#include "qloom/text/tokenizer.h"
#include "qloom/text/tokenizer_limits.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::text {
namespace {

using nlohmann::json;

// A byte-free BPE over a few letters: enough to encode and decode the tests' text.
json small_tokenizer() {
  return {{"model",
           {{"type", "BPE"},
            {"vocab", {{"<unk>", 0}, {"a", 1}, {"b", 2}, {"!", 3}, {" ", 4}, {"ab", 5}}},
            {"merges", json::array({"a b"})},
            {"unk_token", "<unk>"}}},
          {"added_tokens", json::array()}};
}

Error load_error(const json& j) {
  return test::catch_error([&] { Tokenizer::from_json(j.dump(), "hostile/tokenizer.json"); });
}

Error load_error_on_encode(const json& j, const std::string& text) {
  const Tokenizer tok = Tokenizer::from_json(j.dump(), "hostile/tokenizer.json");
  return test::catch_error([&] { tok.encode(text, false); });
}

bool has(const Error& e, const std::string& s) { return e.message().find(s) != std::string::npos; }

// ---- item 5: Oniguruma limits ---------------------------------------------

// (a|aa)+$ against "aaa...a!" backtracks exponentially: Oniguruma stops it at
// its retry limit, which HF tokenizers reports as an error.
const char* kCatastrophic = "(a|aa)+$";
std::string catastrophic_text() {
  std::string t(40, 'a');
  t += '!';
  return t;
}

TEST(TokenizerRegexLimit, SplitPreTokenizerRaisesNamingPatternAndPosition) {
  json j = small_tokenizer();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", kCatastrophic}}}, {"behavior", "Isolated"}};
  const Tokenizer tok = Tokenizer::from_json(j.dump(), "hostile/tokenizer.json");
  EXPECT_EQ(tok.encode("aaaa", false), (std::vector<int32_t>{1, 1, 1, 1}));  // matches normally
  const std::string text = "b " + catastrophic_text();
  const Error e = test::catch_error([&] { tok.encode(text, false); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.file(), "hostile/tokenizer.json");
  EXPECT_EQ(e.item(), "pre_tokenizer.pattern");
  EXPECT_TRUE(has(e, kCatastrophic)) << e.message();
  EXPECT_TRUE(has(e, "from byte 0 of a 43-byte text")) << e.message();
  EXPECT_TRUE(has(e, "10000000 backtracking steps")) << e.message();
}

TEST(TokenizerRegexLimit, ReplaceNormalizerRaisesAndLongPatternsAreTruncated) {
  json j = small_tokenizer();
  const std::string pattern = std::string(kCatastrophic) + "|" + std::string(200, 'q');
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", pattern}}}, {"content", "b"}};
  const Tokenizer tok = Tokenizer::from_json(j.dump(), "hostile/tokenizer.json");
  const Error e = test::catch_error([&] { tok.encode(catastrophic_text(), false); });
  EXPECT_EQ(e.item(), "normalizer.pattern");
  EXPECT_TRUE(has(e, "(a|aa)+$|qqq")) << e.message();
  EXPECT_FALSE(has(e, pattern)) << "the pattern is shown truncated";
  std::string size_note = "(";
  size_note += std::to_string(pattern.size());
  size_note += " bytes)";
  EXPECT_TRUE(has(e, size_note)) << e.message();
}

// ---- items 6 and 9: token ids ---------------------------------------------

TEST(TokenizerIdLimits, HugeVocabIdsAreRejectedBeforeAllocating) {
  for (const int64_t id : {int64_t{400'000'000}, int64_t{2'147'483'647}, int64_t{1} << 40}) {
    json j = small_tokenizer();
    j["model"]["vocab"]["zz"] = id;
    const Error e = load_error(j);
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_EQ(e.file(), "hostile/tokenizer.json");
    EXPECT_EQ(e.item(), "model.vocab");
    EXPECT_TRUE(has(e, "token \"zz\" has id " + std::to_string(id))) << e.message();
  }
}

TEST(TokenizerIdLimits, IdsMayLeaveGapsUpToTheSlack) {
  // 7 vocab entries: ids below 7 + 65,536 load, the next one does not.
  json j = small_tokenizer();
  j["model"]["vocab"]["zz"] = 7 + kTokenIdSlack - 1;
  const Tokenizer tok = Tokenizer::from_json(j.dump());
  EXPECT_EQ(tok.id_to_token(7 + kTokenIdSlack - 1), "zz");
  j["model"]["vocab"]["zz"] = 7 + kTokenIdSlack;
  std::string beyond = "beyond this tokenizer's id limit of ";
  beyond += std::to_string(7 + kTokenIdSlack);
  EXPECT_TRUE(has(load_error(j), beyond));
  EXPECT_EQ(token_id_limit(int64_t{1} << 30), kMaxTokenId);
}

TEST(TokenizerIdLimits, AddedTokenIdsAreCheckedEvenWhenTheVocabHasTheToken) {
  const json cases[] = {{{"id", -5}, {"content", "ab"}},        // in the vocab: its id was used
                        {{"id", -5}, {"content", "<new>"}},
                        {{"id", 400'000'000}, {"content", "<big>"}},
                        {{"id", 1.5}, {"content", "<half>"}},     // was truncated to 1
                        {{"id", "7"}, {"content", "<text>"}}};
  for (const json& t : cases) {
    json j = small_tokenizer();
    j["added_tokens"].push_back(t);
    const Error e = load_error(j);
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << t.dump();
    EXPECT_EQ(e.item(), "added_tokens[0].id") << t.dump();
    EXPECT_TRUE(has(e, "token \"" + t["content"].get<std::string>() + "\" has")) << e.message();
  }
}

// HF tokenizers 0.23 loads a vocab {a: 0, b: 1, c: 1}: "abc" encodes to
// [0, 1, 1] and id 1 decodes to one of b / c. qloom does the same, decoding to
// the first in key order.
TEST(TokenizerIdLimits, TwoVocabTokensWithOneIdEncodeAlikeAndDecodeStably) {
  json j = small_tokenizer();
  j["model"]["vocab"]["zz"] = 3;
  const Tokenizer tok = Tokenizer::from_json(j.dump(), "dup/tokenizer.json");
  EXPECT_EQ(tok.token_to_id("zz"), 3);
  EXPECT_EQ(tok.token_to_id("!"), 3);
  EXPECT_EQ(tok.id_to_token(3), "!");
}

TEST(TokenizerIdLimits, PostProcessorIdsAreChecked) {
  json j = small_tokenizer();
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                                 {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {-5}}, {"tokens", {"<s>"}}}}}}};
  Error e = load_error(j);
  EXPECT_EQ(e.item(), "post_processor.special_tokens.<s>.ids");
  EXPECT_TRUE(has(e, "negative id")) << e.message();

  j["post_processor"] = {{"type", "RobertaProcessing"}, {"cls", {"<s>", 400'000'000}}, {"sep", {"</s>", 2}}};
  e = load_error(j);
  EXPECT_EQ(e.item(), "post_processor.cls");

  // One special token of 3,000 ids named twice: 6,000 ids around every sequence.
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", json::array({{{"SpecialToken", {{"id", "x"}}}}, {{"SpecialToken", {{"id", "x"}}}}})},
                         {"special_tokens", {{"x", {{"id", "x"}, {"ids", std::vector<int>(3000, 1)}}}}}};
  e = load_error(j);
  EXPECT_EQ(e.item(), "post_processor.single[1]");
  EXPECT_TRUE(has(e, std::to_string(kMaxPostProcessorIds))) << e.message();
}

TEST(TokenizerIdLimits, AddedTokensDecoderKeysAreWholeIdsBelowTheCap) {
  for (const char* key : {"-5", "12abc", "16777216", "99999999999999999999"}) {
    const json cfg = {{"added_tokens_decoder", {{key, {{"content", "<x>"}}}}}};
    const Error e = test::catch_error([&] { llama_specials(cfg, "hostile/tokenizer_config.json"); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << key;
    EXPECT_EQ(e.item(), std::string("added_tokens_decoder.") + key);
  }
  const json ok = {{"added_tokens_decoder", {{"16777215", {{"content", "<x>"}}}}}};
  EXPECT_EQ(llama_specials(ok, "tokenizer_config.json").added[0]["id"], 16777215);
}

// ---- item 6: sizes and growth ---------------------------------------------

TEST(TokenizerSizeLimits, OversizedTokenStringsAreRejected) {
  const std::string huge(kMaxTokenBytes + 1, 'q');
  json j = small_tokenizer();
  j["model"]["vocab"][huge] = 6;
  Error e = load_error(j);
  EXPECT_EQ(e.item(), "model.vocab");
  EXPECT_TRUE(has(e, "longer than the limit of 65536 bytes")) << e.message();
  EXPECT_LT(e.message().size(), 400u) << "the token is shown truncated";

  j = small_tokenizer();
  j["added_tokens"].push_back({{"id", 6}, {"content", huge}});
  EXPECT_EQ(load_error(j).item(), "added_tokens[0].content");

  // Many tokens that are each allowed but together exceed 1 MiB.
  j = small_tokenizer();
  for (int k = 0; k < 20; ++k) {
    j["added_tokens"].push_back({{"id", 6 + k}, {"content", std::to_string(k) + std::string(60'000, 'q')}});
  }
  e = load_error(j);
  EXPECT_EQ(e.item(), "added_tokens[17]");
}

TEST(TokenizerSizeLimits, NormalizedAddedTokensAreBoundedAfterNormalizing) {
  // 100 short normalized tokens that a Replace normalizer makes ~30 KB each.
  json j = small_tokenizer();
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", std::string(1000, 'b')}};
  for (int k = 0; k < 100; ++k) {
    j["added_tokens"].push_back({{"id", 6 + k}, {"content", std::string(30, 'a') + std::to_string(k)},
                                 {"normalized", true}});
  }
  const Error e = load_error(j);
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.item(), "added_tokens[69]");
  EXPECT_TRUE(has(e, "normalized, exceed 2097152 bytes")) << e.message();
  // The same tokens unnormalized are small and load.
  for (json& t : j["added_tokens"]) t["normalized"] = false;
  EXPECT_EQ(Tokenizer::from_json(j.dump()).vocab_size(), 106);
}

// A protobuf SentencePiece message (piece, score, type NORMAL) as ModelProto's
// field 1: appended to a tokenizer.model it becomes its last piece.
std::string spm_piece_record(const std::string& piece) {
  const auto varint = [](size_t v) {
    std::string out;
    for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7F) | 0x80);
    out += static_cast<char>(v);
    return out;
  };
  std::string msg(1, '\x0A');
  msg += varint(piece.size());
  msg += piece;
  msg.append("\x15\x00\x00\x80\xBF", 5);  // score -1.0f
  msg.append("\x18\x01", 2);                // type NORMAL
  std::string record(1, '\x0A');
  record += varint(msg.size());
  record += msg;
  return record;
}

TEST(TokenizerSizeLimits, OversizedSentencePiecePiecesAreRejected) {
  const std::filesystem::path demo = QLOOM_DEMO_MODEL_DIR;
  for (const size_t len : {kMaxSpmPieceBytes, kMaxSpmPieceBytes + 1}) {
    test::TempDir dir("tok-spm-long");
    std::string model = test::read_file(demo / "tokenizer.model");
    model += spm_piece_record(std::string(len, 'q'));
    dir.write("tokenizer.model", model);
    dir.write("tokenizer_config.json", test::read_file(demo / "tokenizer_config.json"));
    if (len == kMaxSpmPieceBytes) {
      EXPECT_EQ(Tokenizer::load(dir.path()).vocab_size(), 513);
      continue;
    }
    const Error e = test::catch_error([&] { Tokenizer::load(dir.path()); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_EQ(std::filesystem::path(e.file()).filename(), "tokenizer.model");
    EXPECT_EQ(e.item(), "pieces[512]");
    EXPECT_TRUE(has(e, "longer than the limit of 1024 bytes")) << e.message();
  }
}

TEST(TokenizerGrowthLimits, ReplaceNormalizerThatMultipliesTextIsNamed) {
  json j = small_tokenizer();
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", json::array({{{"type", "NFC"}},
                                                  {{"type", "Replace"},
                                                   {"pattern", {{"String", "a"}}},
                                                   {"content", std::string(1000, 'b')}}})}};
  const Tokenizer tok = Tokenizer::from_json(j.dump(), "hostile/tokenizer.json");
  EXPECT_EQ(tok.encode("a", false).size(), 1000u);  // 1 KB from 1 byte: within 64 x n + 64 KiB
  const Error e = test::catch_error([&] { tok.encode(std::string(1000, 'a'), false); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.file(), "hostile/tokenizer.json");
  EXPECT_EQ(e.item(), "normalizer.normalizers[1]");
  EXPECT_TRUE(has(e, "Replace normalizer would grow 1000 bytes of text to")) << e.message();
  EXPECT_TRUE(has(e, "over the limit of 129536")) << e.message();
}

TEST(TokenizerGrowthLimits, RepeatedPrependsAreBoundedByTheOriginalInput) {
  // Each step alone is small; the limit applies to the whole chain.
  json list = json::array();
  for (int k = 0; k < 100; ++k) list.push_back({{"type", "Prepend"}, {"prepend", std::string(1000, 'b')}});
  json j = small_tokenizer();
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", list}};
  const Error e = load_error_on_encode(j, "a");
  EXPECT_EQ(e.item(), "normalizer.normalizers[65]");
  EXPECT_TRUE(has(e, "Prepend normalizer")) << e.message();
}

TEST(TokenizerGrowthLimits, RealisticGrowthPasses) {
  // NFKC of U+FDFA (3 bytes -> 33) then spaces -> U+2581: the largest real expansions.
  json j = small_tokenizer();
  j["model"]["vocab"]["\xE2\x96\x81"] = 6;
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", json::array({{{"type", "NFKC"}},
                                                  {{"type", "Replace"},
                                                   {"pattern", {{"String", " "}}},
                                                   {"content", "\xE2\x96\x81"}},
                                                  {{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}}})}};
  const Tokenizer tok = Tokenizer::from_json(j.dump());
  std::string text;
  for (int k = 0; k < 20'000; ++k) text += "\xEF\xB7\xBA";
  EXPECT_FALSE(tok.encode(text, false).empty());
}

TEST(TokenizerGrowthLimits, ReplaceDecoderThatMultipliesTextIsNamed) {
  json j = small_tokenizer();
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", json::array({{{"type", "Replace"},
                                             {"pattern", {{"String", "a"}}},
                                             {"content", std::string(1000, 'b')}},
                                            {{"type", "Fuse"}}})}};
  const Tokenizer tok = Tokenizer::from_json(j.dump(), "hostile/tokenizer.json");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{1, 2}), std::string(1000, 'b') + "b");
  const Error e = test::catch_error([&] { tok.decode(std::vector<int32_t>(200, 1)); });
  EXPECT_EQ(e.item(), "decoder.decoders[0]");
  EXPECT_TRUE(has(e, "Replace decoder would grow 200 bytes")) << e.message();
}

TEST(TokenizerNesting, DeepSequencesAreRejectedNotRecursedInto) {
  // Written as text: 20,000 nested Sequence normalizers.
  std::string n;
  for (int k = 0; k < 20'000; ++k) n += R"({"type": "Sequence", "normalizers": [)";
  n += R"({"type": "Lowercase"})";
  for (int k = 0; k < 20'000; ++k) n += "]}";
  std::string text = small_tokenizer().dump();
  text.insert(text.size() - 1, R"(, "normalizer": )" + n);
  const Error e = test::catch_error([&] { Tokenizer::from_json(text, "hostile/tokenizer.json"); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.file(), "hostile/tokenizer.json");
  EXPECT_TRUE(has(e, "nested more than 64")) << e.message();
}

}  // namespace
}  // namespace qloom::text
