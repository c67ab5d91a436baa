// The auto-recover fixes of seed 000 §6 that act on the quantized model
// directory (never on the source, which is only read):
//   #14 must_have_config_missing_or_invalid  config.json missing / not JSON /
//       without model_type or architectures -> the source's config, keeping
//       the quantized config's quantization_config when it has one;
//   #15 must_have_tokenizer_missing          no tokenizer file -> the
//       source's tokenizer files copied;
//   #19 should_have_aux_missing              every top-level non-weight file
//       of the source (except config.json) missing or different -> copied;
//   #17 must_validate_config_mismatch        config.json = the source's
//       config plus the quantized quantization_config.
// Each returns one line per change made (empty: nothing to do). Throws
// qloom::Error (kIo) when a copy fails.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace qloom::agent {

std::vector<std::string> repair_config(const std::filesystem::path& source, const std::filesystem::path& quantized);
std::vector<std::string> repair_tokenizer(const std::filesystem::path& source, const std::filesystem::path& quantized);
std::vector<std::string> repair_auxiliary(const std::filesystem::path& source, const std::filesystem::path& quantized);
std::vector<std::string> repair_config_mismatch(const std::filesystem::path& source,
                                                const std::filesystem::path& quantized);

}  // namespace qloom::agent
