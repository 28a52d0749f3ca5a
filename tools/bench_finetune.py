#!/usr/bin/env python3
"""Fine-tuning speed of an opus-mt-sized Marian on the CPU: attnviz against a plain transformers loop.

    bench_finetune.py ATTNVIZ_CLI WORK_DIR [--pairs 256] [--batch 16] [--threads 2] [--rounds 2]

The model is tools/bench_pretrained.py's (d_model 512, 6 + 6 layers, 8 heads, ffn 2048,
vocabulary 59,514, random weights made by transformers; built in WORK_DIR when missing).
The corpus: the first PAIRS pairs of ../shared/data/tatoeba-eng-fra-5000.tsv (else
tests/data/eng-rus.tsv). Both sides train one epoch over the same pairs in batches of
BATCH sentences, Adam(W) at learning rate 5e-5, dropout as the config says (0.1), float32:
  - attnviz-cli train --init-from MODEL --data PAIRS.tsv --epochs 1 --batch B --json
    (its batch_tokens_per_second: target tokens of the training batches per second of
    training, validation aside);
  - transformers: MarianMTModel in train mode, the tokenizer's padded batches of the same
    pairs in the same order of lengths (sorted, as attnviz's buckets make them), loss
    from labels, backward, AdamW step; target tokens (non-pad labels) per second.
In interleaved rounds; prints one JSON object with both rates, their ratio and the machine.
Run by hand; numbers go into the issue note and docs/benchmarks.md.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench_pretrained  # noqa: E402  (the model builder and machine())


def read_pairs(n):
    for path in (os.path.join(ROOT, "..", "shared", "data", "tatoeba-eng-fra-5000.tsv"),
                 os.path.join(ROOT, "tests", "data", "eng-rus.tsv")):
        if not os.path.exists(path):
            continue
        pairs = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                cols = line.rstrip("\n").split("\t")
                if len(cols) >= 2 and cols[0].strip() and cols[1].strip():
                    pairs.append((cols[0].strip(), cols[1].strip()))
                if len(pairs) >= n:
                    break
        return pairs, path
    sys.exit("bench_finetune: no corpus found")


def time_attnviz(cli, folder, data, batch, threads, pairs):
    # All pairs train (a few for validation are required: 2%); one epoch, no early stop.
    cmd = [cli, "--threads", str(threads), "train", "--init-from", folder, "--data", data, "--epochs", "1",
           "--batch", str(batch), "--lr", "5e-5", "--val-fraction", "0.02", "--eval-sample", "0", "--json", "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"attnviz-cli train failed: {r.stderr[-2000:]}")
    j = json.loads(r.stdout)
    return j["batch_tokens_per_second"], j


def time_transformers(folder, pairs, batch, threads):
    from transformers import MarianMTModel, MarianTokenizer
    torch.set_num_threads(threads)
    tok = MarianTokenizer.from_pretrained(folder)
    model = MarianMTModel.from_pretrained(folder)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.0)
    # Sorted by source length, then cut into batches: what bucketing does.
    order = sorted(pairs, key=lambda p: len(p[0].split()))
    batches = [order[i:i + batch] for i in range(0, len(order), batch)]
    tokens = 0
    t = time.perf_counter()
    for b in batches:
        enc = tok([s for s, _ in b], text_target=[x for _, x in b], return_tensors="pt", padding=True)
        labels = enc["labels"]
        labels[labels == tok.pad_token_id] = -100
        out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], labels=labels)
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        tokens += int((labels != -100).sum())
    seconds = time.perf_counter() - t
    return tokens / seconds, tokens, seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cli")
    ap.add_argument("work")
    ap.add_argument("--pairs", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    folder = bench_pretrained.build_model(a.work)
    pairs, corpus = read_pairs(a.pairs)
    data = os.path.join(a.work, "finetune_pairs.tsv")
    with open(data, "w", encoding="utf-8") as f:
        f.write("".join(f"{s}\t{t}\n" for s, t in pairs))
    rounds = []
    for r in range(a.rounds):
        av, j = time_attnviz(a.cli, folder, data, a.batch, a.threads, pairs)
        hf, hf_tokens, hf_seconds = time_transformers(folder, pairs, a.batch, a.threads)
        rounds.append({"round": r, "attnviz_tokens_per_second": av, "attnviz_target_tokens": j.get("target_tokens"),
                       "attnviz_seconds": j.get("seconds"), "transformers_tokens_per_second": hf,
                       "transformers_target_tokens": hf_tokens, "transformers_seconds": hf_seconds,
                       "ratio": av / hf if hf > 0 else None})
        print(json.dumps(rounds[-1]), file=sys.stderr)
    best_av = max(x["attnviz_tokens_per_second"] for x in rounds)
    best_hf = max(x["transformers_tokens_per_second"] for x in rounds)
    print(json.dumps({"benchmark": "finetune_opus_mt_sized", "corpus": os.path.basename(corpus), "pairs": len(pairs),
                      "batch": a.batch, "threads": a.threads, "rounds": rounds,
                      "attnviz_tokens_per_second": best_av, "transformers_tokens_per_second": best_hf,
                      "ratio_best": best_av / best_hf, "machine": bench_pretrained.machine()}, indent=1))


if __name__ == "__main__":
    main()
