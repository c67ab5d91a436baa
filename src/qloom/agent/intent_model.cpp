// Model, output directory and hardware/priority passes of the intent parser.
//
// Model / output rules:
//   - A path, Hub id or quoted string after an output cue ("save to",
//     "write it to", "output dir", "--output_dir", "export into", ...) is the
//     output directory; a second path after "to"/"into" once the model is
//     known is the output too (inferred).
//   - Otherwise the first Hub id (org/name) is the model (kind "hub"), a path
//     (/abs, ./rel, ~/x, a/b/c) a local model (kind "local"). Data files
//     (.jsonl, .txt, ...) are left to the calibration / metric passes.
//   - "the bundled model", "the demo (model)", "built-in / sample / toy model",
//     "stories260K" or the demo directory's name -> "demo"
//     (ctx.demo_model_dir); a known
//     local directory's name -> that directory.
//   - A model family name without an org ("Llama-3.1-8B", "qwen 2.5 7b") is
//     recorded (kind "name") with a question: the Hub id cannot be guessed.
//   - Two different models without a correction cue -> question.
#include <algorithm>
#include <filesystem>
#include <regex>

#include "qloom/agent/intent_internal.h"
#include "qloom/agent/intent_lexicon.h"
#include "qloom/io/data_files.h"

namespace qloom::agent::detail {
namespace {

bool output_cue(std::string_view n) {
  return in(n, {"save", "saved", "saving", "write", "writing", "written", "output", "output_dir", "outdir", "out_dir",
                "output_path", "export", "exported", "exporting", "store", "stored", "storing", "put", "place", "dest",
                "destination", "drop", "outputs"});
}

bool output_filler(std::string_view n) {
  return in(n, {"it", "the", "result", "results", "quantized", "model", "models", "checkpoint", "weights", "to", "into",
                "in", "under", "at", "as", "a", "an", "new", "dir", "directory", "folder", "them", "is", "my", "our",
                "its", "final", "files", "path", "should", "go", "be", "please"});
}

// An output cue within 6 tokens before i, only fillers between.
bool after_output_cue(const ParseState& st, size_t i) {
  bool prep = false;  // "export to X" is an output; "export X" exports model X
  for (size_t back = 1; back <= 6 && i >= back; ++back) {
    const std::string& n = st.tok[i - back].norm;
    if (output_cue(n)) return prep || !in(n, {"export", "exported", "exporting"});
    if (!output_filler(n)) return false;
    prep = prep || in(n, {"to", "into", "in", "under", "at"});
  }
  return false;
}

std::string basename_of(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

// Adds a --model_export format the prompt names (once).
void add_export(Intent& out, const std::string& format, const std::string& reason) {
  auto& v = out.model_export.value;
  if (std::find(v.begin(), v.end(), format) != v.end()) return;
  v.push_back(format);
  out.model_export.source = Source::kStated;
  out.reasons["model_export"] = out.reasons.count("model_export") ? out.reasons["model_export"] + "; " + reason : reason;
}

struct ModelMention {
  std::string value, kind, path;
  size_t at;
  bool correction;
};

}  // namespace

void pass_model_and_output(ParseState& st) {
  Intent& out = st.out;
  std::vector<ModelMention> models;
  std::vector<std::pair<std::string, Source>> outputs;
  for (size_t i = 0; i < st.size(); ++i) {
    const Token& t = st.tok[i];
    const bool pathish = t.kind == TokKind::kPath || t.kind == TokKind::kHubId || t.kind == TokKind::kQuoted;
    // "output dir qwen_fp8": a bare word right after an explicit output-dir flag.
    const bool flag_before = i >= 1 && (in(st.n(i - 1), {"output_dir", "out_dir", "outdir", "output_path"}) ||
                                        (i >= 2 && st.n(i - 2) == "output" && in(st.n(i - 1), {"dir", "directory", "folder"})));
    if ((pathish || (flag_before && t.kind == TokKind::kWord)) && after_output_cue(st, i) && !is_data_file(t.text)) {
      outputs.emplace_back(t.text, Source::kStated);
      st.use(i);
      continue;
    }
    if (t.kind == TokKind::kQuoted) continue;  // a quoted phrase that is no path
    if (t.kind == TokKind::kHubId || (t.kind == TokKind::kPath && !is_data_file(t.text))) {
      if (!models.empty() && i >= 1 && in(st.n(i - 1), {"to", "into", "under"}) && outputs.empty()) {
        outputs.emplace_back(t.text, Source::kInferred);
        st.use(i);
        continue;
      }
      const bool corr = !models.empty() && st.correction_in(models.back().at + 1, i);
      models.push_back({t.text, t.kind == TokKind::kHubId ? "hub" : "local", t.kind == TokKind::kHubId ? "" : t.text, i, corr});
      st.use(i);
    }
  }
  // Demo model and context-known directories.
  const std::string demo_name = lower_ascii(basename_of(st.ctx.demo_model_dir));
  for (size_t i = 0; i < st.size(); ++i) {
    if (!st.free(i) || st.tok[i].kind != TokKind::kWord) continue;
    const std::string& n = st.n(i);
    const std::string low = lower_ascii(st.tok[i].text);
    const bool demo_word = in(n, {"bundled", "demo", "builtin", "built_in", "toy", "sample", "example", "shipped"});
    const bool demo = (n == "bundled" || n == "built_in" || n == "builtin") ||
                      (demo_word && in(st.n(i + 1), {"model", "checkpoint", "llm", "stories260k"})) ||
                      (n == "demo" && (st.is(i - 1, "the") || st.is(i - 1, "our"))) || n == "stories260k" ||
                      (!demo_name.empty() && low == demo_name);
    if (demo) {
      const bool corr = !models.empty() && st.correction_in(models.back().at + 1, i);
      models.push_back({"demo", "demo", st.ctx.demo_model_dir, i, corr});
      st.use(i);
      if (st.is(i + 1, "model")) st.use(i + 1);
      continue;
    }
    for (const auto& dir : st.ctx.local_model_dirs) {
      if (lower_ascii(basename_of(dir)) == low) {
        const bool corr = !models.empty() && st.correction_in(models.back().at + 1, i);
        models.push_back({dir, "local", dir, i, corr});
        st.use(i);
        st.note("'" + st.tok[i].text + "' resolved to the local model directory " + dir);
        break;
      }
    }
  }
  // Pick the model.
  const ModelMention* win = nullptr;
  bool conflict = false;
  for (const auto& m : models) {
    if (win && win->value != m.value) {
      if (m.correction) st.note("model: '" + m.value + "' replaces the earlier '" + win->value + "' (correction)");
      else if (win->kind == "demo" && m.kind != "demo") st.note("model: the explicit '" + m.value + "' is used, not the demo model");
      else if (m.kind == "demo" && win->kind != "demo") continue;
      else conflict = true;
    }
    win = &m;
  }
  if (conflict) {
    std::string names;
    for (const auto& m : models) {
      if (!names.empty()) names += ", ";
      names += m.value;
    }
    st.ask("model", "The prompt names several models (" + names + "); which one should I quantize?");
    out.model = {"", Source::kMissing};
  } else if (win) {
    out.model = {win->value, Source::kStated};
    out.model_kind = win->kind;
    out.model_path = win->path;
    if (win->kind == "demo" && win->path.empty()) {
      std::vector<std::filesystem::path> tried;
      (void)io::find_bundled_model("stories260K-hf-bf16", &tried);
      std::string where;
      for (const auto& p : tried) where += (where.empty() ? "" : ", ") + p.string();
      st.ask("model", "This build knows no bundled demo model (looked for stories260K-hf-bf16 in: " +
                          (where.empty() ? std::string("nowhere") : where) +
                          "; QLOOM_DEMO_MODEL unset); which model should I quantize?");
    }
  } else {
    // A family name without org: "Llama-3.1-8B", "qwen 2.5 7b".
    for (size_t i = 0; i < st.size(); ++i) {
      if (!st.free(i) || st.tok[i].kind != TokKind::kWord || !is_model_family_word(st.n(i))) continue;
      static const std::regex size_re(R"(^\d+(\.\d+)?[bm]$)");
      std::string name = st.tok[i].text;
      size_t e = i + 1;
      bool has_version = name.find_first_of("0123456789") != std::string::npos;
      while (e < st.size() && e < i + 3 && st.free(e) && st.tok[e].clause == st.tok[i].clause &&
             (st.tok[e].kind == TokKind::kNumber || rx_match(st.n(e), size_re) ||
              in(st.n(e), {"instruct", "chat", "base"}))) {
        name += ' ';
        name += st.tok[e].text;
        has_version = true;
        ++e;
      }
      if (!has_version) continue;
      st.use(i, e);
      out.model = {name, Source::kStated};
      out.model_kind = "name";
      st.ask("model", "'" + name + "' is not a Hugging Face id (org/name) or a local directory; which exact model should I quantize (e.g. meta-llama/Llama-3.1-8B-Instruct)?");
      break;
    }
  }
  if (!outputs.empty()) {
    out.output_dir = {outputs.back().first, outputs.back().second};
    if (outputs.size() > 1 && outputs.front().first != outputs.back().first)
      st.note("output_dir: '" + outputs.back().first + "' replaces the earlier '" + outputs.front().first + "'");
  }
}

void pass_hardware(ParseState& st) {
  Intent& out = st.out;
  for (size_t i = 0; i < st.size(); ++i) {
    if (!st.free(i)) continue;
    const std::string& n = st.n(i);
    HardwareDef hw;
    if (find_hardware(n, hw)) {
      if (!out.hardware.value.empty() && out.hardware.value != hw.name)
        st.note("hardware: '" + hw.name + "' replaces the earlier '" + out.hardware.value + "'");
      out.hardware = {hw.name, Source::kStated};
      if (!hw.note.empty()) st.note(hw.note);
      if (!hw.row.empty() && out.priority.source != Source::kStated) out.priority = {hw.row, Source::kInferred};
      st.use(i);
      continue;
    }
    std::string row;
    size_t len = 1;
    const std::string& next = st.n(i + 1);
    if (in(n, {"best", "highest", "max", "maximum", "maximal", "preserve", "prioritize", "prioritise"}) && next == "accuracy") { row = "best_accuracy"; len = 2; }
    else if (n == "most" && next == "accurate") { row = "best_accuracy"; len = 2; }
    else if (n == "accuracy" && in(next, {"first", "matters", "priority"})) { row = "best_accuracy"; len = 2; }
    else if (in(n, {"smallest", "tiniest"})) row = "smallest_model";
    else if (n == "as" && next == "small" && st.is(i + 2, "as")) { row = "smallest_model"; len = 3; }
    else if (in(n, {"minimize", "minimise", "minimal", "min", "minimum"}) && in(next, {"size", "memory", "footprint", "disk"})) { row = "smallest_model"; len = 2; }
    else if (in(n, {"max", "maximum", "most", "aggressive", "maximal"}) && next == "compression") { row = "smallest_model"; len = 2; }
    else if (in(n, {"gguf", "llama.cpp", "llamacpp", "llama_cpp", "ollama"})) row = "gguf_export";
    if (in(n, {"compressed-tensors", "compressed_tensors", "llm-compressor", "llmcompressor", "llm_compressor"}) ||
        (n == "compressed" && next == "tensors")) {
      add_export(out, "compressed-tensors", "The prompt asks for a compressed-tensors (llm-compressor / vLLM) export");
      st.use(i, i + (n == "compressed" ? 2 : 1));
      continue;
    }
    if (row.empty()) continue;
    out.priority = {row, Source::kStated};
    st.use(i, i + len);
    if (row == "gguf_export") add_export(out, "gguf", "The prompt asks for a GGUF (llama.cpp) file");
  }
}

}  // namespace qloom::agent::detail
