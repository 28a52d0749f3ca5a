#!/usr/bin/env python3
"""NLLB-600M-sized int8 decoding: attnviz against CTranslate2 int8, with opening time and peak RSS (issue 49).

    bench_nllb600m.py ATTNVIZ_CLI WORK_DIR [--rounds 3] [--threads 2] [--batch1-sentences 4]
                      [--sentences 64] [--no-fp32] [--no-ct2-float32] [--build-only]

Builds once, in WORK_DIR, a model of NLLB-200-distilled-600M's size with random weights made by
transformers 5: M2M100ForConditionalGeneration (model_type m2m_100), d_model 1,024, 12 + 12 layers,
16 heads, ffn 4,096, ReLU, scaled embeddings, 1,024 positions, the vocabulary matrix (256,206 x 1,024)
tied to lm_head; ~615 M parameters, 2.46 GB of float32 safetensors. Its tokenizer is NLLB's as
transformers 5 saves it (NllbTokenizer, tokenizer.json): the project's small NLLB fixture
(build/release/tests/hf_fixtures/nllb, made by `ctest -R "pretrained fixtures"`: a SentencePiece BPE
trained on the test sentences, with NLLB's 202 language codes and <mask> as added tokens), its BPE
vocabulary padded with filler pieces so that the tokenizer has 256,206 entries, the language codes
and <mask> moved to the end (ids 256,003..256,205), as NLLB's own come after its pieces; src_lang
eng_Latn, tgt_lang fra_Latn. Then CTranslate2's converter (TransformersConverter) makes int8 and
(unless --no-ct2-float32) float32 copies.

Measured, 2 threads, every output exactly 24 tokens, the target language code included (untrained
models never stop by themselves):
  1. opening: wall seconds and peak RSS (/usr/bin/time -f "%e %M") of
       attnviz-cli translate --model DIR --precision int8|fp32 --max-length 24 --source-lang eng_Latn
                             --target-lang fra_Latn "SENTENCE"
     (and the same with --max-length 1: about the opening alone), and of a Python process that
     imports ctranslate2, opens the int8 copy and translates the same sentence (its own clock also
     splits import / open / translate);
  2. ms per sentence, in interleaved rounds (median given): batch 1 (--batch1-sentences sentences
     one at a time, attnviz keeping every attention map) and batch 32 (--sentences sentences in
     batches of 32), greedy and beam 4:
       attnviz-cli bench-decode --precision int8 --batch B --fixed-length 24 --runs greedy,beam4
       (the languages are the tokenizer_config.json's src_lang / tgt_lang: bench-decode has no
       --source-lang / --target-lang; one untimed round before the timed one)
     against CTranslate2 int8: translate_batch(..., target_prefix=[["fra_Latn"]] * n,
     min_decoding_length=24, max_decoding_length=24, beam_size=B, max_batch_size=B);
     both run 24 decoder steps a sentence: the forced code fra_Latn, then 23 tokens (attnviz's
     --fixed-length and CTranslate2's decoding lengths both count the code; checked on CTranslate2's
     hypotheses, and attnviz's translate gives 24 output tokens);
     and (unless --no-fp32) attnviz fp32 at batch 1, greedy, for reference.
Prints one JSON object (machine, load average before and after, every round, the medians, the
ratios). Needs ctranslate2 (ATTNVIZ_BENCH_PEERS=1 ./setup.sh) and ~8 GB of disk in WORK_DIR.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from bench_pretrained import machine, sentences  # noqa: E402

FIXTURE = os.path.join(ROOT, "build", "release", "tests", "hf_fixtures", "nllb")
VOCAB = 256206  # NLLB-200's embedding rows (its tokenizer has 256,204 entries; here all 256,206 are tokens)
LENGTH = 24
SRC, TGT = "eng_Latn", "fra_Latn"


def nllb_tokenizer(folder):
    """The fixture's NLLB tokenizer.json padded to VOCAB entries, the added tokens (<mask>, the
    language codes) moved after the fillers; tokenizer_config.json copied (src_lang, tgt_lang set)."""
    with open(os.path.join(FIXTURE, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    model = tj["model"]
    assert model["type"] == "BPE", model["type"]
    vocab = model["vocab"]
    base = max(vocab.values()) + 1
    assert sorted(vocab.values()) == list(range(base)), "the fixture's BPE ids are not 0..n-1"
    tail = sorted((t for t in tj["added_tokens"] if t["id"] >= base), key=lambda t: t["id"])
    first_tail = VOCAB - len(tail)
    while len(vocab) < first_tail:
        vocab["\u2581filler%d" % len(vocab)] = len(vocab)
    new_id = {}
    for i, t in enumerate(tail):
        new_id[t["content"]] = first_tail + i
        t["id"] = first_tail + i
    for v in tj["post_processor"]["special_tokens"].values():
        v["ids"] = [new_id.get(tok, i) for tok, i in zip(v["tokens"], v["ids"])]
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    with open(os.path.join(FIXTURE, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    assert "added_tokens_decoder" not in cfg  # else renumber it too
    cfg["src_lang"], cfg["tgt_lang"] = SRC, TGT
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=1)


def build_model(work):
    import torch
    from transformers import AutoTokenizer, GenerationConfig, M2M100Config, M2M100ForConditionalGeneration
    folder = os.path.join(work, "nllb-600m-sized")
    if os.path.exists(os.path.join(folder, "model.safetensors")):
        return folder
    if not os.path.exists(os.path.join(FIXTURE, "tokenizer.json")):
        sys.exit("bench_nllb600m.py: no NLLB fixture in " + FIXTURE + ": run ctest -R 'pretrained fixtures' first")
    nllb_tokenizer(folder)
    tok = AutoTokenizer.from_pretrained(folder)
    assert len(tok) == VOCAB, len(tok)
    ids = tok("Where is the bus stop?").input_ids
    assert ids[0] == tok.convert_tokens_to_ids(SRC) >= VOCAB - 203 and ids[-1] == tok.eos_token_id, ids
    assert tok.convert_tokens_to_ids(TGT) >= VOCAB - 202, tok.convert_tokens_to_ids(TGT)
    cfg = M2M100Config(vocab_size=VOCAB, d_model=1024, encoder_layers=12, decoder_layers=12,
                       encoder_attention_heads=16, decoder_attention_heads=16, encoder_ffn_dim=4096,
                       decoder_ffn_dim=4096, max_position_embeddings=1024, activation_function="relu",
                       scale_embedding=True, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                       eos_token_id=tok.eos_token_id, decoder_start_token_id=tok.eos_token_id,
                       tie_word_embeddings=True, dropout=0.1, attention_dropout=0.1, activation_dropout=0.0)
    torch.manual_seed(0)
    model = M2M100ForConditionalGeneration(cfg)
    model.generation_config = GenerationConfig(decoder_start_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id,
                                               pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                                               max_length=200)  # NLLB-600M's: greedy unless asked
    model.save_pretrained(folder)
    return folder


def convert_ct2(folder, quantization):
    import ctranslate2
    out = f"{folder}-ct2-{quantization}"
    if not os.path.exists(os.path.join(out, "model.bin")):
        ctranslate2.converters.TransformersConverter(folder).convert(out, quantization=quantization, force=True)
    return out


def du_gb(path):
    return round(sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs) / 1e9, 3)


CT2_OPEN = r"""
import json, sys, time
t0 = time.perf_counter()
import ctranslate2
t1 = time.perf_counter()
tr = ctranslate2.Translator(sys.argv[1], device="cpu", compute_type="int8", inter_threads=1, intra_threads=int(sys.argv[2]))
t2 = time.perf_counter()
r = tr.translate_batch([json.loads(sys.argv[3])], target_prefix=[[sys.argv[4]]], beam_size=1,
                       max_decoding_length=int(sys.argv[5]))
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "translate_s": t3 - t2, "tokens": len(r[0].hypotheses[0])}))
"""


def warm_files(*folders):
    """Reads every file of the folders once, so that no opening below is timed reading the disk
    (the first one after building the model would be, and not the others)."""
    for folder in folders:
        for root, _, files in os.walk(folder):
            for name in files:
                with open(os.path.join(root, name), "rb") as f:
                    while f.read(1 << 24):
                        pass


def timed(argv, env=None):
    """argv under /usr/bin/time: (wall seconds, peak RSS MB, stdout)."""
    r = subprocess.run(["/usr/bin/time", "-f", "%e %M"] + argv, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv[:6])} ... failed: {r.stderr[-2000:]}")
    wall, kb = r.stderr.strip().splitlines()[-1].split()
    return float(wall), int(kb) / 1024.0, r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cli")
    ap.add_argument("work")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sentences", type=int, default=64, help="sentences decoded in batches of 32")
    ap.add_argument("--batch1-sentences", type=int, default=4, help="sentences decoded one at a time")
    ap.add_argument("--no-fp32", action="store_true", help="skip attnviz fp32 (batch 1 greedy, opening)")
    ap.add_argument("--no-ct2-float32", action="store_true", help="do not make CTranslate2's float32 copy")
    ap.add_argument("--build-only", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    load_before = os.getloadavg()
    t = time.perf_counter()
    folder = build_model(a.work)
    ct2_int8 = convert_ct2(folder, "int8")
    ct2_fp32 = None if a.no_ct2_float32 else convert_ct2(folder, "float32")
    build_s = time.perf_counter() - t
    sizes = {"hf_fp32_gb": du_gb(folder), "ct2_int8_gb": du_gb(ct2_int8)}
    if ct2_fp32:
        sizes["ct2_float32_gb"] = du_gb(ct2_fp32)
    if a.build_only:
        print(json.dumps({"folder": folder, "ct2_int8": ct2_int8, "ct2_float32": ct2_fp32, "sizes": sizes,
                          "build_seconds": round(build_s, 1)}))
        return 0

    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(folder)
    texts = sentences(max(a.sentences, a.batch1_sentences))
    pieces = [tok.convert_ids_to_tokens(tok(s).input_ids) for s in texts]
    assert all(p[0] == SRC and p[-1] == "</s>" for p in pieces), pieces[0]

    def data_file(n):
        path = os.path.join(a.work, f"sentences{n}.tsv")
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(f"{s}\t{s}\n" for s in texts[:n]))
        return path

    # 1. Opening: wall time and peak RSS of a process that opens the model and translates one sentence.
    opening = {}
    warm_files(folder, ct2_int8)
    cli = [a.cli, "--threads", str(a.threads)]
    for p in ("int8",) + (() if a.no_fp32 else ("fp32",)):
        wall, rss, out = timed(cli + ["translate", "--model", folder, "--precision", p, "--max-length", str(LENGTH),
                                      "--beam", "1",
                                      "--source-lang", SRC, "--target-lang", TGT, texts[0]])
        opening[f"attnviz_{p}"] = {"wall_s": wall, "peak_rss_mb": round(rss, 1), "output": out.strip()[:200]}
        # the same with one output token (--max-length 1): about the opening alone
        wall, rss, _ = timed(cli + ["translate", "--model", folder, "--precision", p, "--max-length", "1", "--beam", "1",
                                    "--source-lang", SRC, "--target-lang", TGT, texts[0]])
        opening[f"attnviz_{p}"].update({"wall_s_max_length_1": wall, "peak_rss_mb_max_length_1": round(rss, 1)})
    wall, rss, out = timed([sys.executable, "-c", CT2_OPEN, ct2_int8, str(a.threads), json.dumps(pieces[0]), TGT,
                            str(LENGTH)])
    opening["ct2_int8_python"] = {"wall_s": wall, "peak_rss_mb": round(rss, 1),
                                  **{k: round(v, 3) if isinstance(v, float) else v for k, v in json.loads(out).items()}}

    # 2. Decoding speed, interleaved rounds.
    import ctranslate2
    tr = ctranslate2.Translator(ct2_int8, device="cpu", compute_type="int8", inter_threads=1, intra_threads=a.threads)
    count = {1: a.batch1_sentences, 32: a.sentences}

    def time_ct2(batch, beam):
        src = pieces[:count[batch]]
        t = time.perf_counter()
        for i in range(0, len(src), batch):
            part = src[i:i + batch]
            r = tr.translate_batch(part, target_prefix=[[TGT]] * len(part), beam_size=beam, max_batch_size=batch,
                                   min_decoding_length=LENGTH, max_decoding_length=LENGTH)
            for x in r:
                h = x.hypotheses[0]
                assert h[0] == TGT and len(h) == LENGTH, (len(h), h[:3])
        return 1000 * (time.perf_counter() - t) / len(src)

    def time_attnviz(precision, batch, runs):
        n = count[batch]
        r = subprocess.run(cli + ["bench-decode", "--model", folder, "--data", data_file(n), "--batch", str(batch),
                                  "--fixed-length", str(LENGTH), "--max-length", str(LENGTH), "--beam", "4",
                                  "--repeat", "1", "--runs", runs, "--sentences", str(n), "--precision", precision],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"attnviz-cli bench-decode --precision {precision} --batch {batch} failed: {r.stderr[-2000:]}")
        j = json.loads(r.stdout)
        assert j.get("precision", precision) == precision, j.get("precision")
        return {x["name"]: x["ms_per_sentence"] for x in j["runs"]}

    results = {}

    def add(key, v):
        results.setdefault(key, []).append(round(v, 1))

    time_ct2(1, 1)  # warm up
    for rnd in range(a.rounds):
        for batch in (1, 32):
            for name, v in time_attnviz("int8", batch, "greedy,beam4").items():
                add(f"attnviz_int8_b{batch}_{name}", v)
            add(f"ct2_int8_b{batch}_greedy", time_ct2(batch, 1))
            add(f"ct2_int8_b{batch}_beam4", time_ct2(batch, 4))
        if not a.no_fp32:
            add("attnviz_fp32_b1_greedy", time_attnviz("fp32", 1, "greedy")["greedy"])
        with open(os.path.join(a.work, "timings.json"), "w") as f:  # kept should a later round fail
            json.dump({"round": rnd, "ms_per_sentence": results, "opening": opening}, f)
    med = {k: round(statistics.median(v), 1) for k, v in results.items()}
    ratios = {}
    for batch in (1, 32):
        for s in ("greedy", "beam4"):
            x, y = f"attnviz_int8_b{batch}_{s}", f"ct2_int8_b{batch}_{s}"
            if x in med and y in med:
                ratios[f"attnviz_int8_over_ct2_int8_b{batch}_{s}"] = round(med[x] / med[y], 3)
    if "attnviz_fp32" in opening:
        ratios["rss_attnviz_int8_over_fp32"] = round(opening["attnviz_int8"]["peak_rss_mb"] /
                                                     opening["attnviz_fp32"]["peak_rss_mb"], 3)
    ratios["rss_attnviz_int8_over_ct2_int8"] = round(opening["attnviz_int8"]["peak_rss_mb"] /
                                                     opening["ct2_int8_python"]["peak_rss_mb"], 3)
    report = {
        "machine": machine(), "ctranslate2": ctranslate2.__version__, "threads": a.threads, "output_tokens": LENGTH,
        "rounds": a.rounds, "sentences": {"1": count[1], "32": count[32]}, "model_files": sizes,
        "load_average_before": [round(x, 2) for x in load_before], "opening": opening,
        "ms_per_sentence": results, "median_ms_per_sentence": med, "ratios": ratios,
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
