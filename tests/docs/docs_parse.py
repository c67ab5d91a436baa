"""Reading doc pages and help text for the docs harness (run_docs.py); stdlib only.

What a page holds (docs convention): fenced blocks; a `console` block is run
($ lines are commands, the lines after one its expected output); any other
block is not run and must not run qloom unless the line before its fence is
`<!-- docs: not run (reason) -->`. `qloom <command> --help` ends with an
"Examples" section (src/qloom/cli/help_examples.h) whose examples are run under
the same rules.
"""
import re
import shlex
from dataclasses import dataclass, field

FENCE_RE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^`\s]*)[^`]*$")
MARKER_RE = re.compile(r"^\s*<!--\s*docs:\s*not run\s*\((.*)\)\s*-->\s*$")
MARKER_START_RE = re.compile(r"^\s*<!--\s*docs:")
# A line that runs qloom: "qloom ...", "$ qloom ...", "./build/qloom ...".
QLOOM_LINE_RE = re.compile(r"^\s*(\$\s+)?(\./)?(build/)?qloom(\s|$)")
# qloom's own output ("qloom quantize: a -> b") starts like a command but its
# first word ends with a colon; only a line without "$ " can be output.
QLOOM_OUTPUT_RE = re.compile(r"^\s*(\./)?(build/)?qloom\s+\S+:(\s|$)")
EXIT_RE = re.compile(r"\s#\s*exit\s+(\d+)\s*$")
NEEDS_RE = re.compile(r"^(.*?)\s*\[needs ([^\]]+)\]$")


@dataclass
class Problem:
    where: str  # "page:line"
    message: str


@dataclass
class Block:
    info: str  # first word of the info string ("" when none)
    line: int  # the opening fence's line number (1-based)
    lines: list  # [(line number, text)] between the fences
    not_run: str = None  # the marker's reason, when marked


@dataclass
class Command:
    where: str  # "page:line" of its "$ " line (or "qloom X --help, example N")
    text: str  # bash source (continuations kept)
    expected: list = field(default_factory=list)  # [(where, text)]
    exit_code: int = 0

    def is_background(self):
        body = EXIT_RE.sub("", self.text).rstrip()
        return body.endswith("&") and not body.endswith("&&")

    def first_line(self):
        return self.text.splitlines()[0] if self.text else ""


def runs_qloom(line):
    """True when `line` is a qloom command rather than qloom's own output."""
    if not QLOOM_LINE_RE.match(line):
        return False
    return line.lstrip().startswith("$") or not QLOOM_OUTPUT_RE.match(line)


def _fence(line):
    m = FENCE_RE.match(line)
    return (m.group(1), m.group(2), m.group(3)) if m else None


def _marker_before(lines, i, page, problems):
    """The not-run reason of the block whose fence is lines[i], or None."""
    if i == 0:
        return None
    prev = lines[i - 1]
    m = MARKER_RE.match(prev)
    if m:
        reason = m.group(1).strip()
        if not reason:
            problems.append(Problem(f"{page}:{i}", "`<!-- docs: not run () -->` states no reason: "
                                    "say why it cannot run, e.g. (needs a GPU)"))
        return reason or None
    return None


def parse_blocks(text, page):
    """Fenced blocks of a markdown page and problems with docs markers."""
    lines = text.split("\n")
    blocks, problems = [], []
    i = 0
    while i < len(lines):
        line = lines[i]
        if MARKER_START_RE.match(line) and not MARKER_RE.match(line):
            problems.append(Problem(f"{page}:{i + 1}", "malformed docs marker: write "
                                    "`<!-- docs: not run (reason) -->` on the line before the fence"))
        elif MARKER_RE.match(line) and (i + 1 >= len(lines) or not _fence(lines[i + 1])):
            problems.append(Problem(f"{page}:{i + 1}", "docs marker not directly above a fence "
                                    "(it must be on the line before the ``` line)"))
        f = _fence(line)
        if not f:
            i += 1
            continue
        indent, fence, info = f
        block = Block(info=info.lower(), line=i + 1, lines=[], not_run=_marker_before(lines, i, page, problems))
        i += 1
        close = re.compile(r"^\s*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$")
        while i < len(lines) and not close.match(lines[i]):
            body = lines[i]
            block.lines.append((i + 1, body[len(indent):] if body.startswith(indent) else body.lstrip()))
            i += 1
        if i >= len(lines):
            problems.append(Problem(f"{page}:{block.line}", "code fence never closed"))
        blocks.append(block)
        i += 1
    return blocks, problems


def parse_console(block, page):
    """The commands of a console block, and problems (output before any command)."""
    commands, problems = [], []
    lines = block.lines
    i = 0
    while i < len(lines):
        ln, text = lines[i]
        if text.startswith("$ ") or text.rstrip() == "$":
            src = [text[2:]]
            while src[-1].rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                cont = lines[i][1]
                src.append(cont[2:] if cont.startswith("> ") else cont)
            m = EXIT_RE.search(src[-1])
            commands.append(Command(where=f"{page}:{ln}", text="\n".join(src),
                                    exit_code=int(m.group(1)) if m else 0))
        elif commands:
            commands[-1].expected.append((f"{page}:{ln}", text))
        elif text.strip():
            problems.append(Problem(f"{page}:{ln}", "output line before the first `$ ` command of the console block"))
        i += 1
    if not commands:
        problems.append(Problem(f"{page}:{block.line}", "console block without a `$ ` command"))
    return commands, problems


