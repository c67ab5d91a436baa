#include "qloom/job/quantize_args.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "support/expect_error.h"

namespace qloom::exporter {
namespace {

TEST(QuantizeArgs, ArgsParseBackToTheSameCommand) {
  job::QuantizeCommand c;
  c.options.model_dir = "/models/my model";
  c.options.output_dir = "/out/x";
  c.options.quant_scheme = "int4_wo_128";
  c.options.kv_cache_dtype = "fp8";
  c.options.layer_quant_scheme = {{"*self_attn*", "fp8"}, {"lm_head", "int8"}};
  c.options.exclude_layers = {"*mlp.down_proj", "model.layers.0.*"};
  c.options.quant_algo = "awq,gptq";
  c.options.algo_config_files = {{"awq", "/cfg/awq config.json"}, {"gptq", "/cfg/gptq.json"}};
  c.options.dataset = "/data/c.jsonl";
  c.options.num_calib_data = 64;
  c.options.seq_len = 256;
  c.options.threads = 2;
  c.options.overwrite = true;
  c.no_trust_remote_code = true;
  c.progress = "off";
  const auto args = job::quantize_args(c);
  const auto back = job::parse_quantize_args(args);
  EXPECT_EQ(job::quantize_args(back), args);
  EXPECT_EQ(back.options.model_dir, c.options.model_dir);
  EXPECT_EQ(back.options.layer_quant_scheme, c.options.layer_quant_scheme);
  EXPECT_EQ(back.options.exclude_layers, c.options.exclude_layers);
  EXPECT_EQ(back.options.algo_config_files, c.options.algo_config_files);
  EXPECT_EQ(back.options.num_calib_data, 64u);
  EXPECT_TRUE(back.options.overwrite);
  EXPECT_TRUE(back.no_trust_remote_code);
}

TEST(QuantizeArgs, AcceptsKebabCaseAndRefusesUnknownFlags) {
  const auto c = job::parse_quantize_args({"--model-dir", "m", "--output-dir", "o", "--quant-scheme", "fp8",
                                      "--num-calib-data", "8"});
  EXPECT_EQ(c.options.quant_scheme, "fp8");
  EXPECT_EQ(c.options.num_calib_data, 8u);
  const auto e = test::catch_error([] { job::parse_quantize_args({"--model_dir", "m", "--output_dir", "o", "--quant_scheme", "fp8", "--bogus", "1"}); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_NE(std::string(e.what()).find("bogus"), std::string::npos) << e.what();
  EXPECT_EQ(test::catch_error([] { job::parse_quantize_args({"--model_dir", "m"}); }).kind(), ErrorKind::kUsage);
}

// Quark's quantize_quark.py: --quant_algo_config_file ALGO_NAME CONFIG_FILE,
// action="append", nargs=2.
TEST(QuantizeArgs, QuantAlgoConfigFileTakesQuarksTwoValuesAndRepeats) {
  const auto c = job::parse_quantize_args({"--model_dir", "m", "--output_dir", "o", "--quant_scheme", "int4_wo_64",
                                      "--quant_algo", "gptq", "--quant_algo_config_file", "gptq", "f.json"});
  ASSERT_EQ(c.options.algo_config_files.size(), 1u);
  EXPECT_EQ(c.options.algo_config_files[0], (std::pair<std::string, std::string>{"gptq", "f.json"}));
  const auto two = job::parse_quantize_args({"--model_dir", "m", "--output_dir", "o", "--quant_scheme", "int4_wo_64",
                                        "--quant_algo", "awq,gptq", "--quant-algo-config-file", "awq", "a.json",
                                        "--quant_algo_config_file", "gptq", "g.json"});
  ASSERT_EQ(two.options.algo_config_files.size(), 2u);
  EXPECT_EQ(two.options.algo_config_files[0].first, "awq");
  EXPECT_EQ(two.options.algo_config_files[1].second, "g.json");
  // The pairs come back in the order given.
  const auto args = job::quantize_args(two);
  const auto at = std::find(args.begin(), args.end(), "--quant_algo_config_file");
  ASSERT_NE(at, args.end());
  EXPECT_EQ(*(at + 1), "awq");
  EXPECT_EQ(*(at + 2), "a.json");
  // ALGO without FILE is a usage error naming the flag.
  const auto e = test::catch_error([] {
    job::parse_quantize_args({"--model_dir", "m", "--output_dir", "o", "--quant_scheme", "fp8", "--quant_algo_config_file",
                         "gptq"});
  });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_NE(std::string(e.what()).find("quant_algo_config_file"), std::string::npos) << e.what();
}

TEST(QuantizeArgs, ShellQuoting) {
  EXPECT_EQ(job::shell_quote("plain/path-1.0"), "plain/path-1.0");
  EXPECT_EQ(job::shell_quote("a b"), "'a b'");
  EXPECT_EQ(job::shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(job::shell_quote(""), "''");
  EXPECT_EQ(job::shell_quote("*self_attn*"), "'*self_attn*'");
  EXPECT_EQ(job::shell_join({"qloom", "quantize", "--model_dir", "/a b"}), "qloom quantize --model_dir '/a b'");
}

}  // namespace
}  // namespace qloom::exporter
