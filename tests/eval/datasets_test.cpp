// Data set loading: the wikitext HF row rule, bundled files, errors.
#include <gtest/gtest.h>

#include <filesystem>

#include "qloom/eval/datasets.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::eval {
namespace {

TEST(DatasetsWikitext, RowsKeepNewlineBlankLinesBecomeEmpty) {
  // HF builder rows of " \n = A = \n \nText .\n": "", " = A = \n", "", "Text .\n".
  EXPECT_EQ(wikitext_hf_join(" \n = A = \n \nText .\n"), "\n\n = A = \n\n\n\n\nText .\n");
}

TEST(DatasetsWikitext, TabsAndSpacesOnlyAreBlankFinalLineWithoutNewlineIsARow) {
  EXPECT_EQ(wikitext_hf_join("a\n\t \nb"), "a\n\n\n\n\nb");  // rows "a\n", "", "b"
  EXPECT_EQ(wikitext_hf_join(""), "");
  EXPECT_EQ(wikitext_hf_join("x\n"), "x\n");  // no extra empty row after the final '\n'
  EXPECT_EQ(wikitext_hf_join("\n"), "");      // one blank row
  EXPECT_EQ(wikitext_hf_join("a\r\nb\rc"), "a\n\n\nb\n\n\nc");  // universal newlines
}

TEST(DatasetsWikitext, BundledTestSplitMatchesHfRowCount) {
  const TextDataset ds = load_text_dataset("wikitext2");
  // 4358 rows joined by "\n\n"; the first row (" \n") is empty.
  EXPECT_EQ(ds.text.rfind("\n\n = Robert Boulter = \n", 0), 0u);
  // Length: raw bytes, minus blank lines' bytes, plus 2 per separator.
  const std::string raw = read_text_file(bundled_file("wikitext-2-raw/wiki.test.raw"));
  size_t blank_bytes = 0, rows = 0, pos = 0;
  while (pos < raw.size()) {
    const size_t e = raw.find('\n', pos);
    const std::string line = raw.substr(pos, e - pos + 1);
    ++rows;
    if (line.find_first_not_of(" \t\n") == std::string::npos) blank_bytes += line.size();
    pos = e + 1;
  }
  EXPECT_EQ(rows, 4358u);
  EXPECT_EQ(ds.text.size(), raw.size() - blank_bytes + 2 * (rows - 1));
}

TEST(DatasetsBundled, TinyStoriesAndGsm8kPresent) {
  const TextDataset ts = load_text_dataset("tinystories");
  EXPECT_EQ(ts.text.size(), 807375u);
  EXPECT_EQ(ts.text.rfind("Spot. Spot saw the shiny car", 0), 0u);
  EXPECT_EQ(load_gsm8k_jsonl(bundled_file("gsm8k/test.jsonl")).size(), 1319u);
  const auto train = load_gsm8k_jsonl(bundled_file("gsm8k/train.jsonl"));
  ASSERT_EQ(train.size(), 7473u);
  EXPECT_NE(train[0].answer.find("#### "), std::string::npos);
}

TEST(DatasetsErrors, UnknownNameListsKnownOnes) {
  const Error e = test::catch_error([] { load_text_dataset("wikitext3"); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_NE(e.remedy().find("wikitext2, tinystories, gsm8k"), std::string::npos) << e.remedy();
}

TEST(DatasetsErrors, MissingFileIsNotFound) {
  const Error e = test::catch_error([] { load_text_dataset("/nonexistent/x.txt"); });
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  EXPECT_EQ(e.file(), "/nonexistent/x.txt");
}

TEST(DatasetsErrors, MissingBundledFileNamesExpectedPath) {
  const Error e = test::catch_error([] { bundled_file("wikitext-2-raw/wiki.train.raw"); });
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  EXPECT_NE(e.file().find("datasets/wikitext-2-raw/wiki.train.raw"), std::string::npos) << e.file();
}

TEST(DatasetsText, TxtFileIsOneDocument) {
  test::TempDir dir("ds");
  const auto p = dir.write("a.txt", "line one\n\nline two\n");
  EXPECT_EQ(load_text_dataset(p.string()).text, "line one\n\nline two\n");
}

TEST(DatasetsGsm8k, BadLineNamesFileAndLine) {
  test::TempDir dir("ds");
  const auto p = dir.write("q.jsonl", "{\"question\": \"a\", \"answer\": \"#### 1\"}\n\n{\"question\": 3}\n");
  const Error e = test::catch_error([&] { load_gsm8k_jsonl(p); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.item(), "line 3");
}

}  // namespace
}  // namespace qloom::eval
