#!/usr/bin/env python3
"""Decoding speed of an opus-mt-sized Marian: attnviz against CTranslate2 and transformers.

    bench_pretrained.py ATTNVIZ_CLI WORK_DIR [--rounds 3] [--sentences 20] [--threads 2]

Builds once, in WORK_DIR, a Marian of opus-mt's size with random weights made by
transformers (d_model 512, 6 + 6 layers, 8 heads, ffn 2048, vocabulary 59,514: a small
SentencePiece model trained on tests/data's sentences, its vocabulary padded with filler
tokens to opus-mt's size) and its CTranslate2 conversion (float32). Then, in interleaved
rounds, decodes the same sentences one at a time (batch 1), every output exactly 24 tokens
(untrained models never stop by themselves), greedy and beam 4, with:
  - attnviz-cli bench-decode --batch 1 --fixed-length 24 (every attention map kept);
  - CTranslate2's Translator (min/max_decoding_length 24, intra_threads as --threads);
  - transformers' generate() (PyTorch eager, no maps, min/max_new_tokens 24).
Prints one JSON object: milliseconds per sentence per engine and search, the ratios, the
machine, and the memory bandwidth batch-1 decoding uses (the decoder's weights read per
token) beside this machine's measured copy bandwidth. Run by hand; needs ctranslate2
(pip install ctranslate2==4.8.5, or ATTNVIZ_BENCH_PEERS=1 ./setup.sh).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LENGTH = 24


def machine():
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__}


def build_model(work):
    import sentencepiece as spm
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer, GenerationConfig
    folder = os.path.join(work, "opus-mt-sized")
    if os.path.exists(os.path.join(folder, "model.safetensors")):
        return folder
    os.makedirs(folder, exist_ok=True)
    lines = []
    for name in ("eng-rus.tsv", "eng-ell.tsv"):
        with open(os.path.join(ROOT, "tests", "data", name), encoding="utf-8") as f:
            for line in f:
                lines.extend(p for p in line.rstrip("\n").split("\t") if p)
    text = os.path.join(work, "spm.txt")
    with open(text, "w", encoding="utf-8") as f:
        f.write("\n".join(lines * 3) + "\n")
    prefix = os.path.join(work, "spm")
    spm.SentencePieceTrainer.train(input=text, model_prefix=prefix, vocab_size=200, character_coverage=1.0,
                                   minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    vocab = {"</s>": 0, "<unk>": 1}
    for i in range(sp.get_piece_size()):
        vocab.setdefault(sp.id_to_piece(i), len(vocab))
    while len(vocab) < 59513:
        vocab[f"▁filler{len(vocab)}"] = len(vocab)
    vocab["<pad>"] = len(vocab)
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    tok = MarianTokenizer(prefix + ".model", prefix + ".model", os.path.join(folder, "vocab.json"))
    tok.save_pretrained(folder)
    cfg = MarianConfig(vocab_size=len(vocab), d_model=512, encoder_layers=6, decoder_layers=6,
                       encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048,
                       decoder_ffn_dim=2048, max_position_embeddings=512, activation_function="swish",
                       scale_embedding=True, pad_token_id=tok.pad_token_id, eos_token_id=0,
                       decoder_start_token_id=tok.pad_token_id, forced_eos_token_id=0)
    torch.manual_seed(0)
    model = MarianMTModel(cfg)
    model.generation_config = GenerationConfig(num_beams=4, max_length=512, bad_words_ids=[[tok.pad_token_id]],
                                               decoder_start_token_id=tok.pad_token_id, eos_token_id=0,
                                               forced_eos_token_id=0, pad_token_id=tok.pad_token_id)
    model.save_pretrained(folder)
    return folder


def convert_ct2(folder, work):
    import ctranslate2
    out = os.path.join(work, "opus-mt-sized-ct2")
    if not os.path.exists(os.path.join(out, "model.bin")):
        ctranslate2.converters.TransformersConverter(folder).convert(out, force=True)
    return out


def sentences(n):
    path = os.path.join(ROOT, "..", "shared", "data", "tatoeba-eng-fra-5000.tsv")
    out = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                src = line.split("\t")[0].strip()
                if len(src.split()) >= 4:
                    out.append(src)
                if len(out) >= n:
                    break
    if len(out) < n:
        out += ["I am a small frog.", "Where is the bus stop?", "She sells sea shells by the sea shore."] * n
    return out[:n]


def bandwidth_gbs():
    """A large float32 copy: bytes read + written per second, best of 5."""
    a = torch.empty(64 * 1024 * 1024, dtype=torch.float32).uniform_()
    b = torch.empty_like(a)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        b.copy_(a)
        best = min(best, time.perf_counter() - t)
    return 2 * a.numel() * 4 / best / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cli")
    ap.add_argument("work")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sentences", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    import ctranslate2
    from transformers import MarianMTModel, MarianTokenizer
    os.makedirs(a.work, exist_ok=True)
    torch.set_num_threads(a.threads)
    folder = build_model(a.work)
    ct2_dir = convert_ct2(folder, a.work)
    texts = sentences(a.sentences)
    data = os.path.join(a.work, "sentences.tsv")
    with open(data, "w", encoding="utf-8") as f:
        f.write("".join(f"{s}\t{s}\n" for s in texts))
    tok = MarianTokenizer.from_pretrained(folder)
    hf = MarianMTModel.from_pretrained(folder).eval()
    ct2 = ctranslate2.Translator(ct2_dir, device="cpu", inter_threads=1, intra_threads=a.threads)
    encoded = [tok(s, return_tensors="pt") for s in texts]
    pieces = [tok.convert_ids_to_tokens(e.input_ids[0].tolist()) for e in encoded]

    def time_hf(beam):
        t = time.perf_counter()
        with torch.no_grad():
            for e in encoded:
                out = hf.generate(**e, num_beams=beam, max_new_tokens=LENGTH, min_new_tokens=LENGTH)
                assert out.shape[-1] == LENGTH + 1
        return 1000 * (time.perf_counter() - t) / len(texts)

    def time_ct2(beam):
        t = time.perf_counter()
        for p in pieces:
            r = ct2.translate_batch([p], beam_size=beam, max_decoding_length=LENGTH, min_decoding_length=LENGTH)
            assert len(r[0].hypotheses[0]) >= LENGTH - 1
        return 1000 * (time.perf_counter() - t) / len(texts)

    def time_attnviz():
        r = subprocess.run([a.cli, "--threads", str(a.threads), "bench-decode", "--model", folder, "--data", data,
                            "--batch", "1", "--fixed-length", str(LENGTH), "--beam", "4", "--repeat", "1", "--runs", "greedy,beam4",
                            "--sentences", str(len(texts))], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"attnviz-cli bench-decode failed: {r.stderr}")
        runs = {x["name"]: x["ms_per_sentence"] for x in json.loads(r.stdout)["runs"]}
        return runs["greedy"], runs["beam4"]

    results = {k: [] for k in ("attnviz_greedy", "attnviz_beam4", "ct2_greedy", "ct2_beam4", "hf_greedy", "hf_beam4")}
    time_ct2(1), time_hf(1)  # warm up
    for _ in range(a.rounds):
        g, b = time_attnviz()
        results["attnviz_greedy"].append(g)
        results["attnviz_beam4"].append(b)
        results["ct2_greedy"].append(time_ct2(1))
        results["ct2_beam4"].append(time_ct2(4))
        results["hf_greedy"].append(time_hf(1))
        results["hf_beam4"].append(time_hf(4))
    med = {k: statistics.median(v) for k, v in results.items()}
    dec_bytes = sum(p.numel() * 4 for n, p in hf.named_parameters() if "decoder" in n or "shared" in n)
    report = {
        "machine": machine(), "threads": a.threads, "sentences": len(texts), "output_tokens": LENGTH,
        "rounds": a.rounds, "ms_per_sentence": results, "median_ms_per_sentence": med,
        "attnviz_over_ct2": {s: med[f"attnviz_{s}"] / med[f"ct2_{s}"] for s in ("greedy", "beam4")},
        "attnviz_over_transformers": {s: med[f"attnviz_{s}"] / med[f"hf_{s}"] for s in ("greedy", "beam4")},
        "decoder_weight_mb": dec_bytes / 1e6,
        "attnviz_greedy_read_gbs": dec_bytes * LENGTH / (med["attnviz_greedy"] / 1000) / 1e9,
        "machine_copy_gbs": bandwidth_gbs(),
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
