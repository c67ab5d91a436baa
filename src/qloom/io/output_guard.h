// check_replaceable_output: what --overwrite may delete (issue 30 item 9:
// `--output_dir . --overwrite` removed the user's files). The exporters
// call it when their output directory exists and overwrite is set, before
// anything is written.
//
// Replaceable: an empty directory, or one holding a model checkpoint qloom
// could have written — a HuggingFace config.json (a JSON object with
// model_type or architectures: Quark hf_format, compressed-tensors, an HF
// model; its weights may be missing, as in a broken export the agent
// re-exports), or only *.gguf files (a gguf-only export); subdirectories
// only as qloom's multi-format layout (hf_format/, compressed-tensors/, each
// a checkpoint). Other top-level files are allowed: the exporters copy the
// source's auxiliary files (README.md, LICENSE, ...).
// Never: "/", the current directory, $HOME, or a directory that contains
// one of them (whatever it holds). The source model directory is guarded by
// exporter::check_output_location. Throws kUsage naming the directory,
// --output_dir and what is in the way.
#pragma once

#include <filesystem>

namespace qloom::io {

void check_replaceable_output(const std::filesystem::path& out_dir);

}  // namespace qloom::io
