#!/usr/bin/env python3
"""Folders whose config.json, generation_config.json or weights take the less common paths through
transformers 5, translated by attnviz-cli and by transformers' generate(): the same texts.

    config_variants.py ATTNVIZ_CLI FIXTURES_DIR WORK_DIR

Each variant is a copy of a fixture of tools/make_hf_fixtures.py with one thing changed:
  - embeddings as transformers 5 ties them: tie_word_embeddings false (the encoder's and decoder's
    embed_tokens and lm_head each their own, model.shared unused), or true with an lm_head /
    encoder embed_tokens of other values in the file (transformers then ties that one not);
  - Marian without final_logits_bias (transformers starts it at zero);
  - activation_function gelu_python (transformers' erf GELU written in Python: the same values);
  - layer_norm_eps, which transformers' BART, Marian and M2M100 do not read (their LayerNorms keep 1e-5);
  - T5's dense_act_fn / is_gated_act as save_pretrained writes them, which win over feed_forward_proj;
  - generation settings: repetition_penalty (greedy and beams), suppress_tokens, begin_suppress_tokens,
    min_new_tokens, a negative length_penalty, no_repeat_ngram_size 1 (the start token counts);
  - and one attnviz does not apply (do_sample), which attnviz-cli names in a warning.
A variant's changed weights are the fixture's plus noise and model.shared the fixture's own, so that
reading the wrong tensor gives the fixture's translations: every such variant is checked to translate
differently from its fixture in transformers (else it would prove nothing).
Exit 77 (skipped) when torch, transformers or the fixtures are missing.
"""
import json
import os

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
import shutil
import subprocess
import sys

try:
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
except ImportError as e:  # pragma: no cover
    print(f"config_variants: {e}; skipping", file=sys.stderr)
    sys.exit(77)

SENTENCES = ["Hello, Tom.", "I am a small frog.", "Привет, мир!", "Where is the bus stop?", "Le chat est sur la table."]
LANGS = {"m2m100": ("en", "fr")}  # multilingual fixtures: source and target language


def run(*args):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(args)}: exit {r.returncode}\n{r.stderr}")
    return r.stdout, r.stderr


def attnviz(cli, folder, family):
    flags = ()
    if family in LANGS:
        flags = ("--source-lang", LANGS[family][0], "--target-lang", LANGS[family][1])
    out, err = run(cli, "translate", "--model", folder, "--max-length", "20", *flags, *SENTENCES)
    return out.splitlines(), err


def transformers(folder, family):
    tok_kwargs, gen = {}, {}
    if family in LANGS:
        tok_kwargs = {"src_lang": LANGS[family][0]}
    tok = AutoTokenizer.from_pretrained(folder, **tok_kwargs)
    if family in LANGS:
        gen["forced_bos_token_id"] = tok.get_lang_id(LANGS[family][1])
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    texts = []
    with torch.no_grad():
        for s in SENTENCES:
            # max_new_tokens as attnviz's --max-length 20 (the most output tokens, <eos> included)
            ids = model.generate(**tok(s, return_tensors="pt"), max_new_tokens=20, **gen)[0]
            texts.append(tok.decode(ids, skip_special_tokens=True))
    return texts


def cfg_update(**kv):
    return lambda c: c.update(kv)


def first_generated(folder, position):
    """The tokens generate() gives at `position` of its output (0: the first after the start token)."""
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    found = set()
    with torch.no_grad():
        for s in SENTENCES:
            ids = model.generate(**tok(s, return_tensors="pt"), max_new_tokens=20)[0].tolist()
            if len(ids) > position + 1:
                found.add(ids[position + 1])
    return sorted(found)


def edit_json(folder, name, change):
    path = os.path.join(folder, name)
    data = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    change(data)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)


def noisy(t, seed, scale=0.5):
    g = torch.Generator().manual_seed(seed)
    return (t + scale * t.std() * torch.randn(t.shape, generator=g)).contiguous()


def untied(names, seed):
    """The weights with `names` (tied ones of model.shared) as their own tensors, the fixture's plus noise."""
    def change(w):
        shared = w["model.shared.weight"]
        for i, n in enumerate(names):
            w[n] = noisy(shared, seed + i)
    return change


