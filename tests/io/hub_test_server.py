#!/usr/bin/env python3
"""A stand-in for the Hugging Face Hub on 127.0.0.1, for tests (stdlib only).

Serves model directories in the hub's URL layout, with the headers the hub
sends, so qloom's hub client (and huggingface_hub itself) can be tested
without the internet:

  GET  /api/models/{org}/{name}/revision/{rev}   repo info: sha, siblings (size, blobId, lfs)
  GET  /api/models/{org}/{name}/tree/{rev}       recursive file listing (huggingface_hub)
  HEAD/GET /{org}/{name}/resolve/{rev}/{file}    regular files: 200 + ETag "<git blob sha1>";
                                                 LFS files: 302 to the CDN + X-Linked-Etag
                                                 "<sha256>", X-Linked-Size; always X-Repo-Commit
  HEAD/GET /cdn/{sha256}                         LFS bytes, with Range (206) support

LFS files are *.safetensors, *.model, *.bin, *.gguf, *.pt, *.pth and anything
over 10 MB, as .gitattributes makes them on the hub. The CDN is reached under
another host name (--cdn-host, default "localhost") so that, as on the hub,
clients do not follow the redirect in their HEAD request.

Prints "PORT <n>" on stdout once listening; runs until killed.

Fault injection: --token (401 without "Authorization: Bearer TOKEN"),
--forbidden (403 GatedRepo), --drop-after N --drop-count K (the first K CDN
bodies are cut after N bytes), --corrupt FILE (one byte flipped on the CDN),
--log PATH (one JSON line per request: method, path, range, and name: the
repo file a resolve or CDN request is for).

Hostile modes (a server qloom must not trust): --commit VALUE (the listing's
sha and X-Repo-Commit say VALUE, e.g. "../../victim"; VALUE is also accepted
as a revision), --lie FILE=MODE for the size of FILE: "huge" (headers
announce 10^12 bytes, the body never ends), "endless" (true headers, a
body without Content-Length that never ends), "nolength" (no size in any
header, a body that never ends), "listed" (the listing says 1000 bytes more
than the headers). Hostile names need no mode: --extra org/name:../x=5 lists
a file named "../x".
"""
import argparse
import hashlib
import http.server
import json
import os
import socketserver
import sys
import threading
import urllib.parse

LFS_SUFFIXES = (".safetensors", ".model", ".bin", ".gguf", ".pt", ".pth")
LFS_MIN_SIZE = 10 * 1000 * 1000


class RepoFile:
    def __init__(self, name, data):
        self.name = name
        self.data = data
        self.size = len(data)
        self.git_sha1 = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        self.lfs = name.endswith(LFS_SUFFIXES) or len(data) > LFS_MIN_SIZE
        self.sha256 = hashlib.sha256(data).hexdigest() if self.lfs else None
        if self.lfs:
            pointer = ("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n"
                       % (self.sha256, self.size)).encode()
            self.pointer_size = len(pointer)
            self.pointer_sha1 = hashlib.sha1(b"blob %d\0" % len(pointer) + pointer).hexdigest()


class Repo:
    def __init__(self, repo_id, files):
        self.repo_id = repo_id
        self.files = {f.name: f for f in files}
        h = hashlib.sha1(repo_id.encode())
        for f in sorted(files, key=lambda f: f.name):
            h.update(f.name.encode() + b"\0" + f.git_sha1.encode())
        self.commit = h.hexdigest()


