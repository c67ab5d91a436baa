#!/usr/bin/env python3
"""The docs harness: runs the documentation as tests (Python 3 stdlib only).

  run_docs.py [--qloom PATH] [PAGE ...]     README.md and docs/**/*.md by default
  run_docs.py [--qloom PATH] --help-examples the examples of every `qloom <command> --help`

The docs convention it implements (docs/testing.md tells page writers):
- every ```console block runs: a `$ ` line is a command (bash; a trailing `\\`
  continues it), the lines after it its expected output, checked as an ordered
  subsequence of the real stdout and stderr lines (each stream's order kept; a
  line may come from either), `...` inside a line matching any text and a line
  of only `...` skipped; trailing spaces are ignored;
- a command must exit 0, or N when it ends with the comment `# exit N`;
- a command ending with `&` runs in the background: the harness waits up to
  2 s for it to fail (its exit then counts), up to 30 s for its expected lines,
  and kills it when the page ends;
- the commands of one page run in order in one fresh temporary directory with
  `models` -> the repository's models/, qloom first on PATH, HF_ENDPOINT on the
  local test hub (tests/io/hub_test_server.py) serving the demo model as
  qloom-demo/stories260K, every cache inside the directory, QLOOM_THREADS and
  HF tokens unset; each command runs in its own bash (files carry over, `cd`
  and variables do not), with a timeout of 120 s;
- a block of any other info string that runs qloom (a line starting with
  `qloom `, `$ qloom` or `./build/qloom`; not qloom's own output such as
  `qloom quantize: a -> b`) fails the page, unless the line before its fence is
  `<!-- docs: not run (reason) -->`; those blocks are listed, and the --flags
  of their qloom lines must exist in `qloom <command> --help`.
Exit status: 0 when every page passes, 1 when one fails, 2 on a harness error.
"""
import argparse
import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docs_parse as dp  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
HUB_ID = "qloom-demo/stories260K"
DEMO_MODEL = "models/stories260K-hf-bf16"
BACKGROUND_WAIT_S = 30
SHOWN_OUTPUT_LINES = 150
SCRUBBED_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
                "HF_ENDPOINT", "HF_HOME", "HF_HUB_CACHE", "QLOOM_THREADS", "QLOOM_DATA_DIR", "QLOOM_DEMO_MODEL",
                "QLOOM_CACHE_DIR", "QLOOM_GGUF_CACHE", "XDG_CACHE_HOME")
# A background command's early failure: its exit status if it ends within 2 s.
BACKGROUND_WATCH = """
__docs_bg=$!
for __docs_i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
  kill -0 "$__docs_bg" 2>/dev/null || { wait "$__docs_bg"; exit $?; }
  sleep 0.1
done
"""


class HarnessError(Exception):
    """The harness itself could not work (no qloom binary, the hub server did not start)."""


@dataclass
class Result:
    exit_code: int  # None: timed out
    out: list
    err: list
    seconds: float


