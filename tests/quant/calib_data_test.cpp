// Calibration samples (quant/calib_data.h): a sample is one document,
// tokenized alone and truncated to seq_len (Quark's pileval / wikitext
// loaders), and a named set means exactly the same samples as its file.
#include "qloom/quant/calib_data.h"

#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "qloom/text/tokenizer.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::quant {
namespace {

namespace fs = std::filesystem;

CalibrationData load(const std::string& dataset, uint64_t n, uint64_t seq_len) {
  CalibrationRequest r;
  r.dataset = dataset;
  r.num_samples = n;
  r.seq_len = seq_len;
  return load_calibration_data(QLOOM_DEMO_MODEL_DIR, r);
}

const fs::path kC4File = fs::path(QLOOM_SOURCE_DIR) / "data/datasets/calibration/c4.utf8";

TEST(CalibData, NamedSetAndItsFileGiveIdenticalTokenIds) {
  const CalibrationData named = load("c4", 64, 256);
  const CalibrationData file = load(kC4File.string(), 64, 256);
  const CalibrationData by_default = load("", 64, 256);
  ASSERT_EQ(named.samples.size(), 64u);
  EXPECT_EQ(named.samples, file.samples);
  EXPECT_EQ(named.samples, by_default.samples);
  EXPECT_EQ(named.tokens, file.tokens);
  EXPECT_EQ(fs::canonical(named.source), fs::canonical(kC4File));
}

TEST(CalibData, EachSampleIsOneDocumentCutToSeqLen) {
  const auto tok = text::Tokenizer::load(QLOOM_DEMO_MODEL_DIR);
  const std::vector<std::string> docs = calibration_documents(kC4File);
  ASSERT_EQ(docs.size(), 118u);  // exllamav2's c4 sample: 118 documents, one per line
  const CalibrationData d = load("c4", 64, 256);
  size_t shorter = 0;
  for (size_t i = 0; i < d.samples.size(); ++i) {
    std::vector<int32_t> want = tok.encode(docs[i], true);
    if (want.size() > 256) want.resize(256);
    else ++shorter;
    EXPECT_EQ(d.samples[i], want) << "sample " << i;
  }
  EXPECT_GT(shorter, 0u) << "no document shorter than seq_len: the test shows nothing about short samples";
  EXPECT_LT(d.tokens, 64u * 256u);
}

TEST(CalibData, TextLinesAndJsonlTextsAreTheSameDocuments) {
  test::TempDir tmp("calib");
  std::string long_line;
  for (int i = 0; i < 60; ++i) long_line += "the cat sat on the mat and looked at the dog. ";
  const fs::path txt = tmp.write("d.txt", "A short line.\n\n   \r\n" + long_line + "\r\nThe last one.");
  const fs::path jsonl = tmp.write("d.jsonl", "{\"text\": \"A short line.\"}\n\n{\"text\": \"" + long_line +
                                                 "\"}\n{\"text\": \"The last one.\"}\n");
  const auto tok = text::Tokenizer::load(QLOOM_DEMO_MODEL_DIR);
  const CalibrationData t = load(txt.string(), 10, 32);
  ASSERT_EQ(t.samples.size(), 3u);  // blank lines are no documents
  EXPECT_EQ(t.samples[0], tok.encode("A short line.", true));
  EXPECT_LT(t.samples[0].size(), 32u);
  EXPECT_EQ(t.samples[1].size(), 32u);  // truncated, not split into windows
  EXPECT_EQ(t.samples[2], tok.encode("The last one.", true));
  ASSERT_EQ(t.notes.size(), 1u);  // 10 asked, 3 documents
  EXPECT_NE(t.notes[0].find("3"), std::string::npos) << t.notes[0];
  EXPECT_EQ(load(jsonl.string(), 10, 32).samples, t.samples);
  // The first num_samples documents, in order.
  const CalibrationData two = load(txt.string(), 2, 32);
  EXPECT_EQ(two.samples, std::vector<std::vector<int32_t>>(t.samples.begin(), t.samples.begin() + 2));
  EXPECT_TRUE(two.notes.empty());

  // One long line is one document: one sample, not seq_len windows.
  const CalibrationData one = load(tmp.write("one.txt", long_line).string(), 8, 32);
  ASSERT_EQ(one.samples.size(), 1u);
  EXPECT_EQ(one.samples[0].size(), 32u);
}

TEST(CalibData, QuarkNamesFromADataDirOrAnErrorListingThePlacesLooked) {
  test::TempDir tmp("calib-named");
  ::setenv("QLOOM_DATA_DIR", tmp.path().c_str(), 1);
  const Error e = test::catch_error([] { load("pileval", 2, 16); });
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  const std::string msg = e.what();
  EXPECT_NE(msg.find((tmp / "datasets/calibration/pileval.jsonl").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find((tmp / "calibration/pileval.jsonl").string()), std::string::npos) << msg;
  tmp.write("datasets/calibration/pileval.jsonl", "{\"text\": \"One.\"}\n{\"text\": \"Two.\"}\n");
  const CalibrationData d = load("pileval", 2, 16);
  ::unsetenv("QLOOM_DATA_DIR");
  EXPECT_EQ(d.samples.size(), 2u);
  EXPECT_EQ(fs::path(d.source), tmp / "datasets/calibration/pileval.jsonl");
}

}  // namespace
}  // namespace qloom::quant
