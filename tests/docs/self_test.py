#!/usr/bin/env python3
"""Self-test of the docs harness (CTest docs.harness_self_test): runs run_docs.py
on the fixture pages of tests/docs/fixtures/ and checks that each passes or
fails as it should, with a message naming the page and line at fault.

  self_test.py [--qloom PATH]
"""
import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FIXTURES = HERE / "fixtures"


def line_of(page, needle):
    """'tests/docs/fixtures/PAGE:N' of the first line of PAGE holding `needle`."""
    for n, line in enumerate((FIXTURES / page).read_text().split("\n"), 1):
        if needle in line:
            return f"tests/docs/fixtures/{page}:{n}"
    raise AssertionError(f"fixture {page} has no line with {needle!r}")


def cases():
    """(page, exit status, strings the output must hold, strings it must not hold)."""
    return [
        ("pass.md", 0, [
            "PASS — 8 commands in 2 blocks run, 1 not run, 0 failure(s)",
            f"not run  tests/docs/fixtures/pass.md:{_fence_line('pass.md', 'qloom serve')}  (needs a GPU)",
            f"ok    {line_of('pass.md', '$ qloom inspect no-such-model-dir')}",
            f"ok    {line_of('pass.md', '$ cat note.txt')}",
        ], ["FAIL"]),
        ("wrong_output.md", 1, [
            f"FAIL  {line_of('wrong_output.md', '$ qloom inspect')}",
            f"MISSING {line_of('wrong_output.md', 'layers      6')}",
            "no real output line matches `  layers      6   hidden 64 ...`",
            "    3|   layers      5   hidden 64",  # the real output is shown
        ], ["echo the page stops"]),
        ("wrong_order.md", 1, [
            f"MISSING {line_of('wrong_order.md', 'arch        llama')}",
            "that line is real output (stdout line 2), but not after the lines above it",
        ], []),
        ("wrong_exit.md", 1, [
            f"FAIL  {line_of('wrong_exit.md', '$ qloom inspect')}",
            "    the whole command:\n      qloom inspect \\\n          no-such-model-dir\n",
            "exited 2, expected 0",
            "qloom: error (not found): no-such-model-dir",
        ], []),
        ("unexecuted_qloom.md", 1, [
            f"FAIL  {line_of('unexecuted_qloom.md', 'qloom quantize')}: a `sh` block runs qloom but is not executed",
        ], ["make demo`"]),
        ("bad_not_run.md", 1, [
            f"FAIL  {line_of('bad_not_run.md', 'not run ()')}: `<!-- docs: not run () -->` states no reason",
            f"FAIL  {line_of('bad_not_run.md', 'qloom quantize')}: `--no_such_flag` is not an option of `qloom quantize`",
            "(needs network)",
        ], []),
        ("background_fails.md", 1, [
            f"FAIL  {line_of('background_fails.md', '$ qloom serve')}",
            "exited 2, expected 0",
            "qloom: error (not found): no-such-model-dir",
        ], []),
        ("timeout.md", 1, [f"FAIL  {line_of('timeout.md', '$ sleep 30')}", "timed out after 1.0 s (killed)"], []),
    ]


def _fence_line(page, needle):
    """Line number of the fence opening the block that holds `needle`."""
    lines = (FIXTURES / page).read_text().split("\n")
    n = next(i for i, l in enumerate(lines) if needle in l)
    return next(i for i in range(n, -1, -1) if lines[i].startswith("```")) + 1


def check(qloom, page, want_rc, must, must_not):
    start = time.monotonic()
    extra = ["--timeout", "1"] if page == "timeout.md" else []
    r = subprocess.run([sys.executable, str(HERE / "run_docs.py"), "--qloom", qloom, *extra,
                        f"tests/docs/fixtures/{page}"], capture_output=True, text=True, timeout=300, cwd=REPO)
    out = r.stdout + r.stderr
    errors = [f"exit status {r.returncode}, expected {want_rc}"] if r.returncode != want_rc else []
    errors += [f"output lacks: {s}" for s in must if s not in out]
    errors += [f"output holds: {s}" for s in must_not if s in out]
    status = "FAIL" if errors else "ok"
    print(f"{status:<4}  {page}: the harness exits {r.returncode} ({time.monotonic() - start:.1f} s)")
    if errors:
        print("\n".join("      " + e for e in errors) + "\n      harness output:\n" +
              "\n".join("      | " + l for l in out.splitlines()))
    return not errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qloom", default=str(REPO / "build" / "qloom"))
    args = ap.parse_args()
    results = [check(args.qloom, *c) for c in cases()]
    print(f"docs harness self-test: {results.count(True)} of {len(results)} fixture pages as expected")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
