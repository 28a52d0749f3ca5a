#!/usr/bin/env python3
"""Decoding speed of Flan-T5-base- and BART-base-sized models: attnviz against transformers and CTranslate2.

    bench_families.py ATTNVIZ_CLI WORK_DIR [--rounds 3] [--sentences 10] [--threads 2] [--only t5,bart,summary]

Issue 47's speed table. Builds once, in WORK_DIR, two models with random weights made by
transformers 5, each with the tokenizer of the project's small fixture of its family
(build/release/tests/hf_fixtures, made by `ctest -R "pretrained fixtures"`), its vocabulary
padded with filler tokens to the real model's size so that the output projection is full-sized:
  - Flan-T5-base-sized: t5, d_model 768, 12 + 12 layers, 12 heads, gated-GELU ffn 2,048,
    vocabulary 32,128, untied head (Flan-T5's layout);
  - BART-base-sized: bart, d_model 768, 6 + 6 layers, 12 heads, ffn 3,072, vocabulary 50,265,
    1,026 learned positions;
and their CTranslate2 conversions (float32). Then, in interleaved rounds:
  - typed sentence, batch 1: each model decodes the same sentences one at a time, exactly 24
    output tokens (random models never stop), greedy and beam 4;
  - summary (BART): 3 inputs of 1,024 tokens, exactly 64 output tokens, greedy and beam 4;
with attnviz-cli bench-decode (--batch 1 --fixed-length N: every attention map kept),
transformers' generate() (eager PyTorch, no maps, min/max_new_tokens N) and CTranslate2's
Translator (min/max_decoding_length N, intra_threads as --threads). Prints one JSON object:
milliseconds per sentence per engine and search (median of the rounds) and the ratios, with the
machine and its load, and for each batch-1 model its bandwidth floor: the weights a greedy step
reads, the machine's read bandwidth (torch's sum over a buffer that size), and the time 24 steps
take at that bandwidth, beside attnviz's and transformers' greedy times. Run by hand; needs ctranslate2 (ATTNVIZ_BENCH_PEERS=1 ./setup.sh).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from bench_pretrained import machine, sentences  # noqa: E402

FIXTURES = os.path.join(ROOT, "build", "release", "tests", "hf_fixtures")


def padded_tokenizer(fixture, folder, size, reserved_tail=0):
    """The fixture's tokenizer.json with filler pieces appended to its model's vocabulary up to
    `size` ids (reserved_tail ids left at the end for added tokens that must stay last, T5's
    sentinels, which are renumbered after the fillers)."""
    with open(os.path.join(fixture, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    model = tj["model"]
    added = tj.get("added_tokens", [])
    if model["type"] == "Unigram":
        base = len(model["vocab"])
        tail = sorted((t for t in added if t["id"] >= base), key=lambda t: t["id"])
        while len(model["vocab"]) + len(tail) < size:
            model["vocab"].append(["\u2581filler%d" % len(model["vocab"]), -99.0])
        for i, t in enumerate(tail):
            t["id"] = len(model["vocab"]) + i
    else:  # BPE: the vocabulary is a dict; no merge ever reaches a filler
        vocab = model["vocab"]
        top = max(max(vocab.values()), max((t["id"] for t in added), default=-1)) + 1
        while top < size:
            vocab["\u0120filler%d" % top] = top
            top += 1
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        src = os.path.join(fixture, name)
        if os.path.exists(src):
            with open(src, encoding="utf-8") as f, open(os.path.join(folder, name), "w", encoding="utf-8") as g:
                cfg = json.load(f)
                if name == "tokenizer_config.json" and "added_tokens_decoder" in cfg and model["type"] == "Unigram":
                    # renumbered with the tokenizer.json's added tokens
                    by_content = {t["content"]: t["id"] for t in added}
                    cfg["added_tokens_decoder"] = {
                        str(by_content.get(v["content"], int(k))): v for k, v in cfg["added_tokens_decoder"].items()}
                json.dump(cfg, g, ensure_ascii=False)


def build_t5(work):
    from transformers import GenerationConfig, T5Config, T5ForConditionalGeneration
    folder = os.path.join(work, "flan-t5-base-sized")
    if os.path.exists(os.path.join(folder, "model.safetensors")):
        return folder
    padded_tokenizer(os.path.join(FIXTURES, "flan_t5"), folder, 32128)
    cfg = T5Config(vocab_size=32128, d_model=768, d_kv=64, num_heads=12, d_ff=2048, num_layers=12,
                   num_decoder_layers=12, feed_forward_proj="gated-gelu", tie_word_embeddings=False,
                   relative_attention_num_buckets=32, relative_attention_max_distance=128,
                   pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    torch.manual_seed(0)
    model = T5ForConditionalGeneration(cfg)
    model.generation_config = GenerationConfig(decoder_start_token_id=0, eos_token_id=1, pad_token_id=0)
    model.save_pretrained(folder)
    return folder


def build_bart(work):
    from transformers import BartConfig, BartForConditionalGeneration, GenerationConfig
    folder = os.path.join(work, "bart-base-sized")
    if os.path.exists(os.path.join(folder, "model.safetensors")):
        return folder
    padded_tokenizer(os.path.join(FIXTURES, "bart"), folder, 50265)
    cfg = BartConfig(vocab_size=50265, d_model=768, encoder_layers=6, decoder_layers=6, encoder_attention_heads=12,
                     decoder_attention_heads=12, encoder_ffn_dim=3072, decoder_ffn_dim=3072,
                     max_position_embeddings=1024, activation_function="gelu", scale_embedding=False,
                     pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=2,
                     normalize_before=False)  # read by CTranslate2 4.8.5's converter, which transformers 5 no longer writes
    torch.manual_seed(0)
    model = BartForConditionalGeneration(cfg)
    model.generation_config = GenerationConfig(decoder_start_token_id=2, eos_token_id=2, pad_token_id=1,
                                               bos_token_id=0, forced_bos_token_id=0, forced_eos_token_id=2)
    model.save_pretrained(folder)
    return folder


def convert_ct2(folder):
    import ctranslate2
    out = folder + "-ct2"
    if not os.path.exists(os.path.join(out, "model.bin")):
        ctranslate2.converters.TransformersConverter(folder).convert(out, force=True)
    return out


def long_inputs(tok, n, tokens):
    """n inputs of exactly `tokens` ids (</s> included), from the corpus's sentences run together."""
    words = " ".join(sentences(400)).split()
    out = []
    for k in range(n):
        text, ids = "", []
        i = k * 37
        while len(ids) < tokens:
            text += (" " if text else "") + " ".join(words[i % len(words): i % len(words) + 50])
            i += 50
            ids = tok(text).input_ids
        out.append(tok.decode(ids[: tokens - 1], skip_special_tokens=True))
    return out


