#!/usr/bin/env python3
"""A local stand-in for the Hugging Face Hub, for attnviz's download tests: it serves tiny
models through the hub's endpoints and headers, on 127.0.0.1 only, and stops by itself.

    hub_server.py [--lifetime S] [--serve ORG/NAME=DIR ...] [--big-mb N] [--rate-mb R] [--port-file F]

Prints the port on its first line of stdout (and writes it to --port-file). Endpoints, as
huggingface_hub speaks to the hub:
  GET       /api/models/ORG/NAME/revision/REV   {"id", "sha", "siblings": [{"rfilename"}], ...}
  GET       /api/models/ORG/NAME/tree/REV       [{"type", "path", "size", "oid", "lfs"}]
  HEAD, GET /ORG/NAME/resolve/REV/FILE          a regular file: 200, ETag = git blob oid;
                                                an LFS file: 302 to /_cdn/..., X-Linked-Etag =
                                                its sha256, X-Linked-Size; X-Repo-Commit always
  HEAD, GET /_cdn/ORG/NAME/COMMIT/FILE          the bytes, Range answered with 206 (on a second
                                                port: another origin, as the hub's CDN is)
  GET       /_stats                             what was asked so far (JSON), for the tests

Built-in models (synthetic bytes: the download tests need files, not networks):
  tiny/model     config, generation config, model.safetensors (LFS, 3 MB), a SentencePiece pair,
                 vocab.json, tokenizer config; and files a model does not need (tf_model.h5,
                 flax_model.msgpack, onnx/encoder_model.onnx, pytorch_model.bin, README.md)
  tiny/sharded   model.safetensors.index.json and its two shards
  tiny/bin-only  pytorch_model.bin, spiece.model
  faults/drop    tiny/model, but the first GET of model.safetensors closes the connection halfway
  faults/badsha  tiny/model, but model.safetensors's X-Linked-Etag is not its sha256
  faults/private 401 without "Authorization: Bearer hf_good_token" (API and files)
  faults/gated   the API answers; files 403 (X-Error-Code: GatedRepo) without that token
  faults/flaky   every path answers 500 twice, then as tiny/model
  faults/down    always 500
  faults/renamed redirects (relative, 307) to tiny/model, as the hub does for a renamed repository
  faults/huge    tiny/model, but the API and the headers say model.safetensors is 2^50 bytes (1 PiB)
  faults/vast    the same with 10^20 bytes: more digits than a 64-bit size holds
  bench/big      with --big-mb N: model.safetensors of N MB (LFS), for the speed benchmark
Every other id answers 404 (X-Error-Code: RepoNotFound).
"""
import argparse
import hashlib
import http.server
import json
import os
import random
import socket
import sys
import tempfile
import threading
import time
import urllib.parse

GOOD_TOKEN = "hf_good_token"
LFS_EXT = (".safetensors", ".bin", ".h5", ".msgpack", ".onnx", ".model", ".ot", ".tflite", ".spm")


