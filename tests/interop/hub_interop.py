#!/usr/bin/env python3
"""Cross-check qloom's Hugging Face Hub cache against huggingface_hub itself,
both talking to tests/io/hub_test_server.py on 127.0.0.1:

1. qloom downloads the demo model (qloom quantize --model_dir demo/stories);
   huggingface_hub, pointed at the same cache, finds the snapshot with
   local_files_only=True (snapshot_download and hf_hub_download), scans the
   cache without complaint, and an online snapshot_download fetches no bytes.
2. huggingface_hub downloads the model into a fresh cache; with the server
   stopped, qloom inspects and quantizes it from that cache, offline and not.

Exit code 0 = all checks passed, 1 = a mismatch (printed), 77 = huggingface_hub
is not installed (ctest reports the test as skipped).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

try:
    import huggingface_hub  # noqa: F401  (imported again in children with the env set)
except ImportError as e:  # pragma: no cover
    print(f"SKIPPED: huggingface_hub not available ({e}); run scripts/setup")
    sys.exit(77)

REPO = "demo/stories"
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


class Server:
    def __init__(self, script, demo, log):
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, script, "--repo", f"{REPO}={demo}", "--log", log],
            stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"hub test server did not start: {line!r}")
        self.endpoint = f"http://127.0.0.1:{int(line.split()[1])}"

    def fetched(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as fh:
            reqs = [json.loads(x) for x in fh if x.strip()]
        return sorted({r["name"] for r in reqs if r["method"] == "GET" and r.get("name")})

    def clear(self):
        if os.path.exists(self.log):
            os.remove(self.log)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def env_for(endpoint, cache, home, offline=False):
    env = dict(os.environ)
    for k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH"):
        env.pop(k, None)
    env.update(HF_ENDPOINT=endpoint, HF_HUB_CACHE=cache, HF_HOME=home,
               HF_HUB_OFFLINE="1" if offline else "0", HF_HUB_DISABLE_TELEMETRY="1",
               HF_HUB_DISABLE_PROGRESS_BARS="1", HF_HUB_DISABLE_XET="1")
    return env


def run(cmd, env):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def hub(code, env):
    """Runs `code` with huggingface_hub in a child (it reads HF_* at import); returns its stdout."""
    rc, out, err = run([sys.executable, "-c", code], env)
    if rc != 0:
        failures.append(f"huggingface_hub snippet failed: {err.strip()[-800:]}")
        print("FAIL: huggingface_hub:", err.strip()[-800:])
    return out.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qloom", required=True)
    ap.add_argument("--server", required=True)
    ap.add_argument("--demo-model", required=True)
    a = ap.parse_args()
    demo_files = sorted(os.listdir(a.demo_model))

    with tempfile.TemporaryDirectory(prefix="qloom-hub-interop-") as tmp:
        home = os.path.join(tmp, "hf")
        srv = Server(a.server, a.demo_model, os.path.join(tmp, "server.log"))
        try:
            # 1. qloom downloads; huggingface_hub reads.
            cache_a = os.path.join(tmp, "cache-a")
            env = env_for(srv.endpoint, cache_a, home)
            rc, out, err = run([a.qloom, "quantize", "--model_dir", REPO, "--output_dir",
                                os.path.join(tmp, "q1"), "--quant_scheme", "ptpc_fp8", "--progress", "off"], env)
            check(rc == 0, f"qloom quantize from the hub failed ({rc}): {err[-800:]}")
            check(srv.fetched() == demo_files, f"qloom fetched {srv.fetched()}, expected {demo_files}")
            snap = hub("from huggingface_hub import snapshot_download as s\n"
                       f"print(s({REPO!r}, local_files_only=True))", env_for(srv.endpoint, cache_a, home, True))
            check(snap.startswith(os.path.join(cache_a, "models--demo--stories", "snapshots")),
                  f"huggingface_hub found no snapshot of qloom's download: {snap!r}")
            if snap:
                for f in demo_files:
                    with open(os.path.join(snap, f), "rb") as x, open(os.path.join(a.demo_model, f), "rb") as y:
                        check(x.read() == y.read(), f"{f}: bytes differ in the snapshot")
            cfg = hub("from huggingface_hub import hf_hub_download as d\n"
                      f"print(d({REPO!r}, 'config.json', local_files_only=True))",
                      env_for(srv.endpoint, cache_a, home, True))
            check(cfg == os.path.join(snap, "config.json"), f"hf_hub_download gave {cfg!r}")
            scan = hub("from huggingface_hub import scan_cache_dir\n"
                       "i = scan_cache_dir()\n"
                       "print(len(i.repos), [len(r.revisions) for r in i.repos], len(i.warnings),"
                       " sorted(f.file_name for r in i.repos for v in r.revisions for f in v.files))",
                       env_for(srv.endpoint, cache_a, home, True))
            check(scan == f"1 [1] 0 {demo_files}", f"scan_cache_dir of qloom's cache: {scan}")
            srv.clear()
            hub(f"from huggingface_hub import snapshot_download as s\nprint(s({REPO!r}))", env)
            check(srv.fetched() == [], f"huggingface_hub re-downloaded {srv.fetched()} from qloom's cache")

            # 2. huggingface_hub downloads; qloom reads (server stopped).
            cache_b = os.path.join(tmp, "cache-b")
            hub(f"from huggingface_hub import snapshot_download as s\nprint(s({REPO!r}))",
                env_for(srv.endpoint, cache_b, home))
        finally:
            endpoint = srv.endpoint
            srv.stop()
        rc, out, err = run([a.qloom, "inspect", REPO, "--json"], env_for(endpoint, cache_b, home, True))
        check(rc == 0, f"qloom inspect (offline) of huggingface_hub's cache failed ({rc}): {err[-800:]}")
        if rc == 0:
            j = json.loads(out)
            check(j.get("model_type") == "llama" and j.get("tensors", 0) > 0,
                  f"qloom inspect of huggingface_hub's snapshot: {out[:400]}")
        for offline in (True, False):
            rc, out, err = run([a.qloom, "quantize", "--model_dir", REPO, "--output_dir",
                                os.path.join(tmp, f"q-{offline}"), "--quant_scheme", "ptpc_fp8", "--progress", "off"],
                               env_for(endpoint, cache_b, home, offline))
            check(rc == 0, f"qloom quantize (offline={offline}) from huggingface_hub's cache failed: {err[-800:]}")

    if failures:
        print(f"hub interop: {len(failures)} failure(s)")
        return 1
    print("hub interop: qloom and huggingface_hub share the cache both ways")
    return 0


if __name__ == "__main__":
    sys.exit(main())
