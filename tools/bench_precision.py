#!/usr/bin/env python3
"""Decoding speed and memory of attnviz's --precision fp32 | int8 | bf16 beside CTranslate2's
float32 and int8, on the opus-mt-sized Marian of bench_pretrained.py (issue 49).

    bench_precision.py ATTNVIZ_CLI WORK_DIR [--rounds 2] [--sentences 64] [--threads 2]
                       [--batches 1,32] [--precisions fp32,int8,bf16] [--batch1-sentences 8]

Reuses bench_pretrained.py's model (built once in WORK_DIR with transformers: d_model 512, 6 + 6
layers, 8 heads, ffn 2048, vocabulary 59,514, random weights) and its CTranslate2 conversion.
Every output is exactly 24 tokens. Per batch size (1: one sentence at a time, every attention map
kept by attnviz; 32: 64 sentences in batches of 32) and search (greedy, beam 4), milliseconds per
sentence, median of the rounds, for:
  - attnviz-cli bench-decode --precision P --batch B --fixed-length 24;
  - CTranslate2 Translator, compute_type float32 and int8 (int8_float32 on this CPU), max_batch_size B.
Also each attnviz precision's peak resident memory for opening the model and translating one
sentence (the child's ru_maxrss), and the load average before and after. Prints one JSON object.
Needs ctranslate2 (pip install ctranslate2==4.8.5, or ATTNVIZ_BENCH_PEERS=1 ./setup.sh).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_pretrained as bp  # noqa: E402

LENGTH = bp.LENGTH


def peak_rss_mb(argv):
    """Runs argv (output discarded) under /usr/bin/time and returns its peak RSS in MB."""
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed: {r.stderr}")
    return int(r.stderr.strip().splitlines()[-1]) / 1024.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cli")
    ap.add_argument("work")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sentences", type=int, default=64)
    ap.add_argument("--batch1-sentences", type=int, default=8, help="sentences timed one at a time")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--precisions", default="fp32,int8,bf16")
    ap.add_argument("--ct2-types", default="float32,int8")
    a = ap.parse_args()
    import ctranslate2
    import torch
    from transformers import MarianTokenizer
    torch.set_num_threads(a.threads)
    os.makedirs(a.work, exist_ok=True)
    load_before = os.getloadavg()
    folder = bp.build_model(a.work)
    ct2_dir = bp.convert_ct2(folder, a.work)
    texts = bp.sentences(a.sentences)
    tok = MarianTokenizer.from_pretrained(folder)
    pieces = [tok.convert_ids_to_tokens(tok(s).input_ids) for s in texts]
    batches = [int(b) for b in a.batches.split(",")]
    precisions = a.precisions.split(",")

    def data_file(n):
        path = os.path.join(a.work, f"sentences{n}.tsv")
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(f"{s}\t{s}\n" for s in texts[:n]))
        return path

    def count(batch):
        return a.batch1_sentences if batch == 1 else len(texts)

    def time_attnviz(precision, batch):
        n = count(batch)
        r = subprocess.run([a.cli, "--threads", str(a.threads), "bench-decode", "--model", folder, "--data",
                            data_file(n), "--batch", str(batch), "--fixed-length", str(LENGTH), "--beam", "4",
                            "--repeat", "1", "--runs", "greedy,beam4", "--sentences", str(n), "--precision", precision],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"attnviz-cli bench-decode --precision {precision} failed: {r.stderr}")
        j = json.loads(r.stdout)
        assert j.get("precision") == precision, j.get("precision")
        runs = {x["name"]: x["ms_per_sentence"] for x in j["runs"]}
        return runs["greedy"], runs["beam4"]

    translators = {t: ctranslate2.Translator(ct2_dir, device="cpu", compute_type=t, inter_threads=1,
                                             intra_threads=a.threads) for t in a.ct2_types.split(",")}

    def time_ct2(kind, batch, beam):
        tr = translators[kind]
        src = pieces[:count(batch)]
        t = time.perf_counter()
        for i in range(0, len(src), batch):
            r = tr.translate_batch(src[i:i + batch], beam_size=beam, max_batch_size=batch,
                                   max_decoding_length=LENGTH, min_decoding_length=LENGTH)
            assert len(r[0].hypotheses[0]) >= LENGTH - 1
        return 1000 * (time.perf_counter() - t) / len(src)

    results = {}
    for kind in translators:
        time_ct2(kind, 1, 1)  # warm up
    for _ in range(a.rounds):
        for batch in batches:
            for p in precisions:
                g, b = time_attnviz(p, batch)
                results.setdefault(f"attnviz_{p}_b{batch}_greedy", []).append(g)
                results.setdefault(f"attnviz_{p}_b{batch}_beam4", []).append(b)
            for kind in translators:
                results.setdefault(f"ct2_{kind}_b{batch}_greedy", []).append(time_ct2(kind, batch, 1))
                results.setdefault(f"ct2_{kind}_b{batch}_beam4", []).append(time_ct2(kind, batch, 4))
    med = {k: round(statistics.median(v), 2) for k, v in results.items()}
    ratios = {}
    for batch in batches:
        for s in ("greedy", "beam4"):
            for p, kind in (("int8", "int8"), ("fp32", "float32"), ("bf16", "int8")):
                x, y = f"attnviz_{p}_b{batch}_{s}", f"ct2_{kind}_b{batch}_{s}"
                if x in med and y in med:
                    ratios[f"attnviz_{p}_over_ct2_{kind}_b{batch}_{s}"] = round(med[x] / med[y], 3)
    partial = os.path.join(a.work, "timings.json")  # the timings, should the memory runs fail
    with open(partial, "w") as f:
        json.dump({"median_ms_per_sentence": med, "ratios": ratios, "ms_per_sentence": results}, f)
    rss = {}
    for p in precisions:
        rss[p] = round(peak_rss_mb([a.cli, "--threads", str(a.threads), "translate", "--model", folder, "--beam", "1",
                                    "--max-length", str(LENGTH), "--precision", p, texts[0]]), 1)
    report = {
        "machine": bp.machine(), "threads": a.threads, "output_tokens": LENGTH, "rounds": a.rounds,
        "sentences": {str(b): count(b) for b in batches}, "load_average_before": load_before,
        "load_average_after": os.getloadavg(), "ms_per_sentence": results, "median_ms_per_sentence": med,
        "ratios": ratios, "peak_rss_mb_open_and_translate_one": rss,
        "rss_int8_over_fp32": round(rss["int8"] / rss["fp32"], 3) if "int8" in rss and "fp32" in rss else None,
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
