"""The T5 family's fixtures for tools/make_hf_fixtures.py (which imports this module and stamps it
with its own hash): a tiny T5 (ReLU feed-forward, tied embeddings rescaled by d_model^-0.5 before
lm_head) and a tiny Flan-T5-style model (gated-GELU, its own lm_head, no rescaling), each trained a
few hundred steps to copy by transformers and saved by transformers 5's save_pretrained: the
tokenizer as tokenizer.json (+ tokenizer_config.json) only, a T5Tokenizer built from a SentencePiece
unigram model trained here with pad 0, </s> 1, <unk> 2 and <extra_id_N> sentinels after the pieces.

Writes OUT/t5 and OUT/flan_t5 and returns their reference entries (make_hf_fixtures.references'
layout) plus, per model, "position_bias": what relative_attention_bias.compute_bias gives for every
head at relative distances -N..N (key position minus query position), encoder (bidirectional) and
decoder (causal), and "task_prefixes": config.json's task_specific_params prefixes.
"""
import os
import shutil

import sentencepiece as spm
import torch
from transformers import GenerationConfig, T5Config, T5ForConditionalGeneration, T5Tokenizer

# Distances -N..N of the recorded position-bias curves: past both models' max_distance, so the
# last (logarithmic, then clamped) buckets are in them.
BIAS_SPAN = 40

T5_SAMPLES = [
    "Hello, Tom.", "I am a small frog.", "translate English to German: I am a small frog.",
    "Привет, мир!", "Le chat est sur la table.", "naïve café ☃ zzz", "Where is the bus stop?", "a  b",
    "Ελληνικά", "Tom </s> x", "The <extra_id_0> sat on <extra_id_1> mat.", "日本語 ☃ zzz", "",
]

TASKS = {"translation_en_to_de": {"early_stopping": True, "max_length": 300, "num_beams": 4,
                                  "prefix": "translate English to German: "},
         "summarization": {"early_stopping": True, "length_penalty": 2.0, "max_length": 200, "min_length": 30,
                           "no_repeat_ngram_size": 3, "num_beams": 4, "prefix": "summarize: "}}


def _tokenizer(out, name, lines, vocab_size, extra_ids):
    work = os.path.join(out, "_" + name + "_spm")
    os.makedirs(work, exist_ok=True)
    text = os.path.join(work, "corpus.txt")
    with open(text, "w", encoding="utf-8") as f:
        f.write("\n".join(lines + [p["prefix"] for p in TASKS.values()] * 20) + "\n")
    spm.SentencePieceTrainer.train(input=text, model_prefix=os.path.join(work, "spiece"), vocab_size=vocab_size,
                                   character_coverage=1.0, model_type="unigram", minloglevel=2, pad_id=0, eos_id=1,
                                   unk_id=2, bos_id=-1, normalization_rule_name="nmt_nfkc")
    os.remove(text)
    built = T5Tokenizer.from_pretrained(work, extra_ids=extra_ids)
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    built.save_pretrained(folder)
    for f in os.listdir(folder):  # transformers 5 writes tokenizer.json and tokenizer_config.json
        if f not in ("tokenizer.json", "tokenizer_config.json"):
            os.remove(os.path.join(folder, f))
    tok = T5Tokenizer.from_pretrained(folder)
    assert tok.convert_tokens_to_ids("<extra_id_0>") == len(tok) - 1, "sentinels must end the vocabulary"
    return tok, folder


