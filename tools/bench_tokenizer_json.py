#!/usr/bin/env python3
"""Encoding speed of attnviz's tokenizer.json reader against the Rust `tokenizers` library, one thread.

    bench_tokenizer_json.py ATTNVIZ_TESTS_BASE WORK_DIR [--sentences 10000] [--corpus TSV] [--names ...]

Makes the fixtures of tools/make_tokenizer_json_fixtures.py in WORK_DIR: with a corpus (default
../shared/data/tatoeba-eng-fra-5000.tsv when it is there), transformers' tokenizers (T5, NLLB, BART,
Llama, XLM-R, mBART-50) with vocabularies of 2,700 to 11,000 pieces trained on it, and its first N
sentences (both columns); without one, the tiny test fixtures and N multilingual sentences made of
tests/data's. Then it encodes every sentence one at a time with each tokenizer:
  - the `tokenizers` library: Tokenizer.encode(s) in a Python loop, RAYON_NUM_THREADS=1 (the
    library's single-thread speed, Python's call overhead included: how transformers calls it),
    timed on a second pass over the sentences, when its word cache already holds them (attnviz
    keeps no cache: each of its passes costs the same);
  - attnviz: TokenizerJson::encode (attnviz_tests_base '[tokenizer_json_bench]': best of 3 rounds).
Three rounds of both, interleaved; the best of each is kept.
Prints one JSON object: sentences per second of each, and attnviz's speed as a multiple of the
library's. Run by hand.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def rust_speed(path, sentences, rounds=3):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(path)
    for s in sentences[:200]:
        tok.encode(s)
    best = float("inf")
    tokens = 0
    for _ in range(rounds):
        start = time.perf_counter()
        n = 0
        for s in sentences:
            n += len(tok.encode(s).ids)
        best = min(best, time.perf_counter() - start)
        tokens = n
    return {"seconds": best, "tokens": tokens, "sentences_per_second": len(sentences) / best}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("tests_base")
    p.add_argument("work")
    p.add_argument("--sentences", type=int, default=10000)
    default_corpus = os.path.join(os.path.dirname(HERE), "..", "shared", "data", "tatoeba-eng-fra-5000.tsv")
    p.add_argument("--corpus", default=default_corpus if os.path.exists(default_corpus) else None)
    p.add_argument("--names", default=None)
    a = p.parse_args()
    if a.names is None:
        a.names = ("bench_t5,bench_nllb,bench_bart,bench_llama,bench_xlmr,bench_mbart50" if a.corpus else
                   "hf_t5,hf_nllb,hf_bart,hf_llama,hf_xlmr,wordlevel_bert")
    os.environ["RAYON_NUM_THREADS"] = "1"
    make = [sys.executable, os.path.join(HERE, "make_tokenizer_json_fixtures.py"), a.work, "--sentences", str(a.sentences)]
    if a.corpus:
        make += ["--bench-corpus", a.corpus]
    subprocess.run(make, check=True)
    with open(os.path.join(a.work, "bench_sentences.txt"), encoding="utf-8") as f:
        sentences = f.read().split("\n")[:-1]
    env = dict(os.environ, ATTNVIZ_TOKENIZER_JSON_BENCH_DIR=a.work, ATTNVIZ_TOKENIZER_JSON_BENCH_NAMES=a.names,
               OMP_NUM_THREADS="1")
    # Rounds interleaved (attnviz, then the library, three times), the best of each kept: a busy
    # machine slows both alike.
    ours, theirs = {}, {}
    for _ in range(3):
        r = subprocess.run([a.tests_base, "[tokenizer_json_bench]"], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"attnviz bench failed: {r.stdout}{r.stderr}")
        for line in r.stdout.splitlines():
            if line.startswith("{"):
                j = json.loads(line)
                if j["tokenizer"] not in ours or j["seconds"] < ours[j["tokenizer"]]["seconds"]:
                    ours[j["tokenizer"]] = j
        for name in a.names.split(","):
            path = os.path.join(a.work, name + ".json")
            if os.path.exists(path):
                t = rust_speed(path, sentences, rounds=2)  # the second pass finds its word cache warm
                if name not in theirs or t["seconds"] < theirs[name]["seconds"]:
                    theirs[name] = t
    results = []
    for name in a.names.split(","):
        if name not in ours or name not in theirs:
            continue
        rust = theirs[name]
        mine = ours[name]
        if mine["tokens"] != rust["tokens"]:
            print(f"warning: {name}: attnviz made {mine['tokens']} tokens, tokenizers {rust['tokens']}", file=sys.stderr)
        results.append({"tokenizer": name, "sentences": len(sentences), "tokens": rust["tokens"],
                        "tokenizers_per_second": round(rust["sentences_per_second"]),
                        "attnviz_per_second": round(mine["sentences_per_second"]),
                        "attnviz_vs_tokenizers": round(mine["sentences_per_second"] / rust["sentences_per_second"], 2)})
    import tokenizers
    print(json.dumps({"bench": "tokenizer_json_encode", "tokenizers": tokenizers.__version__, "threads": 1,
                      "corpus": os.path.basename(a.corpus) if a.corpus else "tests/data + samples",
                      "results": results}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
