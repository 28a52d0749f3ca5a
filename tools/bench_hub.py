#!/usr/bin/env python3
"""Download speed and cache listing of attnviz's hub client, run by hand; prints JSON.

    tools/bench_hub.py [--cli build/release/app/attnviz-cli] [--mb 300] [--rounds 3] [--rate-mb R] [--work DIR]

1. A model of one MB-sized LFS file (--mb, default 300) from the local hub server
   (tests/hub/hub_server.py --big-mb, on 127.0.0.1): `attnviz-cli download` (which computes the
   file's sha256 while it arrives and checks it) against `curl -L -o FILE` of the same file from
   the same server, alternating, each into a fresh folder on the same disk; the best round of each,
   as whole processes and as each client's own transfer time (curl's time_total; the
   "fetched ... in S s" line attnviz-cli download prints).
2. `attnviz-cli cache list` over a cache of 50 models of 2 revisions and 5 files each, laid out as
   huggingface_hub lays them out (the whole process, LibTorch's loading included).
"""
import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(cmd, env=None):
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def plant_cache(cache, models=50):
    for i in range(models):
        repo = os.path.join(cache, "models--org--model-%02d" % i)
        os.makedirs(os.path.join(repo, "blobs"), exist_ok=True)
        os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
        for r in range(2):
            commit = "%040x" % (i * 2 + r + 1)
            snap = os.path.join(repo, "snapshots", commit)
            os.makedirs(snap, exist_ok=True)
            for name in ("config.json", "model.safetensors", "tokenizer_config.json", "source.spm", "target.spm"):
                # the weights and tokenizer shared by both revisions, each revision its own config
                blob = hashlib.sha1(("%d/%d/%s" % (i, r if name == "config.json" else 0, name)).encode()).hexdigest()
                with open(os.path.join(repo, "blobs", blob), "wb") as f:
                    f.write(os.urandom(4096 if name == "model.safetensors" else 64))
                os.symlink("../../blobs/" + blob, os.path.join(snap, name))
            with open(os.path.join(repo, "refs", "main" if r == 0 else "v%d" % r), "w") as f:
                f.write(commit)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "build/release/app/attnviz-cli"))
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate-mb", type=float, default=0, help="pace the server as a link of this many MB/s (0: loopback)")
    ap.add_argument("--work", default="/tmp/attnviz-bench-hub")
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    server = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests/hub/hub_server.py"), "--big-mb", str(args.mb),
                               "--rate-mb", str(args.rate_mb), "--lifetime", "1800"], stdout=subprocess.PIPE, text=True)
    try:
        endpoint = "http://127.0.0.1:" + server.stdout.readline().strip()
        url = endpoint + "/bench/big/resolve/main/model.safetensors"
        env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
        env.update({"HF_ENDPOINT": endpoint, "HF_HUB_DISABLE_XET": "1"})
        ours, curl, ours_transfer, curl_transfer = [], [], [], []
        for r in range(args.rounds):
            folder = os.path.join(args.work, "round%d" % r)
            os.makedirs(folder)
            t0 = time.perf_counter()
            got = subprocess.run(["curl", "-sS", "-L", "-w", "%{time_total}", "-o", os.path.join(folder, "curl.bin"), url],
                                 check=True, capture_output=True, text=True)
            curl.append(time.perf_counter() - t0)
            curl_transfer.append(float(got.stdout.strip()))  # curl's own clock: connect to last byte
            os.unlink(os.path.join(folder, "curl.bin"))
            env["HF_HUB_CACHE"] = os.path.join(folder, "cache")
            t0 = time.perf_counter()
            got = subprocess.run([args.cli, "download", "bench/big"], env=env, check=True, capture_output=True, text=True)
            ours.append(time.perf_counter() - t0)
            # attnviz's own clock: the files' transfer with the sha256, the rename and the links
            fetched = re.search(r"^fetched .* in ([0-9.]+) s", got.stderr, re.M)
            ours_transfer.append(float(fetched.group(1)))
            shutil.rmtree(folder)
        size = args.mb << 20
        cache = os.path.join(args.work, "cache50")
        plant_cache(cache)
        env["HF_HUB_CACHE"] = cache
        listing = [timed([args.cli, "cache", "list"], env) for _ in range(3)]
        out = {
            "benchmark": "hub download and cache listing",
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
            "file_mb": args.mb,
            "server_rate_mb_per_s": args.rate_mb,
            "rounds": args.rounds,
            "attnviz_download_s": [round(t, 3) for t in ours],
            "curl_s": [round(t, 3) for t in curl],
            "attnviz_mb_per_s": round(size / min(ours) / 1e6, 1),
            "curl_mb_per_s": round(size / min(curl) / 1e6, 1),
            "attnviz_vs_curl": round(min(curl) / min(ours), 3),
            "note": "whole processes: attnviz-cli includes its start (LibTorch's loading), the API call and a "
                    "HEAD; curl only fetches",
            "attnviz_transfer_s": [round(t, 3) for t in ours_transfer],
            "curl_transfer_s": [round(t, 3) for t in curl_transfer],
            "attnviz_transfer_mb_per_s": round(size / min(ours_transfer) / 1e6, 1),
            "curl_transfer_mb_per_s": round(size / min(curl_transfer) / 1e6, 1),
            "transfer_attnviz_vs_curl": round(min(curl_transfer) / min(ours_transfer), 3),
            "transfer_note": "each client's own clock: curl's time_total (connection to last byte); attnviz's "
                             "download (the GET, the sha256 computed while the bytes arrive, the blob's rename "
                             "and the snapshot's links)",
            "cache_list_50_models_s": [round(t, 3) for t in listing],
        }
        print(json.dumps(out, indent=2))
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