class Engines:
    def __init__(self, cli, folder, threads, texts):
        import ctranslate2
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
        self.cli, self.folder, self.threads = cli, folder, threads
        self.tok = AutoTokenizer.from_pretrained(folder)
        self.hf = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
        self.ct2 = ctranslate2.Translator(convert_ct2(folder), device="cpu", inter_threads=1, intra_threads=threads)
        self.texts = texts
        self.encoded = [self.tok(s, return_tensors="pt") for s in texts]
        self.pieces = [self.tok.convert_ids_to_tokens(e.input_ids[0].tolist()) for e in self.encoded]
        self.data = folder + "-sentences.tsv"
        with open(self.data, "w", encoding="utf-8") as f:
            f.write("".join(f"{s}\t{s}\n" for s in texts))

    def hf_ms(self, beam, n):
        t = time.perf_counter()
        with torch.no_grad():
            for e in self.encoded:
                self.hf.generate(**e, num_beams=beam, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        return 1000 * (time.perf_counter() - t) / len(self.texts)

    def ct2_ms(self, beam, n):
        t = time.perf_counter()
        for p in self.pieces:
            self.ct2.translate_batch([p], beam_size=beam, max_decoding_length=n, min_decoding_length=n)
        return 1000 * (time.perf_counter() - t) / len(self.texts)

    def attnviz_ms(self, n):
        r = subprocess.run([self.cli, "--threads", str(self.threads), "bench-decode", "--model", self.folder,
                            "--data", self.data, "--level", "subword", "--batch", "1", "--fixed-length", str(n),
                            "--max-length", str(n), "--beam", "4", "--repeat", "1", "--runs", "greedy,beam4",
                            "--sentences", str(len(self.texts))], capture_output=True, text=True,
                           # the summaries' kept maps (three 1,024-token sources, every map: ~2.2 GB) pass
                           # the 2 GB decoding bound; a set ATTNVIZ_MEMORY_BOUND wins
                           env={"ATTNVIZ_MEMORY_BOUND": "8G", **os.environ})
        if r.returncode != 0:
            sys.exit(f"attnviz-cli bench-decode failed on {self.folder}: {r.stderr}")
        runs = {x["name"]: x["ms_per_sentence"] for x in json.loads(r.stdout)["runs"]}
        return runs["greedy"], runs["beam4"]


def measure(engines, n, rounds):
    res = {k: [] for k in ("attnviz_greedy", "attnviz_beam4", "ct2_greedy", "ct2_beam4", "hf_greedy", "hf_beam4")}
    engines.ct2_ms(1, n), engines.hf_ms(1, n)  # warm up
    for _ in range(rounds):
        g, b = engines.attnviz_ms(n)
        res["attnviz_greedy"].append(g)
        res["attnviz_beam4"].append(b)
        res["ct2_greedy"].append(engines.ct2_ms(1, n))
        res["ct2_beam4"].append(engines.ct2_ms(4, n))
        res["hf_greedy"].append(engines.hf_ms(1, n))
        res["hf_beam4"].append(engines.hf_ms(4, n))
    med = {k: round(statistics.median(v), 1) for k, v in res.items()}
    return {
        "output_tokens": n, "sentences": len(engines.texts),
        "input_tokens": [len(p) for p in engines.pieces][:3],
        "ms_per_sentence": {k: [round(x, 1) for x in v] for k, v in res.items()},
        "median_ms_per_sentence": med,
        "attnviz_over_transformers": {s: round(med[f"attnviz_{s}"] / med[f"hf_{s}"], 3) for s in ("greedy", "beam4")},
        "attnviz_over_ct2": {s: round(med[f"attnviz_{s}"] / med[f"ct2_{s}"], 3) for s in ("greedy", "beam4")},
    }


def read_bandwidth_gb_s(nbytes, threads, repeats=7):
    """The machine's read bandwidth on `threads` threads: torch's sum over a float32 buffer of nbytes
    (larger than any cache), median of the repeats after one warm-up."""
    torch.set_num_threads(threads)
    x = torch.rand(max(nbytes // 4, 1 << 20))
    x.sum()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        x.sum()
        times.append(time.perf_counter() - t)
    return x.numel() * 4 / statistics.median(times) / 1e9


def greedy_step_weight_bytes(folder):
    """Bytes of weights one greedy step at batch 1 reads (model.safetensors' header): every decoder
    matrix but the cross-attention keys and values (projected once per sentence) and the position and
    token tables (a step reads one row), plus the output projection's vocabulary matrix."""
    path = os.path.join(folder, "model.safetensors")
    with open(path, "rb") as f:
        header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    total, vocab = 0, 0
    for name, e in header.items():
        if name == "__metadata__" or len(e["shape"]) != 2:
            continue
        n = e["data_offsets"][1] - e["data_offsets"][0]
        if name.startswith(("lm_head.", "shared.", "model.shared.")):
            vocab = max(vocab, n)  # tied: one matrix read once by the output projection
        elif "decoder." in name and not any(k in name for k in ("embed_", "encoder_attn.k_proj", "encoder_attn.v_proj",
                                                                ".EncDecAttention.k.", ".EncDecAttention.v.",
                                                                "relative_attention_bias")):
            total += n
    return total + vocab


def bandwidth_floor(folder, steps, threads, measured):
    """The least time `steps` greedy steps at batch 1 can take on this machine: each reads its weights
    from memory (they are larger than the caches) at the measured bandwidth. Beside attnviz's and
    transformers' measured greedy times: the ratio to transformers below which no float32 decoder of
    this model can go here (the encoder and the maps not counted)."""
    step = greedy_step_weight_bytes(folder)
    gb_s = read_bandwidth_gb_s(step, threads)
    floor_ms = steps * step / (gb_s * 1e9) * 1e3
    out = {"weights_read_per_step_mb": round(step / 1e6, 1), "read_bandwidth_gb_s": round(gb_s, 1),
           "steps": steps, "floor_ms_per_sentence": round(floor_ms, 1)}
    med = measured["median_ms_per_sentence"]
    out["attnviz_greedy_over_floor"] = round(med["attnviz_greedy"] / floor_ms, 3)
    out["floor_over_transformers_greedy"] = round(floor_ms / med["hf_greedy"], 3)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cli")
    ap.add_argument("work")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sentences", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default="t5,bart,summary")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(FIXTURES, "bart", "tokenizer.json")):
        sys.exit("bench_families.py: no fixtures in " + FIXTURES + ": run ctest -R 'pretrained fixtures' first")
    os.makedirs(a.work, exist_ok=True)
    torch.set_num_threads(a.threads)
    only = set(a.only.split(","))
    texts = sentences(a.sentences)
    report = {"machine": machine(), "threads": a.threads, "load_before": os.getloadavg(), "rounds": a.rounds}
    if "t5" in only:
        t5 = build_t5(a.work)
        report["flan_t5_base_sized_batch1"] = measure(Engines(a.cli, t5, a.threads, texts), 24, a.rounds)
        report["flan_t5_base_sized_bandwidth_floor"] = bandwidth_floor(t5, 24, a.threads, report["flan_t5_base_sized_batch1"])
    if "bart" in only or "summary" in only:
        bart = build_bart(a.work)
        if "bart" in only:
            report["bart_base_sized_batch1"] = measure(Engines(a.cli, bart, a.threads, texts), 24, a.rounds)
            report["bart_base_sized_bandwidth_floor"] = bandwidth_floor(bart, 24, a.threads, report["bart_base_sized_batch1"])
        if "summary" in only:
            from transformers import AutoTokenizer
            docs = long_inputs(AutoTokenizer.from_pretrained(bart), 3, 1024)
            report["bart_base_sized_summary_1024_in_64_out"] = measure(Engines(a.cli, bart, a.threads, docs), 64, a.rounds)
    report["load_after"] = os.getloadavg()
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