class Sandbox:
    """One fresh temporary directory, environment and hub server for a page."""

    def __init__(self, qloom, keep=False):
        self.root = Path(tempfile.mkdtemp(prefix="qloom-docs-"))
        self.work, self.logs, bindir = self.root / "work", self.root / "logs", self.root / "bin"
        for d in (self.work, self.logs, bindir):
            d.mkdir()
        (self.work / "models").symlink_to(REPO / "models")
        (bindir / "qloom").symlink_to(qloom)
        self.keep, self.groups, self.count, self.helps = keep, [], 0, {}
        self.server = None
        cache = self.work / ".cache"
        self.env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
        self.env.update(PATH=f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                        HF_HOME=str(cache / "huggingface"), HF_HUB_CACHE=str(cache / "huggingface" / "hub"),
                        QLOOM_CACHE_DIR=str(cache / "qloom"), QLOOM_GGUF_CACHE=str(cache / "qloom" / "gguf"),
                        XDG_CACHE_HOME=str(cache))
        try:
            self.env["HF_ENDPOINT"] = self._start_hub()
        except BaseException:
            self.close()
            raise

    def _start_hub(self):
        script = REPO / "tests" / "io" / "hub_test_server.py"
        with open(self.logs / "hub.err", "wb") as err:
            self.server = subprocess.Popen(
                [sys.executable, str(script), "--repo", f"{HUB_ID}={REPO / DEMO_MODEL}"], stdout=subprocess.PIPE,
                stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
        ready, _, _ = select.select([self.server.stdout], [], [], 10)
        line = self.server.stdout.readline().decode() if ready else ""
        if not line.startswith("PORT "):
            raise HarnessError(f"the hub test server ({script}) did not start: {line!r}")
        return f"http://127.0.0.1:{int(line.split()[1])}"

    def run(self, cmd, timeout):
        self.count += 1
        out_path, err_path = self.logs / f"{self.count}.out", self.logs / f"{self.count}.err"
        script = cmd.text + (BACKGROUND_WATCH if cmd.is_background() else "")
        start = time.monotonic()
        with open(out_path, "wb") as fo, open(err_path, "wb") as fe:
            p = subprocess.Popen(["bash", "-c", script], cwd=self.work, env=self.env, stdin=subprocess.DEVNULL,
                                 stdout=fo, stderr=fe, start_new_session=True)
        try:
            code = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(p.pid, p)
            p.wait()
            code = None
        if _group_alive(p.pid):  # background jobs left running: killed when the page ends
            self.groups.append(p.pid)
        res = Result(code, [], [], 0.0)
        deadline = time.monotonic() + (BACKGROUND_WAIT_S if cmd.is_background() and code == 0 else 0)
        while True:
            res.out, res.err = _read_lines(out_path), _read_lines(err_path)
            done = dp.match_output(cmd.expected, res.out, res.err) == len(dp.checked_lines(cmd.expected))
            if done or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        res.seconds = time.monotonic() - start
        return res

    def help_text(self, words):
        """`qloom WORDS --help` (cached)."""
        key = tuple(words)
        if key not in self.helps:
            r = subprocess.run(["qloom", *words, "--help"], cwd=self.work, env=self.env, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=30)
            self.helps[key] = r.stdout if r.returncode == 0 else ""
        return self.helps[key]

    def close(self):
        for g in self.groups:
            _kill_group(g)
        if self.server:
            self.server.terminate()
            self.server.wait()
            self.server.stdout.close()
        if self.keep:
            print(f"  (kept {self.root})")
        else:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _read_lines(path):
    return dp.output_lines(Path(path).read_bytes().decode("utf-8", errors="replace"))


def _group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _kill_group(pgid, leader=None):
    """SIGTERM a command's process group (its background jobs too), SIGKILL after 3 s.
    `leader`: the group's Popen when it is our child (reaped here, else it stays a zombie)."""
    for sig, wait_s in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 1.0)):
        if leader is not None:
            leader.poll()
        if not _group_alive(pgid):
            return
        os.killpg(pgid, sig)
        end = time.monotonic() + wait_s
        while time.monotonic() < end:
            if leader is not None:
                leader.poll()
            if not _group_alive(pgid):
                return
            time.sleep(0.05)


# ---- what to run ----

@dataclass
class Plan:
    name: str
    commands: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    not_run: list = field(default_factory=list)  # [(where, reason, first line)]
    flag_lines: list = field(default_factory=list)  # [(where, qloom line)]: check its --flags only
    blocks: int = 0


def plan_page(page):
    text = (REPO / page).read_text(encoding="utf-8")
    blocks, problems = dp.parse_blocks(text, page)
    plan = Plan(name=page, problems=problems)
    for b in blocks:
        if b.not_run:
            first = next((t for _, t in b.lines if t.strip()), "")
            plan.not_run.append((f"{page}:{b.line}", b.not_run, f"```{b.info} {first.strip()}"))
            plan.flag_lines += [(w, t) for w, t in dp.logical_lines(b.lines, page) if dp.runs_qloom(t)]
            continue
        plan.problems += dp.unexecuted_qloom_lines(b, page)
        if b.info == "console":
            commands, problems = dp.parse_console(b, page)
            plan.commands += commands
            plan.problems += problems
            plan.blocks += 1
    return plan


