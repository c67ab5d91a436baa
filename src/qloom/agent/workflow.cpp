// The runner: attempts, retries, the final self-check and assessment.json.
#include "qloom/agent/workflow.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "qloom/agent/artifact_schema.h"
#include "qloom/agent/assessment.h"
#include "qloom/agent/attempt.h"
#include "qloom/agent/fix_hypothesis.h"
#include "qloom/agent/outcomes.h"
#include "qloom/agent/workspace.h"
#include "qloom/core/error.h"
#include "qloom/io/data_files.h"


namespace qloom::agent {
namespace fs = std::filesystem;

namespace {

constexpr const char* kDemoName = "stories260K-hf-bf16";

// Files one attempt writes that must not leak into the next one's reading.
void clear_attempt_files(const Workspace& ws, int finished_attempt) {
  ws.rename("blocked.md", "blocked_attempt_" + std::to_string(finished_attempt) + ".md");
  ws.remove("eval_skipped.txt");
  ws.remove("eval_report.json");
  ws.remove("quantized_eval.md");
  ws.remove("validation_report.md");
  ws.remove("validation_report.json");
}

// Why the runtime cannot start a workflow, or nullopt: the embedded schemas
// must parse, and the environment variables qloom reads must be usable.
std::optional<std::string> preflight_problem() {
  try {
    for (const auto& n : artifact_schema_names()) (void)artifact_schema(n);
    if (artifact_schema_names().empty()) return "no JSON schema is embedded in this qloom build (rebuild it)";
  } catch (const Error& e) {
    return std::string("the embedded JSON schemas are broken: ") + e.what();
  }
  std::error_code ec;
  if (const char* d = std::getenv("QLOOM_DATA_DIR"); d && *d && !fs::is_directory(d, ec))
    return std::string("QLOOM_DATA_DIR=") + d + " is not a directory (unset it or point it at the data sets)";
  if (const char* isa = std::getenv("QLOOM_MAX_ISA"); isa && *isa) {
    const std::string_view v(isa);
    if (v != "scalar" && v != "avx2" && v != "avx512")
      return std::string("QLOOM_MAX_ISA=") + isa + " is not one of scalar, avx2, avx512 (unset it or fix it)";
  }
  return std::nullopt;
}

// The prompt at the library boundary (issue 30 item 9): an empty or
// whitespace-only prompt, or one holding a control character (NUL, ESC, DEL
// ...; tab and newlines are text), is a usage error, never a run.
void check_prompt(const std::string& prompt) {
  bool text = false;
  for (size_t i = 0; i < prompt.size(); ++i) {
    const auto c = static_cast<unsigned char>(prompt[i]);
    const bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r';
    if ((c < 0x20 && !space) || c == 0x7f) {
      char code[8];
      std::snprintf(code, sizeof code, "%02X", c);
      throw Error(ErrorKind::kUsage, "", "prompt",
                  std::string("holds the control character 0x") + code + " at byte " + std::to_string(i),
                  "pass the request as plain text");
    }
    text = text || !space;
  }
  if (!text)
    throw Error(ErrorKind::kUsage, "", "prompt", prompt.empty() ? "is empty" : "holds only whitespace",
                "say what to quantize, e.g. \"quantize the bundled model to int4 g32\"");
}

}  // namespace

fs::path bundled_demo_model() {
  if (const char* env = std::getenv("QLOOM_DEMO_MODEL"); env && *env) return fs::path(env);
  return io::find_bundled_model(kDemoName).value_or(fs::path());
}

RunResult quantize_via_prompt(const std::string& prompt, const RunOptions& options) {
  check_prompt(prompt);
  if (options.workspace.empty())
    throw Error(ErrorKind::kUsage, "", "workspace", "no workspace given", "pass --workspace DIR");
  if (options.max_requantize_attempts < 0)
    throw Error(ErrorKind::kUsage, "", "max_requantize_attempts", "must be >= 0", "pass 0 or more");
  if (options.acceptable_eval_gap && !(*options.acceptable_eval_gap >= 0))
    throw Error(ErrorKind::kUsage, "", "acceptable_eval_gap", "must be a non-negative number", "e.g. 0.05 for 5%");
  RunOptions opts = options;
  if (!opts.in) opts.in = &std::cin;
  if (!opts.log) opts.log = &std::cerr;
  const auto t0 = std::chrono::steady_clock::now();

  const Workspace ws(fs::absolute(opts.workspace).lexically_normal());
  try {
    ws.ensure_writable();
  } catch (const Error& e) {
    // workspace_unwritable (#23): a pre-flight failure; nothing can be recorded inside it.
    RunResult r;
    r.outcome_id = "workspace_unwritable";
    r.verdict = "failed";
    r.exit_code = 4;
    r.summary = "\nqloom run — summary\n  outcome            workspace_unwritable (#23, auto_fail)\n  reason             " +
                std::string(e.what()) + "\n";
    return r;
  }

  // Pre-flight of the runtime (sdk_runtime_error, #24): what the phases need
  // before any of them starts.
  if (auto problem = preflight_problem()) {
    ws.write_blocked("sdk_runtime_error", *problem);
    RunResult r;
    r.outcome_id = "sdk_runtime_error";
    r.verdict = "failed";
    r.exit_code = 4;
    r.summary = "\nqloom run — summary\n  outcome            sdk_runtime_error (#24, auto_fail)\n  reason             " +
                *problem + "\n  workspace          " + ws.dir().string() + " (blocked.md)\n";
    return r;
  }

  // A new run in a used workspace starts from a clean slate, except the
  // source evaluation, which is cached across runs and attempts (seed §5.1).
  {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(ws.dir(), ec)) {
      const std::string n = e.path().filename().string();
      if (n == "blocked.md" || n == "requantize_attempts.txt" || n == "eval_skipped.txt" || n == "assessment.json" ||
          n.rfind("blocked_attempt_", 0) == 0 || n.rfind("fix_hypothesis_attempt_", 0) == 0)
        ws.remove(n);
    }
  }

