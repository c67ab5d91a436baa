// `qloom inspect` as a user runs it: output, JSON, and exit code 2 with a
// message naming the culprit for every kind of bad input.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace qloom {
namespace {

namespace fs = std::filesystem;
using test::run_qloom;

// A copy of the demo model in a temp dir, for breaking it.
fs::path copy_demo(const fs::path& where) {
  const fs::path dst = where / "model";
  fs::copy(QLOOM_DEMO_MODEL_DIR, dst, fs::copy_options::recursive);
  return dst;
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A safetensors file whose 8-byte length prefix says `declared_len` (defaults
// to the header's real length), followed by the header and zeroed data.
std::string safetensors_bytes(const std::string& header, size_t data_bytes,
                              uint64_t declared_len = UINT64_MAX) {
  const uint64_t n = declared_len == UINT64_MAX ? header.size() : declared_len;
  std::string out;
  out.reserve(8 + header.size() + data_bytes);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  out.append(header);
  out.append(data_bytes, '\0');
  return out;
}

TEST(InspectCli, PrintsTheDemoModelFacts) {
  const auto r = run_qloom({"inspect", QLOOM_DEMO_MODEL_DIR});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("llama (LlamaForCausalLM)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("260,032"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("47 in 1 shard"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokenizer.json"), std::string::npos) << r.out;
  // The demo ships tokenizer.model: qloom tokenizes as transformers 5's AutoTokenizer.
  EXPECT_NE(r.out.find("\n  encoding    transformers 5 LlamaTokenizer over tokenizer.json's vocabulary"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("tokenizer.json's encoding differs, its normalizer (Sequence: Strip, Replace) not applied"),
            std::string::npos)
      << r.out;
}

TEST(InspectCli, EncodingRowNamesTokenizerJsonOrTheError) {
  test::TempDir tmp("inspect-tok");
  const fs::path m = copy_demo(tmp.path());
  fs::remove(m / "tokenizer.model");
  auto r = run_qloom({"inspect", m.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\n  encoding    tokenizer.json\n"), std::string::npos) << r.out;
  write_file(m / "tokenizer_config.json", "[1]");
  r = run_qloom({"inspect", m.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NE(j["tokenizer"]["file"].get<std::string>().find("tokenizer_config.json"), std::string::npos) << j;
  EXPECT_EQ(j["tokenizer"]["error"], "expected a JSON object");
}

TEST(InspectCli, JsonHasTheDocumentedKeys) {
  const auto r = run_qloom({"inspect", QLOOM_DEMO_MODEL_DIR, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model_type"], "llama");
  EXPECT_EQ(j["architectures"], nlohmann::json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(j["num_hidden_layers"], 5);
  EXPECT_EQ(j["hidden_size"], 64);
  EXPECT_EQ(j["parameters"], 260032);
  EXPECT_EQ(j["parameters_by_dtype"]["BF16"], 260032);
  EXPECT_EQ(j["tensors"], 47);
  EXPECT_EQ(j["shards"], nlohmann::json::array({"model.safetensors"}));
  EXPECT_GT(j["size_bytes"].get<uint64_t>(), 524960u);
  EXPECT_EQ(j["tokenizer_files"].size(), 4u);
  EXPECT_EQ(j["tokenizer"]["applies"], "llama_pipeline");
  EXPECT_EQ(j["tokenizer"]["file"], "tokenizer.json");
  EXPECT_EQ(j["tokenizer"]["hf_class"], "LlamaTokenizer");
  EXPECT_EQ(j["tokenizer"]["tokenizer_json_not_applied"],
            nlohmann::json::array({"normalizer (Sequence: Strip, Replace)"}));
}

TEST(InspectCli, HelpAndUsageErrors) {
  EXPECT_EQ(run_qloom({"--help"}).exit_code, 0);
  EXPECT_EQ(run_qloom({"inspect", "--help"}).exit_code, 0);
  EXPECT_EQ(run_qloom({}).exit_code, 2);
  EXPECT_EQ(run_qloom({"inspect"}).exit_code, 2);
  EXPECT_EQ(run_qloom({"inspect", QLOOM_DEMO_MODEL_DIR, "--no-such-flag"}).exit_code, 2);
  EXPECT_EQ(run_qloom({"frobnicate"}).exit_code, 2);
}

struct BadInput {
  const char* name;
  // Breaks the model copy in `dir`; returns the text the error must contain.
  std::string (*breakit)(const fs::path& dir);
};

const BadInput kBadInputs[] = {
    {"missing_dir", [](const fs::path& d) {
       fs::remove_all(d);
       return std::string("model");
     }},
    {"no_config", [](const fs::path& d) {
       fs::remove(d / "config.json");
       return std::string("config.json");
     }},
    {"garbage_config", [](const fs::path& d) {
       write_file(d / "config.json", "{\"model_type\": \"llama\",, }");
       return std::string("config.json");
     }},
    {"truncated_weights", [](const fs::path& d) {
       fs::resize_file(d / "model.safetensors", 300000);
       return std::string("truncated");
     }},
    {"header_beyond_file", [](const fs::path& d) {
       write_file(d / "model.safetensors", safetensors_bytes("{}", 0, 255));
       return std::string("model.safetensors");
     }},
    {"garbage_header", [](const fs::path& d) {
       write_file(d / "model.safetensors", safetensors_bytes("{not json}", 0));
       return std::string("model.safetensors");
     }},
    {"unknown_dtype", [](const fs::path& d) {
       write_file(d / "model.safetensors",
                  safetensors_bytes(R"({"w":{"dtype":"F7","shape":[2],"data_offsets":[0,2]}})", 2));
       return std::string("F7");
     }},
    {"shape_offset_mismatch", [](const fs::path& d) {
       write_file(d / "model.safetensors",
                  safetensors_bytes(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8));
       return std::string("w");
     }},
    {"overlapping_tensors", [](const fs::path& d) {
       write_file(d / "model.safetensors",
                  safetensors_bytes(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                    R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})", 6));
       return std::string("overlap");
     }},
    {"index_missing_shard", [](const fs::path& d) {
       fs::rename(d / "model.safetensors", d / "model-00001-of-00002.safetensors");
       write_file(d / "model.safetensors.index.json",
                  R"({"metadata":{"total_size":0},"weight_map":{"model.norm.weight":"model-00002-of-00002.safetensors"}})");
       return std::string("model-00002-of-00002.safetensors");
     }},
};

void PrintTo(const BadInput& b, std::ostream* os) { *os << b.name; }

class InspectBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(InspectBadInput, ExitsTwoNamingTheCulprit) {
  test::TempDir tmp;
  const fs::path dir = copy_demo(tmp.path());
  const std::string must_mention = GetParam().breakit(dir);
  const auto r = run_qloom({"inspect", dir.string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(must_mention), std::string::npos) << "stderr: " << r.err;
  EXPECT_NE(r.err.find("error"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

INSTANTIATE_TEST_SUITE_P(All, InspectBadInput, ::testing::ValuesIn(kBadInputs),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(InspectCli, NeverWritesIntoTheModelDir) {
  test::TempDir tmp;
  const fs::path dir = copy_demo(tmp.path());
  auto listing = [&] {
    std::vector<std::pair<std::string, uintmax_t>> v;
    for (const auto& e : fs::directory_iterator(dir)) v.emplace_back(e.path().filename(), e.file_size());
    std::sort(v.begin(), v.end());
    return v;
  };
  const auto before = listing();
  const auto mtime = fs::last_write_time(dir);
  ASSERT_EQ(run_qloom({"inspect", dir.string(), "--json"}).exit_code, 0);
  EXPECT_EQ(listing(), before);
  EXPECT_EQ(fs::last_write_time(dir), mtime);
}

}  // namespace
}  // namespace qloom
