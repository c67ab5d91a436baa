// Checkpoints (seed 000 §4, seed 003 checkpoints 1–4): the agent shows the
// concrete facts of a step (analysis summary, plan decision table, the exact
// command with destination and estimates, the verified result) on stderr in
// every mode, each line prefixed "[quark-checkpoint] ", then
//   interactive on:  asks the question and reads one line from stdin:
//                    y / yes / ok / confirm / looks good / continue / go /
//                    run it / execute / accept -> yes; n / no / abort / stop /
//                    cancel / reject -> no; end of input -> no; an empty
//                    line asks again; anything else is a change in plain
//                    words ("use awq") for the caller to apply.
//   interactive off: prints "auto-accepted (interactive=off)" and returns yes.
//   auto:            on when stdin is a terminal, else off (resolved by the
//                    caller: resolve_interactive).
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>

namespace qloom::agent {

enum class Interactive { kAuto, kOn, kOff };
// "auto" | "on" | "off" (also true/false/yes/no/1/0); Error(kUsage) otherwise.
Interactive parse_interactive(std::string_view s);
const char* interactive_name(Interactive i);
// kAuto -> kOn when stdin_is_tty, else kOff; others unchanged.
Interactive resolve_interactive(Interactive i, bool stdin_is_tty);

enum class AnswerKind { kYes, kNo, kChange };
struct Answer {
  AnswerKind kind = AnswerKind::kYes;
  std::string text;  // the line as typed (trimmed)
};
Answer classify_answer(std::string_view line);

struct CheckpointIo {
  std::istream* in = nullptr;
  std::ostream* out = nullptr;  // stderr in the CLI
  bool interactive = false;     // resolved: on (true) or off
};

// Prints the facts and asks; see the file comment. `id` names the checkpoint
// ("intake", "plan", "manifest", "result").
Answer run_checkpoint(const CheckpointIo& io, std::string_view id, std::string_view title, const std::string& facts,
                      std::string_view question);

}  // namespace qloom::agent