def plan_help_examples(sb):
    """Every `qloom <command> --help` example, in the order `qloom --help` lists the commands."""
    plan = Plan(name="qloom <command> --help examples")
    subcommands = dp.help_subcommands(sb.help_text([]))
    if not subcommands:
        plan.problems.append(dp.Problem("qloom --help", "lists no subcommands"))
    for sub in subcommands:
        where = f"qloom {sub} --help"
        examples = dp.help_examples(sb.help_text([sub]))
        if examples is None:
            plan.problems.append(dp.Problem(where, "has no Examples section (src/qloom/cli/help_examples.cpp)"))
            continue
        plan.blocks += 1
        if not 2 <= len(examples) <= 4:
            plan.problems.append(dp.Problem(where, f"has {len(examples)} examples; give 2 to 4"))
        for i, e in enumerate(examples, 1):
            w = f"{where}, example {i}"
            if not e.comment:
                plan.problems.append(dp.Problem(w, "has no `# comment` line saying what it does"))
            if dp.command_flags(e.command)[0][:1] != [sub]:
                plan.problems.append(dp.Problem(w, f"`{e.command}` does not run `qloom {sub}`"))
            plan.flag_lines.append((w, e.command))
            if e.needs:
                plan.not_run.append((w, e.needs, e.command))
            else:
                m = dp.EXIT_RE.search(e.command)
                plan.commands.append(dp.Command(where=w, text=e.command, exit_code=int(m.group(1)) if m else 0))
    return plan


def flag_problems(sb, where, line):
    """--flags of a qloom line that `qloom <command> --help` does not list."""
    line = line.lstrip()
    words, flags = dp.command_flags(line[2:] if line.startswith("$ ") else line)
    path = []
    for w in words:  # descend while the word is a subcommand of the level above
        if w not in dp.help_subcommands(sb.help_text(path)):
            break
        path.append(w)
    known = dp.help_flags(sb.help_text(path))
    cmd = " ".join(["qloom", *path])
    return [dp.Problem(where, f"`{f}` is not an option of `{cmd}` (see `{cmd} --help`)")
            for f in flags if f not in known]


# ---- running and reporting ----

def _numbered(name, lines):
    out = [f"    real {name} ({len(lines)} lines):"]
    shown = list(enumerate(lines, 1))
    if len(shown) > SHOWN_OUTPUT_LINES:
        head, tail = SHOWN_OUTPUT_LINES // 3, SHOWN_OUTPUT_LINES - SHOWN_OUTPUT_LINES // 3
        skipped = len(shown) - head - tail
        shown = shown[:head] + [(None, f"... ({skipped} lines not shown) ...")] + shown[-tail:]
    out += [f"    {'' if n is None else n:>5}| {t}" for n, t in shown]
    return out


def expected_report(cmd, res):
    checked = dp.checked_lines(cmd.expected)
    n = dp.match_output(cmd.expected, res.out, res.err)
    if n == len(checked):
        return []
    out = ["    expected output (an ordered subsequence of the real lines; `...` matches any text):"]
    for i, (where, text) in enumerate(checked):
        mark = "ok     " if i < n else ("MISSING" if i == n else "       ")
        out.append(f"    {mark} {where}  {text}")
    where, text = checked[n]
    seen = dp.find_anywhere(text, res.out, res.err)
    if seen:
        out.append(f"    {where}: that line is real output ({seen[0]} line {seen[1]}), but not after the lines "
                   "above it: put the expected lines in the order of the output")
    else:
        out.append(f"    {where}: no real output line matches `{text}`")
    return out


def check_command(sb, cmd, timeout):
    """Runs one command; returns (result, failure lines)."""
    res = sb.run(cmd, timeout)
    fail = []
    if res.exit_code is None:
        fail.append(f"    timed out after {timeout} s (killed)")
    elif res.exit_code != cmd.exit_code:
        hint = " (an expected failure ends its command line with `# exit N`)" if cmd.exit_code == 0 else ""
        fail.append(f"    exited {res.exit_code}, expected {cmd.exit_code}{hint}")
    fail += expected_report(cmd, res)
    if fail:
        fail += _numbered("stdout", res.out) + _numbered("stderr", res.err)
    return res, fail