  std::vector<AttemptReport> reports;
  std::optional<FixHypothesis> fix;
  for (int attempt = 1;; ++attempt) {
    reports.push_back(run_attempt(prompt, opts, ws, attempt, fix));
    const AttemptReport& r = reports.back();
    if (r.outcome_id.empty()) break;
    const OutcomeInfo* info = find_outcome(r.outcome_id);
    if (!info || info->cls != OutcomeClass::kRetry || !r.fix_written) break;
    const int done = ws.requantize_attempts();
    if (done >= opts.max_requantize_attempts) {
      *opts.log << "qloom run: " << r.outcome_id << " is retryable but max_requantize_attempts ("
                << opts.max_requantize_attempts << ") is reached\n";
      break;
    }
    const std::string name = fix_hypothesis_file_name(attempt + 1);
    try {
      fix = parse_fix_hypothesis(ws.read_text(name).value_or(""), ws.path(name).string());
    } catch (const Error& e) {
      *opts.log << "qloom run: cannot apply " << name << ": " << e.what() << "\n";
      break;
    }
    ws.set_requantize_attempts(done + 1);
    clear_attempt_files(ws, attempt);
    *opts.log << "qloom run: retrying (attempt " << attempt + 1 << ") with " << name << "\n";
  }

  // The runner's self-check reads the workspace, as the seed's Python runner does.
  AssessmentInput in;
  in.prompt = prompt;
  in.options = &opts;
  in.workspace = &ws;
  in.final = classify_workspace(ws.dir(), opts.acceptable_eval_gap);
  const AttemptReport& last = reports.back();
  if (!in.final.outcome && !last.outcome_id.empty()) {
    // The attempt stopped but the files do not say so (should not happen).
    in.final.outcome = find_outcome(last.outcome_id);
    in.final.reason = last.reason;
  }
  if (in.final.outcome) {
    in.verdict = in.final.outcome->id == "checkpoint_aborted" ? "aborted" : "failed";
    if (in.final.outcome->cls == OutcomeClass::kAutoRecover) in.verdict = "success_unverified";
  } else {
    in.verdict = last.eval_unresolved || last.eval_skipped ? "success_unverified" : "success";
  }
  in.attempts = reports;
  in.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  RunResult result;
  result.assessment = build_assessment(in);
  ws.write_json("assessment.json", result.assessment, "assessment");
  result.outcome_id = in.final.outcome ? std::string(in.final.outcome->id) : std::string();
  result.verdict = in.verdict;
  result.exit_code = in.verdict == "success" ? 0 : in.verdict == "success_unverified" ? 5 : 4;
  result.summary = render_summary(result.assessment);
  return result;
}

}  // namespace qloom::agent
