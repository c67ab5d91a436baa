// qloom inspect <model_dir> [--json]
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "qloom/cli/commands.h"
#include "qloom/cli/flags.h"
#include "qloom/cli/model_spec.h"
#include "qloom/io/model_dir.h"
#include "qloom/model/gguf_convert.h"
#include "qloom/model/gguf_inspect.h"
#include "qloom/model/inspect.h"

namespace qloom::cli {

void register_inspect(CLI::App& app, CommandFn& run) {
  struct Options {
    std::string model_dir;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "inspect", "Describe a HuggingFace model directory: architecture, layers, parameters "
                 "by dtype, tensors, shards, size, tokenizer files");
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
      if (path != opts->model_dir && dir.weight_files().empty()) {
        std::cout << (opts->json ? config_only_json(dir).dump(2) + "\n" : format_config_only(dir));
        return 0;
      }
      const model::ModelSummary s = model::summarize_model(dir);
      if (opts->json)
        std::cout << model::summary_to_json(s).dump(2) << "\n";
      else
        std::cout << model::format_summary(s);
      return 0;
    };
  });
}

}  // namespace qloom::cli