def variants():
    """(name, fixture, config changes, generation_config changes, weights change, translates differently)."""
    def cfg(**kv):
        return lambda c: c.update(kv)
    all3 = ["model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"]
    return [
        ("bart_untied", "bart", cfg(tie_word_embeddings=False), None, untied(all3, 1), True),
        ("m2m100_untied", "m2m100", cfg(tie_word_embeddings=False), None, untied(all3, 2), True),
        ("marian_untied", "marian", cfg(tie_word_embeddings=False), None, untied(all3, 3), True),
        ("bart_own_lm_head", "bart", None, None, untied(["lm_head.weight"], 4), True),
        ("bart_own_encoder_embeddings", "bart", None, None, untied(["model.encoder.embed_tokens.weight"], 5), True),
        # Left out, transformers starts it at zero (_keys_to_ignore_on_load_missing).
        ("marian_no_final_logits_bias", "marian", None, None, lambda w: w.pop("final_logits_bias"), True),
        ("bart_layer_norm_eps", "bart", cfg(layer_norm_eps=0.5), None, None, False),
        ("bart_gelu_python", "bart", cfg(activation_function="gelu_python"), None, None, False),
        ("marian_layer_norm_eps", "marian", cfg(layer_norm_eps=0.5), None, None, False),
        ("flan_t5_dense_act_fn", "flan_t5", cfg(dense_act_fn="relu"), None, None, True),
        ("t5_is_gated_act", "t5", cfg(feed_forward_proj="gelu", dense_act_fn="relu"), None, None, False),
        ("flan_t5_repetition_penalty", "flan_t5", None, cfg(repetition_penalty=1.8), None, True),
        ("marian_repetition_penalty_beams", "marian", None, cfg(repetition_penalty=1.3, num_beams=3), None, True),
        ("marian_suppress_tokens", "marian", None, cfg(suppress_tokens=[5, 6, 7, 8, 9, 10, 11, 12]), None, True),
        # The tokens the fixture generates right after its forced <s>, barred there (filled in by main).
        ("bart_begin_suppress_tokens", "bart", None, "first tokens", None, True),
        ("marian_min_new_tokens", "marian", None, cfg(min_new_tokens=9), None, True),
        ("bart_negative_length_penalty", "bart", None, cfg(length_penalty=-2.0, early_stopping=False), None, False),
        ("bart_no_repeat_ngram_1", "bart", None, cfg(no_repeat_ngram_size=1, num_beams=1), None, True),
    ]


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    cli, fixtures, work = sys.argv[1:]
    if not os.path.exists(os.path.join(fixtures, "reference.json")):
        print("config_variants: no fixtures; skipping", file=sys.stderr)
        return 77
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(1)
    base_texts = {}
    failures = []
    for name, family, config, generation, weights, differs in variants():
        folder = os.path.join(work, name)
        if os.path.exists(folder):
            shutil.rmtree(folder)
        shutil.copytree(os.path.join(fixtures, family), folder)
        if config:
            edit_json(folder, "config.json", config)
        if generation == "first tokens":
            firsts = first_generated(os.path.join(fixtures, family), position=1)
            generation = cfg_update(begin_suppress_tokens=firsts)
        if generation:
            edit_json(folder, "generation_config.json", generation)
        if weights:
            path = os.path.join(folder, "model.safetensors")
            w = load_file(path)
            weights(w)
            save_file(w, path, metadata={"format": "pt"})
        if family not in base_texts:
            base_texts[family] = transformers(os.path.join(fixtures, family), family)
        want = transformers(folder, family)
        got, _ = attnviz(cli, folder, family)
        if differs and want == base_texts[family]:
            failures.append(f"{name}: transformers translates as the unchanged fixture does ({want}): the variant proves nothing")
        if got != want:
            failures.append(f"{name}: attnviz translates {got}, transformers {want}")
        else:
            print(f"{name}: {len(got)} translations equal{' (the fixture translates otherwise)' if want != base_texts[family] else ''}")
        if weights:
            # Written back, the embeddings stay apart where they were: transformers reads the export the same.
            out = folder + "_export"
            if os.path.exists(out):
                shutil.rmtree(out)
            run(cli, "export-model", "--model", folder, "--format", "hf", "--out", out)
            again = transformers(out, family)
            if again != want:
                failures.append(f"{name}: transformers translates attnviz's export {again}, the folder {want}")
    # A setting attnviz does not apply is named, not silently dropped.
    folder = os.path.join(work, "marian_do_sample")
    if os.path.exists(folder):
        shutil.rmtree(folder)
    shutil.copytree(os.path.join(fixtures, "marian"), folder)
    edit_json(folder, "generation_config.json", lambda g: g.update(do_sample=True, top_k=5))
    _, err = attnviz(cli, folder, "marian")
    if "warning" not in err or "do_sample" not in err:
        failures.append(f"do_sample: attnviz-cli printed no warning naming it (stderr: {err!r})")
    else:
        print("do_sample: named in a warning")
    if failures:
        sys.exit("\n".join(failures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
