#include "qloom/agent/checkpoint.h"

#include <algorithm>
#include <cctype>
#include <istream>
#include <ostream>
#include <sstream>

#include "qloom/core/error.h"

namespace qloom::agent {
namespace {

std::string norm(std::string_view s) {
  std::string t;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == ' ') t += static_cast<char>(std::tolower(u));
  }
  const auto b = t.find_first_not_of(' ');
  if (b == std::string::npos) return {};
  return t.substr(b, t.find_last_not_of(' ') - b + 1);
}

}  // namespace

Interactive parse_interactive(std::string_view s) {
  const std::string t = norm(s);
  if (t == "auto") return Interactive::kAuto;
  if (t == "on" || t == "true" || t == "yes" || t == "1") return Interactive::kOn;
  if (t == "off" || t == "false" || t == "no" || t == "0") return Interactive::kOff;
  throw Error(ErrorKind::kUsage, "", "--interactive", "unknown value '" + std::string(s) + "'", "use auto, on or off");
}

const char* interactive_name(Interactive i) {
  switch (i) {
    case Interactive::kAuto: return "auto";
    case Interactive::kOn: return "on";
    case Interactive::kOff: return "off";
  }
  return "?";
}

Interactive resolve_interactive(Interactive i, bool stdin_is_tty) {
  if (i == Interactive::kAuto) return stdin_is_tty ? Interactive::kOn : Interactive::kOff;
  return i;
}

Answer classify_answer(std::string_view line) {
  Answer a;
  std::string raw(line);
  const auto b = raw.find_first_not_of(" \t\r\n");
  a.text = b == std::string::npos ? std::string() : raw.substr(b, raw.find_last_not_of(" \t\r\n") - b + 1);
  const std::string t = norm(a.text);
  static const char* kYes[] = {"y", "yes", "ok", "okay", "confirm", "confirmed", "looks good", "continue", "go",
                               "run it", "execute", "accept", "accepted", "proceed", "yes please", "sure", "lgtm"};
  static const char* kNo[] = {"n", "no", "abort", "stop", "cancel", "reject", "quit", "no thanks"};
  for (const char* y : kYes)
    if (t == y) return a.kind = AnswerKind::kYes, a;
  for (const char* n : kNo)
    if (t == n) return a.kind = AnswerKind::kNo, a;
  a.kind = AnswerKind::kChange;  // a change in plain words ("" for an empty line: asked again)
  return a;
}

Answer run_checkpoint(const CheckpointIo& io, std::string_view id, std::string_view title, const std::string& facts,
                      std::string_view question) {
  std::ostream& out = *io.out;
  out << "[quark-checkpoint] ---- checkpoint " << id << ": " << title << " ----\n";
  std::istringstream lines(facts);
  for (std::string line; std::getline(lines, line);) out << "[quark-checkpoint] " << line << "\n";
  if (!io.interactive) {
    out << "[quark-checkpoint] " << question << " -> auto-accepted (interactive=off)\n";
    out.flush();
    return {AnswerKind::kYes, "y"};
  }
  // An explicit answer is required (seed 003: no execution without explicit
  // approval): an empty line asks again.
  for (;;) {
    out << "[quark-checkpoint] " << question << " [y/n, or say what to change] " << std::flush;
    std::string line;
    if (!io.in || !std::getline(*io.in, line)) {
      out << "\n[quark-checkpoint] no answer (end of input): treated as no\n";
      return {AnswerKind::kNo, ""};
    }
    Answer a = classify_answer(line);
    if (a.kind != AnswerKind::kChange || !a.text.empty()) return a;
  }
}

}  // namespace qloom::agent
