#include "qloom/text/json_util.h"

#include "qloom/core/error.h"

namespace qloom::text::json_util {

void bad_field(const std::string& source, const std::string& item, const std::string& message) {
  throw Error(ErrorKind::kInvalidInput, source, item, message,
              "check that the file is a tokenizer.json saved by HuggingFace tokenizers");
}

void unsupported(const std::string& source, const std::string& item, const std::string& message) {
  throw Error(ErrorKind::kUnsupported, source, item, message,
              "qloom's tokenizer handles the BPE pipelines of common causal LMs only");
}

}  // namespace qloom::text::json_util
