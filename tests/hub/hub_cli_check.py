#!/usr/bin/env python3
"""attnviz-cli download / cache list / cache delete against the local hub (hub_server.py on
127.0.0.1), as a user runs them; and the cache both ways with huggingface_hub and transformers.

    hub_cli_check.py cli     --cli ATTNVIZ_CLI --work DIR [--fixtures HF_FIXTURES]
    hub_cli_check.py interop --cli ATTNVIZ_CLI --work DIR --fixtures HF_FIXTURES

cli: download (progress on stderr, the snapshot on stdout), list, delete; --model ORG/NAME absent
from the cache says how to download it and downloads nothing; a file-size limit (ulimit -f) is
refused before anything looks complete; 403 explained; offline mode; a refs/main holding ".."
never opens a model outside snapshots/ (with the fixtures: a real model planted there).
interop: transformers opens, offline, the cache attnviz-cli wrote; attnviz-cli translates from a
cache huggingface_hub's snapshot_download wrote, both from the same server.
Exit 77 (skipped) when what a part needs is missing.
"""
import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)


class Server:
    def __init__(self, work, *args):
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "hub_server.py"), "--lifetime", "600", *args],
                                     stdout=subprocess.PIPE, text=True)
        self.endpoint = "http://127.0.0.1:" + self.proc.stdout.readline().strip()

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def run(cli, args, env, limit_kb=None):
    cmd = [cli, *args]
    if limit_kb:
        cmd = ["/bin/sh", "-c", 'ulimit -f %d; exec "$@"' % limit_kb, "sh", *cmd]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def env_for(endpoint, cache, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    env.update({"HF_ENDPOINT": endpoint, "HF_HUB_CACHE": cache, "HF_HOME": cache + "-home", "HF_HUB_DISABLE_XET": "1",
                "OMP_NUM_THREADS": "1"})
    env.update(extra)
    return env


def part_cli(args):
    server = Server(args.work)
    try:
        cache = os.path.join(args.work, "cache")
        env = env_for(server.endpoint, cache)
        code, out, err = run(args.cli, ["download", "tiny/model"], env)
        check(code == 0, "download exits 0 (%d: %s)" % (code, err.strip()[-300:]))
        snapshot = out.strip()
        check(os.path.isfile(os.path.join(snapshot, "config.json")), "the snapshot's path on stdout")
        check("model.safetensors" in err and "to fetch" in err, "the plan and the progress on stderr")
        check(not os.path.exists(os.path.join(snapshot, "tf_model.h5")), "no TensorFlow weights")
        code, out, _ = run(args.cli, ["cache", "list"], env)
        check(code == 0 and "tiny/model" in out and "main" in out, "cache list shows the model and its ref")
        code, out, _ = run(args.cli, ["cache", "list", "--json"], env)
        listed = json.loads(out)
        check(listed and listed[0]["id"] == "tiny/model" and listed[0]["revisions"][0]["refs"] == ["main"],
              "cache list --json")
        code, _, err = run(args.cli, ["cache", "delete", "tiny/model", "--revision", "v7"], env)
        check(code == 1 and "'main'" in err, "deleting a revision that is not there names those that are")
        code, _, err = run(args.cli, ["cache", "delete", "tiny/model", "--revision", "main"], env)
        check(code == 0 and not os.path.exists(os.path.join(cache, "models--tiny--model")), "cache delete removes it")
        code, _, err = run(args.cli, ["translate", "--model", "nobody/absent", "hello"], env)
        check(code == 1 and "attnviz-cli download nobody/absent" in err and "Open from the Hugging Face Hub" in err,
              "--model ORG/NAME absent says how to download it (%s)" % err.strip()[-200:])
        check(not os.path.exists(os.path.join(cache, "models--nobody--absent")), "... and downloads nothing")
        # A file-size limit below the weights: refused before anything is written that looks complete.
        code, _, err = run(args.cli, ["download", "tiny/model"], env, limit_kb=1024)
        repo = os.path.join(cache, "models--tiny--model")
        check(code == 1 and "ulimit -f" in err, "a file-size limit is refused up front (%s)" % err.strip()[-200:])
        check(not os.path.exists(os.path.join(repo, "refs", "main")), "... no ref written")
        snaps = os.path.join(repo, "snapshots")
        check(not any(os.path.exists(os.path.join(snaps, s, "config.json")) for s in
                      (os.listdir(snaps) if os.path.isdir(snaps) else [])), "... no snapshot with a config.json")
        code, _, err = run(args.cli, ["download", "faults/gated"], env)
        check(code == 1 and "403" in err and "accept its licence at " + server.endpoint + "/faults/gated" in err.lower()
              and "HF_TOKEN" in err, "403 says to accept the licence and set HF_TOKEN")
        code, out, _ = run(args.cli, ["download", "faults/gated", "-q"], env_for(server.endpoint, cache, HF_TOKEN="hf_good_token"))
        check(code == 0 and os.path.isdir(out.strip()), "HF_TOKEN opens it")
        code, _, err = run(args.cli, ["download", "tiny/sharded"], env_for(server.endpoint, cache, HF_HUB_OFFLINE="1"))
        check(code == 1 and "offline" in err, "HF_HUB_OFFLINE=1: no network, and it says so")
        code, _, err = run(args.cli, ["download", "../x"], env)
        check(code == 2, "a malformed id is a usage error")
    finally:
        server.stop()
    # Ctrl+C in the middle of a file: exit 130, the .incomplete file kept, the next run resumes it
    # with a Range request. The server sends at 4 MB/s, so the file is still coming when it is seen.
    slow = Server(args.work, "--big-mb", "24", "--rate-mb", "4")
    try:
        cache = os.path.join(args.work, "cache-int")
        env = env_for(slow.endpoint, cache)
        blobs = os.path.join(cache, "models--bench--big", "blobs")
        p = subprocess.Popen([args.cli, "download", "bench/big"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        seen = False
        for _ in range(1200):  # a bound on a hung download, not a measure of speed
            part = [n for n in (os.listdir(blobs) if os.path.isdir(blobs) else []) if n.endswith(".incomplete")]
            if part and os.path.getsize(os.path.join(blobs, part[0])) > 0:
                seen = True
                break
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
        check(seen and p.returncode == 130 and "resume" in err, "Ctrl+C stops the download with 130 (%d: %s)"
              % (p.returncode, err.strip()[-200:]))
        code, out, err = run(args.cli, ["download", "bench/big", "-q"], env)
        with urllib.request.urlopen(slow.endpoint + "/_stats") as r:
            log = json.load(r)["log"]
        ranged = [e for e in log if "model.safetensors" in e["path"] and e["method"] == "GET" and e["range"]]
        check(code == 0 and len(ranged) == 1 and os.path.isfile(os.path.join(out.strip(), "model.safetensors")),
              "the next download resumes it with a Range request (%s)" % err.strip()[-200:])
    finally:
        slow.stop()
    # refs/main holding "..": the model entry's own folder never opens (issue 46, item 7).
    planted = os.path.join(args.work, "planted")
    repo = os.path.join(planted, "models--org--planted")
    os.makedirs(os.path.join(repo, "snapshots"), exist_ok=True)
    os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
    model = os.path.join(args.fixtures or "", "marian")
    if args.fixtures and os.path.isdir(model):
        for name in os.listdir(model):
            shutil.copy(os.path.join(model, name), repo)
            shutil.copy(os.path.join(model, name), os.path.join(repo, "snapshots"))
    else:
        print("note: no hf_fixtures: the planted model is a bare config.json")
        for d in (repo, os.path.join(repo, "snapshots")):
            with open(os.path.join(d, "config.json"), "w") as f:
                f.write('{"model_type": "marian"}')
    for hostile in ("..", ".", "../.."):
        with open(os.path.join(repo, "refs", "main"), "w") as f:
            f.write(hostile)
        code, out, err = run(args.cli, ["translate", "--model", "org/planted", "Hello"], env_for("http://127.0.0.1:9", planted))
        check(code == 1 and "snapshots/.." not in err and "snapshots'" not in err and
              "attnviz-cli download org/planted" in err,
              "refs/main %r opens nothing outside snapshots/ (exit %d: %s)" % (hostile, code, err.strip()[-200:]))


def part_interop(args):
    try:
        import huggingface_hub  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        print("hub interop: %s; skipped" % e)
        return 77
    model = os.path.join(args.fixtures, "marian")
    if not os.path.isdir(model):
        print("hub interop: no fixtures at %s; skipped" % model)
        return 77
    rid = "Helsinki-NLP/tiny-marian"
    server = Server(args.work, "--serve", rid + "=" + model)
    try:
        ours, theirs = os.path.join(args.work, "attnviz-cache"), os.path.join(args.work, "hf-cache")
        code, out, err = run(args.cli, ["download", rid, "-q"], env_for(server.endpoint, ours))
        check(code == 0, "attnviz-cli download %s (%s)" % (rid, err.strip()[-300:]))
        script = (
            "import sys\n"
            "from transformers import MarianMTModel, MarianTokenizer\n"
            "tok = MarianTokenizer.from_pretrained(sys.argv[1], local_files_only=True)\n"
            "m = MarianMTModel.from_pretrained(sys.argv[1], local_files_only=True)\n"
            "ids = m.generate(**tok(['Hello, Tom.'], return_tensors='pt'), num_beams=1, max_new_tokens=20)\n"
            "print(tok.decode(ids[0], skip_special_tokens=True))\n")
        p = subprocess.run([sys.executable, "-c", script, rid], env=env_for("http://127.0.0.1:9", ours, HF_HUB_OFFLINE="1"),
                           capture_output=True, text=True, timeout=600)
        check(p.returncode == 0, "transformers opens attnviz's cache offline (local_files_only=True) (%s)"
              % p.stderr.strip()[-400:])
        hf_text = p.stdout.strip()
        fetch = ("import sys\nfrom huggingface_hub import snapshot_download\n"
                 "print(snapshot_download(sys.argv[1]))\n")
        p = subprocess.run([sys.executable, "-c", fetch, rid], env=env_for(server.endpoint, theirs),
                           capture_output=True, text=True, timeout=600)
        check(p.returncode == 0, "huggingface_hub's snapshot_download from the same server (%s)" % p.stderr.strip()[-300:])
        outputs = []
        for cache in (theirs, ours):
            code, out, err = run(args.cli, ["translate", "--model", rid, "--max-length", "20", "Hello, Tom."],
                                 env_for("http://127.0.0.1:9", cache))
            check(code == 0 and out.strip(), "attnviz-cli translates from %s (%s)" % (cache, err.strip()[-300:]))
            outputs.append(out.strip())
        check(outputs[0] == outputs[1], "the same translation from both caches")
        # Both at once into one cache: the blob locks keep them apart, every blob is whole.
        both = os.path.join(args.work, "both-cache")
        ours_p = subprocess.Popen([args.cli, "download", rid, "-q"], env=env_for(server.endpoint, both),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        theirs_p = subprocess.Popen([sys.executable, "-c", fetch, rid], env=env_for(server.endpoint, both),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        o1, e1 = ours_p.communicate(timeout=600)
        o2, e2 = theirs_p.communicate(timeout=600)
        check(ours_p.returncode == 0 and theirs_p.returncode == 0 and o1.strip() == o2.strip(),
              "attnviz-cli and snapshot_download at once into one cache (%s %s)" % (e1.strip()[-200:], e2.strip()[-200:]))
        blobs = os.path.join(both, "models--" + rid.replace("/", "--"), "blobs")
        whole = True
        for name in os.listdir(blobs):
            if len(name) == 64:
                with open(os.path.join(blobs, name), "rb") as f:
                    whole &= hashlib.sha256(f.read()).hexdigest() == name
            whole &= not name.endswith(".incomplete")
        check(whole, "... every LFS blob's sha256 is its name, nothing incomplete")
        print("transformers: %r, attnviz: %r" % (hf_text, outputs[1]))
    finally:
        server.stop()
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("part", choices=["cli", "interop"])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--fixtures")
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    code = part_cli(args) if args.part == "cli" else part_interop(args)
    if code:
        return code
    print("%d failures" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
