// qloom inspect <model_dir> [--json]
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "qloom/cli/commands.h"
#include "qloom/core/error.h"
#include "qloom/cli/flags.h"
#include "qloom/cli/model_spec.h"
#include "qloom/io/model_dir.h"
#include "qloom/model/config_check.h"
#include "qloom/model/gguf_convert.h"
#include "qloom/model/gguf_inspect.h"
#include "qloom/model/inspect.h"
#include "qloom/text/tokenizer.h"

namespace qloom::cli {

namespace {

// The tokenizer qloom applies for `dir` (text::Tokenizer::load): null when it
// has no tokenizer files, {"error": ...} when they do not load.
nlohmann::ordered_json inspect_tokenizer_json(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json", ec) &&
      !std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.model", ec))
    return nullptr;
  try {
    const text::Tokenizer tok = text::Tokenizer::load(dir);
    const text::TokenizerChoice& c = tok.choice();
    return {{"applies", text::tokenizer_kind_name(c.kind)},
            {"file", c.file.filename().string()},
            {"hf_class", c.hf_class.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.hf_class)},
            {"why", c.why},
            {"tokenizer_json_not_applied", tok.replaced_components()},
            {"description", tok.describe()}};
  } catch (const Error& e) {
    return {{"error", e.message()}, {"file", e.file()}};
  }
}

// format_summary's text with an "encoding" row after the "tokenizer" row.
std::string inspect_with_encoding_row(std::string text, const nlohmann::ordered_json& tok) {
  std::string value = tok.is_null()             ? "none"
                      : tok.contains("error")   ? "cannot load: " + tok["error"].get<std::string>()
                                                : tok["description"].get<std::string>();
  const std::string row = "  encoding    " + value + "\n";
  const size_t at = text.find("\n  tokenizer ");
  const size_t end = at == std::string::npos ? std::string::npos : text.find('\n', at + 1);
  if (end == std::string::npos) return text + row;
  return text.insert(end + 1, row);
}

}  // namespace

void register_inspect(CLI::App& app, CommandFn& run) {
  struct Options {
    std::string model_dir;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "inspect", "Describe a HuggingFace model directory: architecture, layers, parameters "
                 "by dtype, tensors, shards, size, tokenizer files and the tokenizer qloom applies");
  sub->add_option("model_dir", opts->model_dir, "model directory (config.json + *.safetensors), a .gguf file, or hub id org/name[@revision]")
      ->required();
  sub->add_flag(flag_names("json"), opts->json, "print one JSON object instead of text");
  sub->callback([opts, &run] {
    run = [opts] {
      if (model::is_gguf_file(opts->model_dir)) {  // metadata only, never the tensor data
        const auto s = model::gguf_summary_json(opts->model_dir);
        std::cout << (opts->json ? s.dump(2) + "\n" : model::format_gguf_summary(s));
        return 0;
      }
      // A hub id downloads config.json only; its weights are summarized once cached.
      const std::string path = resolve_model_arg(opts->model_dir, io::HubFetch::kConfigOnly);
      const io::ModelDir dir = io::ModelDir::open(path);
      // The sizes against the tensors first (io/config_sizes.h), then the values, as every command.
      if (!dir.weight_files().empty()) (void)dir.weights();
      model::validate_config(dir.config(), (std::filesystem::path(path) / "config.json").string());
      if (path != opts->model_dir && dir.weight_files().empty()) {
        std::cout << (opts->json ? config_only_json(dir).dump(2) + "\n" : format_config_only(dir));
        return 0;
      }
      const model::ModelSummary s = model::summarize_model(dir);
      const nlohmann::ordered_json tok = inspect_tokenizer_json(path);
      if (opts->json) {
        nlohmann::ordered_json j = model::summary_to_json(s);
        j["tokenizer"] = tok;
        std::cout << j.dump(2) << "\n";
      } else {
        std::cout << inspect_with_encoding_row(model::format_summary(s), tok);
      }
      return 0;
    };
  });
}

}  // namespace qloom::cli