def synthetic(size):
    block = bytes((i * 7 + 3) % 256 for i in range(1 << 16))
    return (block * (size // len(block) + 1))[:size]


class State:
    def __init__(self, args):
        self.repos = {}
        for spec in args.repo:
            repo_id, _, path = spec.partition("=")
            files = []
            for root, _, names in os.walk(path):
                for n in names:
                    full = os.path.join(root, n)
                    with open(full, "rb") as fh:
                        files.append(RepoFile(os.path.relpath(full, path).replace(os.sep, "/"), fh.read()))
            self.repos[repo_id] = files
        for spec in args.extra:
            left, _, size = spec.partition("=")
            repo_id, _, name = left.partition(":")
            self.repos.setdefault(repo_id, []).append(RepoFile(name, synthetic(int(size))))
        self.repos = {k: Repo(k, v) for k, v in self.repos.items()}
        if args.commit:
            for r in self.repos.values():
                r.commit = args.commit
        self.lies = dict(spec.split("=", 1) for spec in args.lie)
        self.by_sha = {f.sha256: f for r in self.repos.values() for f in r.files.values() if f.lfs}
        self.args = args
        self.drops_left = args.drop_count
        self.lock = threading.Lock()

    def log(self, method, path, rng, name):
        if not self.args.log:
            return
        with self.lock, open(self.args.log, "a") as fh:
            fh.write(json.dumps({"method": method, "path": path, "range": rng, "name": name}) + "\n")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "hub-test-server/1"

    def log_message(self, *a):  # quiet
        pass

    # ---- helpers ----
    def send(self, status, headers=None, body=b"", head=False):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head and body:
            self.wfile.write(body)

    def error(self, status, code, message, extra=None, head=False):
        h = {"X-Error-Code": code, "X-Error-Message": message, "Content-Type": "application/json"}
        h.update(extra or {})
        self.send(status, h, json.dumps({"error": message}).encode(), head)

    def authorized(self, head):
        st = self.server.state
        if st.args.forbidden:
            self.error(403, "GatedRepo", "Access to this repo is restricted.", head=head)
            return False
        if st.args.token and self.headers.get("Authorization") != "Bearer " + st.args.token:
            self.error(401, "", "Invalid username or password.", head=head)
            return False
        return True

    def repo_and_rev(self, repo_id, rev, head):
        st = self.server.state
        repo = st.repos.get(repo_id)
        if repo is None:
            self.error(404, "RepoNotFound", "Repository not found", head=head)
            return None
        if rev not in ("main", repo.commit):
            self.error(404, "RevisionNotFound", "Invalid rev id: " + rev, head=head)
            return None
        return repo

    # ---- routes ----
    def do_HEAD(self):
        self.route(head=True)

    def do_GET(self):
        self.route(head=False)

    def route(self, head):
        st = self.server.state
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        parts = path.strip("/").split("/")
        name = urllib.parse.parse_qs(url.query).get("name", [None])[0]
        if name is None and len(parts) >= 5 and parts[2] == "resolve":
            name = "/".join(parts[4:])
        st.log(self.command, path, self.headers.get("Range"), name)
        if parts[:1] == ["cdn"] and len(parts) == 2:
            return self.cdn(parts[1], head)
        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] in ("revision", "tree"):
            if not self.authorized(head):
                return
            repo = self.repo_and_rev(parts[2] + "/" + parts[3], parts[5], head)
            if repo is None:
                return
            return self.api(repo, parts[4], head)
        if len(parts) >= 5 and parts[2] == "resolve":
            if not self.authorized(head):
                return
            repo = self.repo_and_rev(parts[0] + "/" + parts[1], parts[3], head)
            if repo is None:
                return
            return self.resolve(repo, "/".join(parts[4:]), head)
        self.error(404, "", "Not found", head=head)

    def api(self, repo, kind, head):
        if kind == "revision":
            sib = []
            for f in sorted(repo.files.values(), key=lambda f: f.name):
                size = f.size + (1000 if self.server.state.lies.get(f.name) == "listed" else 0)
                e = {"rfilename": f.name, "size": size, "blobId": f.pointer_sha1 if f.lfs else f.git_sha1}
                if f.lfs:
                    e["lfs"] = {"sha256": f.sha256, "size": size, "pointerSize": f.pointer_size}
                sib.append(e)
            body = {"_id": "x", "id": repo.repo_id, "modelId": repo.repo_id, "sha": repo.commit,
                    "private": False, "gated": False, "disabled": False, "siblings": sib}
        else:
            body = []
            for f in sorted(repo.files.values(), key=lambda f: f.name):
                e = {"type": "file", "path": f.name, "size": f.size,
                     "oid": f.pointer_sha1 if f.lfs else f.git_sha1}
                if f.lfs:
                    e["lfs"] = {"oid": f.sha256, "size": f.size, "pointerSize": f.pointer_size}
                body.append(e)
        self.send(200, {"Content-Type": "application/json"}, json.dumps(body).encode(), head)

    def lying(self, status, headers, data, mode, head):
        """Answers with `mode`'s lie about the size of `data` (see --lie)."""
        self.send_response(status)
        for k, v in headers.items():
            if mode == "nolength" and k == "X-Linked-Size":
                continue
            self.send_header(k, "1000000000000" if mode == "huge" and k == "X-Linked-Size" else v)
        if mode == "huge":
            self.send_header("Content-Length", "1000000000000")
        elif mode == "endless" and head:
            self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if head:
            return
        chunk, sent = data + synthetic(1 << 20), 0
        try:
            while sent < (4 << 30):  # "never" ends: 4 GiB at most
                self.wfile.write(chunk)
                sent += len(chunk)
        except OSError:
            pass

    def resolve(self, repo, name, head):
        f = repo.files.get(name)
        common = {"X-Repo-Commit": repo.commit, "Accept-Ranges": "bytes"}
        if f is None:
            return self.error(404, "EntryNotFound", "Entry not found", common, head)
        mode = self.server.state.lies.get(name)
        if mode in ("huge", "endless", "nolength") and not f.lfs:
            common.update({"ETag": '"%s"' % f.git_sha1, "Content-Type": "application/octet-stream"})
            return self.lying(200, common, f.data, mode, head)
        if f.lfs:
            host = self.server.state.args.cdn_host
            loc = "http://%s:%d/cdn/%s?name=%s" % (host, self.server.server_port, f.sha256,
                                                    urllib.parse.quote(name))
            common.update({"Location": loc, "ETag": '"%s"' % f.pointer_sha1,
                           "X-Linked-Etag": '"%s"' % f.sha256, "X-Linked-Size": str(f.size)})
            if mode == "huge":
                common["X-Linked-Size"] = "1000000000000"
            elif mode == "nolength":
                del common["X-Linked-Size"]
            return self.send(302, common, b"", head)
        common.update({"ETag": '"%s"' % f.git_sha1, "Content-Type": "application/octet-stream"})
        self.send(200, common, f.data, head)

    def cdn(self, sha, head):
        st = self.server.state
        f = st.by_sha.get(sha)
        if f is None:
            return self.error(404, "", "No such object", head=head)
        data = f.data
        if st.args.corrupt == f.name:
            data = bytearray(data)
            data[len(data) // 2] ^= 0xFF
            data = bytes(data)
        mode = st.lies.get(f.name)
        if mode in ("huge", "endless", "nolength"):
            return self.lying(200, {"ETag": '"%s"' % f.sha256}, data, mode, head)
        start, status = 0, 200
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            if start >= len(data):
                return self.send(416, {"Content-Range": "bytes */%d" % len(data)}, b"", head)
            status = 206
        body = memoryview(data)[start:]
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", '"%s"' % f.sha256)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        self.end_headers()
        if head:
            return
        limit = len(body)
        with st.lock:
            if st.drops_left > 0 and limit > st.args.drop_after:
                st.drops_left -= 1
                limit = st.args.drop_after
        step = 1 << 20
        for off in range(0, limit, step):
            self.wfile.write(body[off:min(off + step, limit)])
        if limit < len(body):
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", action="append", default=[], help="org/name=DIR")
    ap.add_argument("--extra", action="append", default=[], help="org/name:FILE=SIZE (synthetic bytes)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--cdn-host", default="localhost")
    ap.add_argument("--token", default="")
    ap.add_argument("--forbidden", action="store_true")
    ap.add_argument("--drop-after", type=int, default=0)
    ap.add_argument("--drop-count", type=int, default=0)
    ap.add_argument("--corrupt", default="")
    ap.add_argument("--log", default="")
    ap.add_argument("--commit", default="", help="the commit id the server claims (hostile)")
    ap.add_argument("--lie", action="append", default=[], help="FILE=huge|endless|nolength|listed")
    args = ap.parse_args()
    srv = Server(("127.0.0.1", args.port), Handler)
    srv.state = State(args)
    print("PORT %d" % srv.server_port, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
