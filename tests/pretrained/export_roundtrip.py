#!/usr/bin/env python3
"""A pretrained model written back by attnviz loads in transformers and translates the same.

    export_roundtrip.py ATTNVIZ_CLI FIXTURES_DIR WORK_DIR

1. attnviz-cli export-model --format hf writes the Marian, M2M100, BART, mBART-50, T5 and Flan-T5 fixtures back: every
   tensor of the written model.safetensors equals the original's, bit for bit, and
   transformers' from_pretrained() + generate() gives the texts attnviz-cli translate gives.
2. A fine-tuned model round-trips: attnviz-cli train --init-from the Marian fixture on
   tests/data/eng-rus.tsv for one epoch, export-model, and transformers' generate() on the
   exported folder gives the texts attnviz-cli translate gives for the checkpoint; its weights
   differ from the original's (it did train). The same for the BART fixture (its learned positions and
   layernorm_embedding trained too).
3. Fine-tuning on references long enough that validation would decode past Marian's
   position table trains and validates (the output stops at the table's end).
4. A pair longer than the table is refused before training, naming its line.
5. eval and heads read a word-level corpus file with the model's own tokenizer.
Exit 77 (skipped) when torch, transformers or the fixtures are missing.
"""
import json
import os
import subprocess
import sys

try:
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
except ImportError as e:  # pragma: no cover
    print(f"export_roundtrip: {e}; skipping", file=sys.stderr)
    sys.exit(77)

SENTENCES = ["Hello, Tom.", "I am a small frog.", "Привет, мир!", "Where is the bus stop?"]


def run(*args):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(args)}: exit {r.returncode}\n{r.stderr}")
    return r.stdout


def attnviz_texts(cli, model, extra=()):
    return run(cli, "translate", "--model", model, *extra, *SENTENCES).splitlines()


def transformers_texts(folder, gen_kwargs, tok_kwargs):
    tok = AutoTokenizer.from_pretrained(folder, **tok_kwargs)
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    out = []
    with torch.no_grad():
        for s in SENTENCES:
            ids = model.generate(**tok(s, return_tensors="pt"), **gen_kwargs)[0]
            out.append(tok.decode(ids, skip_special_tokens=True))
    return out