def logical_lines(lines, page):
    """[(where, text)] with backslash-continued lines joined (a command written over several lines)."""
    out = []
    for ln, text in lines:
        if out and out[-1][1].rstrip().endswith("\\"):
            out[-1] = (out[-1][0], out[-1][1].rstrip()[:-1] + " " + text.strip())
        else:
            out.append((f"{page}:{ln}", text))
    return out


def unexecuted_qloom_lines(block, page):
    """Problems for qloom lines in a block that is neither run nor marked not run."""
    if block.info == "console" or block.not_run:
        return []
    return [Problem(f"{page}:{ln}", f"a `{block.info or 'plain'}` block runs qloom but is not executed: "
                    f"`{text.strip()}` — make it a `console` block of `$ ` commands with their output, or put "
                    "`<!-- docs: not run (reason) -->` on the line before its fence")
            for ln, text in block.lines if runs_qloom(text)]


# ---- help text ----

def help_subcommands(help_text):
    """Names under "Subcommands:" of a CLI11 help text, in order."""
    names, inside = [], False
    for line in help_text.splitlines():
        if line.strip() == "Subcommands:":
            inside = True
        elif inside and re.match(r"^  \S", line):
            names.append(line.split()[0])
        elif inside and line.strip() and not line.startswith("    "):
            inside = False
    return names


def help_flags(help_text):
    """Every --flag spelling a CLI11 help text lists (-h,--help, --model_dir,--model-dir, ...)."""
    flags = set()
    for line in help_text.splitlines():
        m = re.match(r"^  (-\S+)", line)
        if m:
            flags.update(f for f in m.group(1).split(",") if f.startswith("--"))
    return flags


@dataclass
class HelpExample:
    comment: str
    command: str
    needs: str = None  # why the harness cannot run it


def help_examples(help_text):
    """The examples at the end of `qloom <command> --help` (None: no Examples section)."""
    lines = help_text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("Examples")), None)
    if start is None:
        return None
    out, comment = [], None
    for line in lines[start + 1:]:
        s = line.strip()
        if s.startswith("# "):
            comment = s[2:]
        elif s:
            m = NEEDS_RE.match(comment or "")
            out.append(HelpExample(comment=m.group(1) if m else (comment or ""), command=s,
                                   needs=("needs " + m.group(2)) if m else None))
            comment = None
    return out


def command_flags(command_line):
    """(subcommand words, --flags) of a qloom command line, quotes respected."""
    try:
        words = shlex.split(command_line, comments=True)
    except ValueError:
        words = command_line.split()
    while words and not re.search(r"(^|/)qloom$", words[0]):
        words.pop(0)
    words = words[1:]
    path = []
    for w in words:
        if w.startswith("-"):
            break
        path.append(w)
    flags = [w.split("=", 1)[0].rstrip("]") for w in words if w.startswith("--")]
    return path, flags


# ---- expected output ----

def _pattern(expected):
    parts = expected.rstrip().split("...")
    return re.compile(".*".join(re.escape(p) for p in parts), re.S)


def _first(rx, lines, start):
    for j in range(start, len(lines)):
        if rx.fullmatch(lines[j]):
            return j
    return None


def _pareto(states):
    keep = []
    for s in sorted(states):
        if not any(k[0] <= s[0] and k[1] <= s[1] for k in keep):
            keep.append(s)
    return keep


def checked_lines(expected):
    """The expected lines that are checked: non-empty and not only `...`."""
    return [(w, t.rstrip()) for w, t in expected if t.strip() and t.strip() != "..."]


def match_output(expected, out, err):
    """How many of the checked expected lines match, in order, as a subsequence
    of the real output: each stream's order is kept, and a line may come from
    either stream (their interleaving depends on buffering, not on the program).
    Returns len(checked_lines(expected)) when all match."""
    checked = checked_lines(expected)
    states = [(0, 0)]
    for i, (_, text) in enumerate(checked):
        rx = _pattern(text)
        new = set()
        for po, pe in states:
            j = _first(rx, out, po)
            if j is not None:
                new.add((j + 1, pe))
            k = _first(rx, err, pe)
            if k is not None:
                new.add((po, k + 1))
        if not new:
            return i
        states = _pareto(new)
    return len(checked)


def find_anywhere(text, out, err):
    """("stdout"|"stderr", 1-based line) of the first real line matching `text`, or None."""
    rx = _pattern(text)
    for name, lines in (("stdout", out), ("stderr", err)):
        j = _first(rx, lines, 0)
        if j is not None:
            return name, j + 1
    return None


def output_lines(raw):
    """Real output as lines: trailing spaces dropped, a carriage-return progress
    line reduced to what a terminal shows last."""
    lines = raw.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [l.rstrip("\r").rsplit("\r", 1)[-1].rstrip() for l in lines]