def _randomise(model, seed):
    """Norm weights away from what training left (which is near 1), and the position buckets' biases
    spread, so that a wrong norm or a wrong bucket shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.mul_(1 + 0.3 * torch.randn(p.shape, generator=g))
            elif "relative_attention_bias" in name:
                p.add_(0.5 * torch.randn(p.shape, generator=g))


def _position_bias(model):
    out = {"span": BIAS_SPAN}
    n = 2 * BIAS_SPAN + 1
    for side, stack in (("encoder", model.encoder), ("decoder", model.decoder)):
        attn = stack.block[0].layer[0].SelfAttention
        with torch.no_grad():
            # One query at position N over keys 0..2N: key - query runs -N..N.
            bias = attn.compute_bias(1, n, past_seen_tokens=BIAS_SPAN)  # [1, h, 1, n]
        out[side] = bias[0, :, 0, :].tolist()
    return out


def make_t5(out, lines, train_to_copy, references, name="t5", gated=False, seed=11):
    tok, folder = _tokenizer(out, name, lines, 240 if not gated else 220, 20 if not gated else 12)
    # (num_decoder_layers = num_layers: transformers 5.24 generate()s with a cache sized by num_layers.)
    V = len(tok) + 6  # rows past the tokenizer's, as t5-small's 32,128 past its 32,100 tokens
    if not gated:
        cfg = T5Config(vocab_size=V, d_model=32, d_kv=12, num_heads=4, d_ff=64, num_layers=2, num_decoder_layers=2,
                       relative_attention_num_buckets=8, relative_attention_max_distance=16, feed_forward_proj="relu",
                       tie_word_embeddings=True, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
                       dropout_rate=0.1, task_specific_params=TASKS)
    else:
        cfg = T5Config(vocab_size=V, d_model=32, d_kv=8, num_heads=6, d_ff=40, num_layers=3, num_decoder_layers=3,
                       relative_attention_num_buckets=10, relative_attention_max_distance=24,
                       feed_forward_proj="gated-gelu", tie_word_embeddings=False, pad_token_id=0, eos_token_id=1,
                       decoder_start_token_id=0, dropout_rate=0.1, layer_norm_epsilon=1e-5,
                       task_specific_params={"translation_en_to_de": TASKS["translation_en_to_de"]})
    torch.manual_seed(seed)
    model = T5ForConditionalGeneration(cfg)
    if gated:
        # Flan-T5's own lm_head (transformers 5 ties a fresh T5 whatever the config says; a Flan-T5
        # checkpoint's separate lm_head.weight is loaded untied): untied here, saved as its own tensor.
        model.lm_head.weight = torch.nn.Parameter(model.shared.weight.detach().clone() * 0.7)
        model.config.tie_word_embeddings = False
        model.all_tied_weights_keys.pop("lm_head.weight", None)
    train_to_copy(model, tok, lines, seed)
    _randomise(model, seed)
    model.generation_config = GenerationConfig(num_beams=3, max_length=16, decoder_start_token_id=0, eos_token_id=1,
                                               pad_token_id=0)
    model.save_pretrained(folder)
    extra = {}
    if not gated:
        # The same model as a transformers 4 folder holds it: spiece.model instead of tokenizer.json, and the
        # ids transformers 5's T5Tokenizer gives when it builds its tokenizer from that file.
        spm_folder = os.path.join(out, name + "_spm")
        if os.path.exists(spm_folder):
            shutil.rmtree(spm_folder)
        shutil.copytree(folder, spm_folder)
        os.remove(os.path.join(spm_folder, "tokenizer.json"))
        shutil.copy(os.path.join(out, "_" + name + "_spm", "spiece.model"), spm_folder)
        from_spm = T5Tokenizer.from_pretrained(spm_folder)
        extra["spm_reference"] = [{"text": t, "input_ids": from_spm(t).input_ids,
                                   "decoded": from_spm.decode(from_spm(t).input_ids, skip_special_tokens=True)}
                                  for t in T5_SAMPLES]
    # Eager attention: output_attentions (the T5 stacks keep their own copies of the config, so setting
    # _attn_implementation afterwards would leave the decoder on sdpa, which returns no maps).
    reloaded = T5ForConditionalGeneration.from_pretrained(folder, attn_implementation="eager")
    assert gated != torch.equal(reloaded.lm_head.weight, reloaded.shared.weight), "lm_head tied as intended"
    assert reloaded.config.scale_decoder_outputs == (not gated)
    variants = {"beam": {}, "beam_lp": {"num_beams": 4, "length_penalty": 0.6, "num_return_sequences": 2},
                "beam_never": {"num_beams": 2, "early_stopping": "never", "no_repeat_ngram_size": 2}}
    ref = references(reloaded, tok, T5_SAMPLES, variants)
    extra.update({"position_bias": _position_bias(reloaded),
                  "task_prefixes": {k: v["prefix"] for k, v in cfg.task_specific_params.items()}})
    return ref, extra


def clean(out):
    for name in ("_t5_spm", "_flan_t5_spm"):
        shutil.rmtree(os.path.join(out, name), ignore_errors=True)