def git_oid(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class File:
    def __init__(self, name, data=None, path=None):
        self.name, self.data, self.path = name, data, path
        if data is not None:
            self.size = len(data)
            self.sha256 = hashlib.sha256(data).hexdigest()
            self.oid = git_oid(data)
        else:
            self.size = os.path.getsize(path)
            h = hashlib.sha256()
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            self.sha256 = h.hexdigest()
            self.oid = hashlib.sha1(self.sha256.encode()).hexdigest()  # stands in for the git oid
        self.lfs = name.endswith(LFS_EXT)


def claimed_size(repo, f):
    """The size the API and the headers give a file: its own, or faults/huge's 1 PiB weights
    (faults/vast's 10^20 bytes)."""
    if f.name == "model.safetensors" and repo.fault in ("huge", "vast"):
        return 1 << 50 if repo.fault == "huge" else 10 ** 20
    return f.size


class Repo:
    def __init__(self, rid, files, fault=None):
        self.id, self.files, self.fault = rid, {f.name: f for f in files}, fault
        digest = hashlib.sha1(rid.encode())
        for f in files:
            digest.update(f.name.encode() + f.sha256.encode())
        self.commit = digest.hexdigest()


def synthetic_files(seed):
    rnd = random.Random(seed)
    blob = lambda n: bytes(rnd.getrandbits(8) for _ in range(256)) * (n // 256)
    config = {"model_type": "marian", "d_model": 16, "vocab_size": 100, "architectures": ["MarianMTModel"]}
    return [
        File("config.json", json.dumps(config, indent=2).encode()),
        File("generation_config.json", b'{"max_length": 32, "num_beams": 1}'),
        File("model.safetensors", blob(3 << 20)),
        File("pytorch_model.bin", blob(1 << 16)),
        File("source.spm", blob(4096)),
        File("target.spm", blob(4096)),
        File("vocab.json", b'{"<pad>": 0, "</s>": 1, "<unk>": 2}'),
        File("tokenizer_config.json", b'{"model_max_length": 512}'),
        File("special_tokens_map.json", b'{"eos_token": "</s>"}'),
        File("tf_model.h5", blob(8192)),
        File("flax_model.msgpack", blob(8192)),
        File("onnx/encoder_model.onnx", blob(8192)),
        File("README.md", b"# a tiny model\n"),
        File(".gitattributes", b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"),
    ]


def make_repos(args):
    repos = {}
    add = lambda r: repos.__setitem__(r.id, r)
    add(Repo("tiny/model", synthetic_files(1)))
    index = {"metadata": {"total_size": 2 << 20},
             "weight_map": {"a.weight": "model-00001-of-00002.safetensors", "b.weight": "model-00002-of-00002.safetensors"}}
    rnd = random.Random(2)
    shard = lambda: bytes(rnd.getrandbits(8) for _ in range(1 << 20))
    add(Repo("tiny/sharded", [File("config.json", b'{"model_type": "marian"}'),
                              File("model.safetensors.index.json", json.dumps(index).encode()),
                              File("model-00001-of-00002.safetensors", shard()),
                              File("model-00002-of-00002.safetensors", shard()),
                              File("tokenizer.json", b'{"version": "1.0"}')]))
    add(Repo("tiny/bin-only", [File("config.json", b'{"model_type": "marian"}'),
                               File("pytorch_model.bin", shard()), File("spiece.model", b"x" * 100)]))
    for fault in ("drop", "badsha", "private", "gated", "flaky", "down", "huge", "vast"):
        add(Repo("faults/" + fault, synthetic_files(1), fault))
    add(Repo("faults/renamed", [], "renamed"))
    for spec in args.serve:
        rid, _, folder = spec.partition("=")
        files = []
        for root, _, names in os.walk(folder):
            for n in sorted(names):
                p = os.path.join(root, n)
                files.append(File(os.path.relpath(p, folder), path=p))
        add(Repo(rid, files))
    if args.big_mb:
        tmp = tempfile.NamedTemporaryFile(prefix="hub_big_", delete=False)
        block = os.urandom(1 << 20)
        for _ in range(args.big_mb):
            tmp.write(block)
        tmp.close()
        args.cleanup.append(tmp.name)
        add(Repo("bench/big", [File("config.json", b'{"model_type": "marian"}'),
                               File("model.safetensors", path=tmp.name)]))
    return repos


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "attnviz-test-hub"

    def log_message(self, fmt, *args):
        pass

    # --- bookkeeping ---------------------------------------------------------------
    def count(self, key):
        with self.server.lock:
            n = self.server.counts.get(key, 0) + 1
            self.server.counts[key] = n
            self.server.log.append({"method": self.command, "path": self.path,
                                    "range": self.headers.get("Range"),
                                    "auth": self.headers.get("Authorization") is not None})
        return n

    def answer(self, status, body=b"", headers=None, content_type="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, status, code, message):
        self.answer(status, json.dumps({"error": message}).encode(), {"X-Error-Code": code, "X-Error-Message": message})

    def do_HEAD(self):
        self.route()

    def do_GET(self):
        self.route()

    # --- routes ----------------------------------------------------------------------
    def route(self):
        path = urllib.parse.urlsplit(self.path).path
        parts = [urllib.parse.unquote(p) for p in path.split("/")[1:]]
        if parts[:1] == ["_stats"]:
            with self.server.lock:
                body = json.dumps({"counts": self.server.counts, "log": self.server.log}).encode()
            return self.answer(200, body)
        if parts[:1] == ["_cdn"] and len(parts) >= 5:
            return self.cdn("/".join(parts[1:3]), parts[3], "/".join(parts[4:]))
        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] in ("revision", "tree"):
            return self.api("/".join(parts[2:4]), parts[4], "/".join(parts[5:]), path)
        if len(parts) >= 5 and parts[2] == "resolve":
            return self.resolve("/".join(parts[:2]), parts[3], "/".join(parts[4:]), path)
        self.error(404, "EntryNotFound", "no such page")

    def repo_or_fail(self, rid, path, files_request):
        n = self.count(self.command + " " + path)
        repo = self.server.repos.get(rid)
        if repo is None:
            self.error(404, "RepoNotFound", "Repository not found")
            return None
        authorised = self.headers.get("Authorization") == "Bearer " + GOOD_TOKEN
        if repo.fault == "down" or (repo.fault == "flaky" and n <= 2):
            self.error(500, "", "Internal Error")
            return None
        if repo.fault == "private" and not authorised:
            self.error(401, "RepoNotFound", "Invalid credentials in Authorization header")
            return None
        if repo.fault == "gated" and files_request and not authorised:
            self.error(403, "GatedRepo", "Access to model %s is restricted. You must have access to it." % rid)
            return None
        return repo

    def redirect_renamed(self, path, rid):
        self.count(self.command + " " + path)
        self.answer(307, b"", {"Location": path.replace(rid, "tiny/model", 1)})

    def api(self, rid, kind, rev, path):
        if rid == "faults/renamed":
            return self.redirect_renamed(path, rid)
        repo = self.repo_or_fail(rid, path, False)
        if repo is None:
            return
        if rev not in ("main", repo.commit):
            return self.error(404, "RevisionNotFound", "Invalid rev id: " + rev)
        if kind == "revision":
            body = {"id": repo.id, "modelId": repo.id, "sha": repo.commit, "private": repo.fault == "private",
                    "gated": "auto" if repo.fault == "gated" else False, "disabled": False, "tags": [],
                    "lastModified": "2026-11-01T00:00:00.000Z", "createdAt": "2026-11-01T00:00:00.000Z",
                    "siblings": [{"rfilename": n} for n in sorted(repo.files)]}
        else:
            body = []
            for f in sorted(repo.files.values(), key=lambda f: f.name):
                size = claimed_size(repo, f)
                e = {"type": "file", "path": f.name, "size": size, "oid": f.oid}
                if f.lfs:
                    e["lfs"] = {"oid": f.sha256, "size": size, "pointerSize": 134}
                body.append(e)
        self.answer(200, json.dumps(body).encode())

    def resolve(self, rid, rev, name, path):
        if rid == "faults/renamed":
            return self.redirect_renamed(path, rid)
        repo = self.repo_or_fail(rid, path, True)
        if repo is None:
            return
        if rev not in ("main", repo.commit):
            return self.error(404, "RevisionNotFound", "Invalid rev id: " + rev)
        f = repo.files.get(name)
        if f is None:
            return self.error(404, "EntryNotFound", "Entry not found")
        headers = {"X-Repo-Commit": repo.commit, "Accept-Ranges": "bytes"}
        if not f.lfs:
            headers["ETag"] = '"%s"' % f.oid
            return self.send_file(f, headers)
        sha = f.sha256 if repo.fault != "badsha" else hashlib.sha256(b"another file").hexdigest()
        headers.update({"X-Linked-Etag": '"%s"' % sha, "X-Linked-Size": str(claimed_size(repo, f)), "ETag": '"%s"' % f.oid,
                        "Location": "http://127.0.0.1:%d/_cdn/%s/%s/%s" % (self.server.cdn_port, rid,
                                                                          repo.commit, urllib.parse.quote(name))})
        self.answer(302, b"", headers)

    def cdn(self, rid, commit, name):
        n = self.count(self.command + " /_cdn/" + rid + "/" + name)
        repo = self.server.repos.get(rid)
        f = repo.files.get(name) if repo else None
        if f is None or commit != repo.commit:
            return self.error(404, "EntryNotFound", "no such object")
        if repo.fault == "flaky" and n <= 2:
            return self.error(500, "", "Internal Error")
        headers = {"ETag": '"%s"' % f.sha256, "Accept-Ranges": "bytes"}
        drop = repo.fault == "drop" and name == "model.safetensors" and self.command == "GET" and n == 1
        self.send_file(f, headers, drop=drop)

    def send_file(self, f, headers, drop=False):
        start, status = 0, 200
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and self.command == "GET":
            first = rng[6:].split("-")[0]
            start = int(first) if first.isdigit() else 0
            if start >= f.size:
                return self.answer(416, b"", {"Content-Range": "bytes */%d" % f.size})
            status = 206
            headers["Content-Range"] = "bytes %d-%d/%d" % (start, f.size - 1, f.size)
        count = f.size - start
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(count))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command == "HEAD":
            return
        send = count // 2 if drop else count
        if f.data is not None:
            self.wfile.write(f.data[start:start + send])
        elif self.server.rate:  # paced as a network link of that many MB/s would be
            with open(f.path, "rb") as src:
                self.wfile.flush()
                t0, sent, step = time.monotonic(), 0, 1 << 20
                while sent < send:
                    n = self.connection.sendfile(src, start + sent, min(step, send - sent))
                    if n <= 0:
                        break
                    sent += n
                    ahead = sent / (self.server.rate * 1e6) - (time.monotonic() - t0)
                    if ahead > 0:
                        time.sleep(ahead)
        else:
            with open(f.path, "rb") as src:
                self.wfile.flush()
                self.connection.sendfile(src, start, send)
        if drop:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lifetime", type=float, default=600, help="stop after this many seconds (default 600)")
    ap.add_argument("--serve", action="append", default=[], help="ORG/NAME=DIR: serve a model folder")
    ap.add_argument("--big-mb", type=int, default=0, help="serve bench/big with a file of this many MB")
    ap.add_argument("--rate-mb", type=float, default=0, help="send served folders' and bench files at most this many MB/s")
    ap.add_argument("--port-file", help="also write the port here")
    args = ap.parse_args()
    args.cleanup = []
    # The hub, and its "CDN" on another port: another origin, as the hub's LFS storage is, so a
    # client must not send the token there and reads an LFS file's metadata from the redirect.
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    cdn = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    repos, lock, counts, log = make_repos(args), threading.Lock(), {}, []
    for s in (server, cdn):
        s.daemon_threads = True
        s.repos, s.lock, s.counts, s.log, s.cdn_port = repos, lock, counts, log, cdn.server_address[1]
        s.rate = args.rate_mb
    threading.Thread(target=cdn.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    port = server.server_address[1]
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(str(port))
        os.replace(args.port_file + ".tmp", args.port_file)
    print(port, flush=True)
    parent = os.getppid()

    def watchdog():  # bounded: stops after --lifetime, or when whoever started it is gone
        end = time.time() + args.lifetime
        while time.time() < end and os.getppid() == parent:
            time.sleep(0.2)
        cdn.shutdown()
        server.shutdown()

    threading.Thread(target=watchdog, daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        for p in args.cleanup:
            os.unlink(p)


if __name__ == "__main__":
    sys.exit(main())