def same_tensors(a_file, b_file):
    a, b = load_file(a_file), load_file(b_file)
    if set(a) != set(b):
        sys.exit(f"tensor names differ: {sorted(set(a) ^ set(b))[:5]}")
    for k in a:
        if a[k].shape != b[k].shape or not torch.equal(a[k], b[k]):
            return False
    return True


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    cli, fixtures, work = sys.argv[1:]
    if not os.path.exists(os.path.join(fixtures, "reference.json")):
        print("export_roundtrip: no fixtures; skipping", file=sys.stderr)
        return 77
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(1)
    cases = [("marian", {}, {}, ()), ("m2m100", {"forced_bos_token_id": None}, {"src_lang": "en"},
                                      ("--target-lang", "fr")),
             # BART (its generation config: <s> forced first, beams, no_repeat_ngram_size) and mBART-50.
             ("bart", {}, {}, ()),
             ("mbart50", {"forced_bos_token_id": None}, {"src_lang": "en_XX"}, ("--target-lang", "fr_XX")),
             # T5 (tied, rescaled) and Flan-T5-style (gated-GELU, its own lm_head): tools/hf_fixtures_t5.py.
             ("t5", {}, {}, ()), ("flan_t5", {}, {}, ())]
    for name, gen, tok_kwargs, flags in cases:
        out = os.path.join(work, name + "_export")
        run(cli, "export-model", "--model", os.path.join(fixtures, name), "--format", "hf", "--out", out)
        if not same_tensors(os.path.join(fixtures, name, "model.safetensors"), os.path.join(out, "model.safetensors")):
            sys.exit(f"{name}: the exported tensors differ from the original's")
        if name == "m2m100":
            gen = {"forced_bos_token_id": AutoTokenizer.from_pretrained(out).get_lang_id("fr")}
        if name == "mbart50":
            gen = {"forced_bos_token_id": AutoTokenizer.from_pretrained(out).convert_tokens_to_ids("fr_XX")}
        want = attnviz_texts(cli, os.path.join(fixtures, name), flags)
        got = transformers_texts(out, gen, tok_kwargs)
        if want != got:
            sys.exit(f"{name}: transformers on the exported folder translates {got}, attnviz {want}")
        print(f"{name}: exported, tensors equal, {len(got)} translations equal")

    ckpt = os.path.join(work, "tuned.ckpt")
    data = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "eng-rus.tsv")
    run(cli, "train", "--init-from", os.path.join(fixtures, "marian"), "--data", data, "--epochs", "1",
        "--lr", "0.003", "--eval-sample", "4", "--save", ckpt, "-q")
    tuned = os.path.join(work, "tuned_export")
    run(cli, "export-model", "--model", ckpt, "--format", "hf", "--out", tuned)
    if same_tensors(os.path.join(fixtures, "marian", "model.safetensors"), os.path.join(tuned, "model.safetensors")):
        sys.exit("fine-tuned: the exported weights are the original's (did it train?)")
    want = attnviz_texts(cli, ckpt)
    got = transformers_texts(tuned, {}, {})
    if want != got:
        sys.exit(f"fine-tuned: transformers translates {got}, attnviz {want}")
    print(f"fine-tuned: exported after one epoch, {len(got)} translations equal: {json.dumps(got, ensure_ascii=False)}")
    # The same for BART: its learned positions and layernorm_embedding train and go back under their names.
    if os.path.isdir(os.path.join(fixtures, "bart")):
        bart_ckpt = os.path.join(work, "tuned_bart.ckpt")
        run(cli, "train", "--init-from", os.path.join(fixtures, "bart"), "--data", data, "--epochs", "1",
            "--lr", "0.003", "--eval-sample", "4", "--save", bart_ckpt, "-q")
        bart_out = os.path.join(work, "tuned_bart_export")
        run(cli, "export-model", "--model", bart_ckpt, "--format", "hf", "--out", bart_out)
        before = load_file(os.path.join(fixtures, "bart", "model.safetensors"))
        after = load_file(os.path.join(bart_out, "model.safetensors"))
        for k in ("model.encoder.embed_positions.weight", "model.decoder.layernorm_embedding.weight"):
            if torch.equal(before[k], after[k]):
                sys.exit(f"fine-tuned BART: {k} did not change")
        want = attnviz_texts(cli, bart_ckpt)
        got = transformers_texts(bart_out, {}, {})
        if want != got:
            sys.exit(f"fine-tuned BART: transformers translates {got}, attnviz {want}")
        print(f"fine-tuned BART: exported after one epoch, {len(got)} translations equal: {json.dumps(got, ensure_ascii=False)}")
    # And for Flan-T5: every weight trains (its relative position biases and RMSNorms too) and goes back as
    # transformers names it, lm_head its own.
    if os.path.isdir(os.path.join(fixtures, "flan_t5")):
        t5_ckpt = os.path.join(work, "tuned_flan_t5.ckpt")
        run(cli, "train", "--init-from", os.path.join(fixtures, "flan_t5"), "--data", data, "--epochs", "1",
            "--lr", "0.003", "--eval-sample", "4", "--save", t5_ckpt, "-q")
        t5_out = os.path.join(work, "tuned_flan_t5_export")
        run(cli, "export-model", "--model", t5_ckpt, "--format", "hf", "--out", t5_out)
        before = load_file(os.path.join(fixtures, "flan_t5", "model.safetensors"))
        after = load_file(os.path.join(t5_out, "model.safetensors"))
        for k in ("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", "decoder.final_layer_norm.weight",
                  "lm_head.weight"):
            if torch.equal(before[k], after[k]):
                sys.exit(f"fine-tuned Flan-T5: {k} did not change")
        want = attnviz_texts(cli, t5_ckpt)
        got = transformers_texts(t5_out, {}, {})
        if want != got:
            sys.exit(f"fine-tuned Flan-T5: transformers translates {got}, attnviz {want}")
        print(f"fine-tuned Flan-T5: exported after one epoch, {len(got)} translations equal: {json.dumps(got, ensure_ascii=False)}")

    # 3. Validation decodes within Marian's position table: references of 37 pieces (twelve
    # "le", three pieces each in the fixture's vocabulary, and </s>) let validation decode up
    # to 2 x 37 + 2 = 76 tokens, past the fixture's 64 positions; the output stops at the
    # table's end (as generate() does) instead of failing the run ("position 64 is past the
    # model's 64 positions" before).
    long_tsv = os.path.join(work, "long.tsv")
    with open(long_tsv, "w", encoding="utf-8") as f:
        for i in range(20):
            f.write("the cat " + "and the dog " * 3 + "\t" + " ".join(["le"] * 12) + "\n")
    run(cli, "train", "--init-from", os.path.join(fixtures, "marian"), "--data", long_tsv, "--epochs", "1",
        "--lr", "0.003", "--save", os.path.join(work, "long.ckpt"), "-q")
    print("fine-tuned on long references: validation stayed within the 64 positions")
    # 4. A pair longer than the table itself (32 "le" are 97 pieces) is refused before training,
    # naming its line, not when its batch comes.
    too_long = os.path.join(work, "too_long.tsv")
    with open(too_long, "w", encoding="utf-8") as f:
        f.write("the cat\tle chat\n" * 5 + "the dog\t" + " ".join(["le"] * 32) + "\n" + "a cat\tun chat\n" * 5)
    r = subprocess.run([cli, "train", "--init-from", os.path.join(fixtures, "marian"), "--data", too_long, "--epochs",
                        "1", "--save", os.path.join(work, "too_long.ckpt"), "-q"], capture_output=True, text=True)
    if r.returncode == 0 or "line 6" not in r.stderr or "max_position_embeddings" not in r.stderr \
            or len(r.stderr.strip().splitlines()) != 1:
        sys.exit(f"a pair past the position table: exit {r.returncode}, {r.stderr!r}")
    print(f"a pair past the position table refused: {r.stderr.strip()}")
    # 5. eval and heads read a word-level corpus file with the model's own tokenizer, as
    # fine-tuning does (they answered "the model works on subwords but the corpus is tokenised
    # differently"): every head of every kind measured.
    ev = json.loads(run(cli, "eval", "--model", os.path.join(fixtures, "marian"), "--data", data, "--split", "all",
                        "--json"))
    heads = json.loads(run(cli, "heads", "--model", os.path.join(fixtures, "marian"), "--data", data, "--split", "all",
                           "--sentences", "6", "--json"))
    kinds = {h["kind"] for h in heads["heads"]}
    if kinds != {"encoder_self", "cross", "decoder_self"} or heads["sentences"] != 6:
        sys.exit(f"heads on a word-level corpus: {kinds}, {heads['sentences']} sentences")
    print(f"eval and heads on a word-level corpus: loss {ev.get('loss')}, {len(heads['heads'])} heads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