def _models_snapshot():
    root = REPO / "models"
    return sorted((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in root.rglob("*") if p.is_file())


def execute(plan, sb, args):
    """Runs a plan's commands in order (stopping at the first failure); prints; returns failures."""
    failures = 0
    for p in plan.problems:
        print(f"  FAIL  {p.where}: {p.message}")
        failures += 1
    for where, line in plan.flag_lines:
        for p in flag_problems(sb, where, line):
            print(f"  FAIL  {p.where}: {p.message}")
            failures += 1
    before = _models_snapshot()
    for cmd in plan.commands:
        res, fail = check_command(sb, cmd, args.timeout)
        bg = "  (background: killed at the end)" if cmd.is_background() else ""
        status = "FAIL" if fail else "ok"
        print(f"  {status:<4}  {cmd.where}  $ {cmd.first_line()[:110]}  ({res.seconds:.1f} s){bg}", flush=True)
        if fail:
            if "\n" in cmd.text:
                print("\n".join(["    the whole command:"] + ["      " + l for l in cmd.text.splitlines()]))
            print("\n".join(fail))
            failures += 1
            break
        if args.verbose:
            print("\n".join(_numbered("stdout", res.out) + _numbered("stderr", res.err)))
    if _models_snapshot() != before:
        print(f"  FAIL  {plan.name}: a command wrote into models/ (the repository's own directory): write to out/")
        failures += 1
    return failures


def run_plan(plan, args, make_sandbox):
    start = time.monotonic()
    print(f"docs: {plan.name}", flush=True)
    if plan.commands or plan.flag_lines:
        with make_sandbox() as sb:
            failures = execute(plan, sb, args)
    else:
        for p in plan.problems:
            print(f"  FAIL  {p.where}: {p.message}")
        failures = len(plan.problems)
    for where, reason, first in plan.not_run:
        print(f"  not run  {where}  ({reason})  {first[:90]}")
    verdict = "FAIL" if failures else "PASS"
    print(f"docs: {plan.name}: {verdict} — {len(plan.commands)} commands in {plan.blocks} blocks run, "
          f"{len(plan.not_run)} not run, {failures} failure(s) ({time.monotonic() - start:.1f} s)\n", flush=True)
    return failures == 0


def discover_pages():
    pages = ["README.md"] if (REPO / "README.md").exists() else []
    pages += sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*.md"))
    return pages


def _page_path(arg):
    p = Path(arg)
    if p.is_absolute():
        p = p.relative_to(REPO)
    if not (REPO / p).is_file():
        raise HarnessError(f"no page {arg} (pages are README.md and docs/**/*.md of {REPO})")
    return str(p)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Run the documentation as tests (see the module docstring).")
    ap.add_argument("pages", nargs="*", help="pages, relative to the repository root (default: all)")
    ap.add_argument("--qloom", default=str(REPO / "build" / "qloom"), help="the qloom binary (default build/qloom)")
    ap.add_argument("--help-examples", action="store_true", help="run the examples of `qloom <command> --help`")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per command (default 120)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directories")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every command's output")
    args = ap.parse_args(argv)
    try:
        qloom = Path(args.qloom).resolve()
        if not os.access(qloom, os.X_OK):
            raise HarnessError(f"no qloom binary at {qloom}: build it (cmake --build build --target qloom_cli)")
        make_sandbox = lambda: Sandbox(qloom, args.keep)  # noqa: E731
        if args.help_examples:
            with make_sandbox() as sb:  # one directory: an example may use an earlier one's output
                plan = plan_help_examples(sb)
                return 0 if run_plan(plan, args, lambda: contextlib.nullcontext(sb)) else 1
        pages = [_page_path(p) for p in args.pages] or discover_pages()
        results = [run_plan(plan_page(p), args, make_sandbox) for p in pages]
    except HarnessError as e:
        print(f"docs: harness error: {e}", file=sys.stderr)
        return 2
    if len(results) > 1:
        print(f"docs: {results.count(True)} of {len(results)} pages pass")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
