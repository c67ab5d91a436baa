// tokenizer.json + tokenizer_config.json (+ chat_template.jinja) from a GGUF
// file's tokenizer.ggml.* metadata, built the way transformers' GGUF
// tokenizer loader builds them (AutoTokenizer.from_pretrained(dir,
// gguf_file=...) then save_pretrained):
//   - "gpt2": byte-level BPE; tokens respelled in the byte alphabet, the
//     file's merges, the pre-tokenizer split the file's tokenizer.ggml.pre
//     names (llama3 / qwen2 families) or plain ByteLevel;
//   - "llama": SentencePiece-style BPE with byte fallback and Metaspace; the
//     file's merges, or merges recovered from the token scores as
//     transformers recovers them.
// Control tokens (token_type 3) become special added tokens, user-defined
// ones (4) plain added tokens; add_bos / add_eos make the post-processor.
// Anything transformers would build differently from llama.cpp's tokenizer
// (an unknown pre-tokenizer, add_space_prefix false for SentencePiece, a
// tokenizer model other than these two) is kUnsupported naming the key.
#pragma once

#include <optional>
#include <string>

namespace qloom::io {
class GgufFile;
}

namespace qloom::model {

struct GgufTokenizerFiles {
  std::string tokenizer_json;            // tokenizer.json text
  std::string tokenizer_config_json;     // tokenizer_config.json text
  std::optional<std::string> chat_template;  // chat_template.jinja, when the file has one
};

GgufTokenizerFiles gguf_tokenizer_files(const io::GgufFile& file);

}  // namespace qloom::model
