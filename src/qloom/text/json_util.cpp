#include "qloom/text/json_util.h"

#include "qloom/core/error.h"
#include "qloom/io/json_read.h"

namespace qloom::text::json_util {

nlohmann::json parse_document(std::string_view text, const std::string& source) {
  io::JsonReadOptions opts;
  opts.reject_duplicate_keys = false;
  opts.max_depth = kMaxJsonDepth;
  opts.remedy = "restore the file from the model's original checkpoint";
  return io::parse_json_text(text, source, opts);
}

void bad_field(const std::string& source, const std::string& item, const std::string& message) {
  throw Error(ErrorKind::kInvalidInput, source, item, message,
              "check that the file is a tokenizer.json saved by HuggingFace tokenizers");
}

void unsupported(const std::string& source, const std::string& item, const std::string& message) {
  throw Error(ErrorKind::kUnsupported, source, item, message,
              "qloom's tokenizer handles the BPE pipelines of common causal LMs only");
}

}  // namespace qloom::text::json_util
