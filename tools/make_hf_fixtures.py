#!/usr/bin/env python3
"""Tiny pretrained translation models made by transformers, and what transformers computes
with them: the fixtures of attnviz's pretrained-model tests (tests/pretrained).

    make_hf_fixtures.py OUT_DIR

Writes, each a Hugging Face model folder as save_pretrained() writes it:
  OUT/marian        MarianMTModel (swish, scale_embedding, shared + tied embeddings,
                    final_logits_bias, language codes >>fra<< >>deu<< in its vocabulary),
                    weights in model.safetensors
  OUT/marian_bin    the same model, weights in pytorch_model.bin (torch.save of its state_dict)
  OUT/m2m100        M2M100ForConditionalGeneration (pre-norm, final LayerNorms, fairseq
                    positions, language codes __en__ ...), SentencePiece BPE
  OUT/m2m100_json   the m2m100 model with its tokenizer as tokenizer.json alone (built here with the
                    `tokenizers` library from its SentencePiece model and vocab.json, ids checked equal to
                    M2M100Tokenizer's on every sample; transformers 5 has no converter for M2M100)
  OUT/nllb          an NLLB model (M2M100ForConditionalGeneration with NllbTokenizer) as transformers 5
                    saves it: tokenizer.json and tokenizer_config.json only (its language codes
                    eng_Latn ... are tokenizer.json's added tokens; no sentencepiece.bpe.model)
  OUT/t5, OUT/flan_t5  T5ForConditionalGeneration: T5 (ReLU, tied embeddings rescaled) and Flan-T5-style
                    (gated-GELU, its own lm_head), T5Tokenizer as tokenizer.json alone (tools/hf_fixtures_t5.py;
                    reference.json's t5_extra / flan_t5_extra: compute_bias curves and task prefixes)
  OUT/t5_spm        the t5 model with spiece.model instead of tokenizer.json (as transformers 4 saved it);
                    reference.json's t5_extra.spm_reference: T5Tokenizer's ids when transformers 5 reads that folder
and OUT/reference.json: per model, per sample sentence, the tokenizer's ids and decoded text,
greedy and beam outputs of generate(), and the logits and every attention map of a
teacher-forced pass (encoder_attentions, decoder_attentions, cross_attentions, eager
attention) over the greedy output; reference.json's training: tokenizer(source, text_target=target)'s
input_ids and labels and the decoder input the model makes of them, for M2M100, NLLB and mBART-50.

The SentencePiece models are trained on tests/data's sentences and a few of this file's
own, so nothing outside the repository is read. A model with transformers' random
initialisation repeats one token until the length limit, which would make equal outputs
prove little; so each model is trained for a few hundred steps to copy its input (seeded,
one thread), and its final_logits_bias randomised: outputs then differ from sentence to
sentence, end at different lengths, and beams disagree.
Exit status 77 when torch, transformers or sentencepiece is missing (the tests then skip).
A second run with the same script and library versions finds OUT/stamp and does nothing.
"""
import hashlib
import json
import os
import shutil
import sys

try:
    import sentencepiece as spm
    import torch
    import transformers
    from transformers import (GenerationConfig, M2M100Config, M2M100ForConditionalGeneration, M2M100Tokenizer,
                              MarianConfig, MarianMTModel, MarianTokenizer)
except ImportError as e:  # pragma: no cover
    print(f"make_hf_fixtures: {e}; skipping", file=sys.stderr)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

EXTRA = [
    "Le chat est sur la table.", "Der Hund läuft schnell über die Straße.", "où est l'arrêt de bus ?",
    "naïve café déjà vu", "Ich bin ein kleiner Frosch.", "Tom a demandé conseil à son professeur.",
    "The quick brown fox jumps over the lazy dog.", "Ελληνικά και русский текст вместе.",
    "I am a small frog.", "She sells sea shells by the sea shore.", "¿Dónde está la biblioteca?",
]

SAMPLES = [
    "Hello, Tom.", "I am a small frog.", "Привет, мир!", "Le chat est sur la table.",
    ">>fra<< Hello world", "naïve café ☃ zzz", "Where is the bus stop?", "a  b", "Ελληνικά",
    "Tom </s> x", "",
]


def corpus_lines():
    lines = []
    for name in ("eng-rus.tsv", "eng-ell.tsv"):
        with open(os.path.join(ROOT, "tests", "data", name), encoding="utf-8") as f:
            for line in f:
                lines.extend(p for p in line.rstrip("\n").split("\t") if p)
    return lines + EXTRA * 3


def train_spm(path_prefix, lines, vocab_size, model_type):
    text = path_prefix + ".txt"
    with open(text, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    spm.SentencePieceTrainer.train(input=text, model_prefix=path_prefix, vocab_size=vocab_size,
                                   character_coverage=1.0, model_type=model_type, minloglevel=2,
                                   normalization_rule_name="nmt_nfkc")
    os.remove(text)
    return path_prefix + ".model"


def train_to_copy(model, tok, lines, seed, steps=300, **lang):
    """A few hundred Adam steps on copying sentences: varied outputs of varied lengths."""
    torch.manual_seed(seed)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        batch = [lines[i] for i in torch.randint(len(lines), (16,), generator=g).tolist()]
        enc = tok(batch, text_target=batch, return_tensors="pt", padding=True, truncation=True, max_length=24, **lang)
        enc["labels"][enc["labels"] == tok.pad_token_id] = -100
        loss = model(**enc).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        bias = getattr(model, "final_logits_bias", None)
        if bias is not None:
            bias.copy_(0.5 * torch.randn(bias.shape, generator=g))
    return float(loss)


def references(model, tok, sentences, gen_variants, src_lang=None, tgt_lang=None):
    model.eval()
    out = []
    for s in sentences:
        if src_lang is not None:
            tok.src_lang = src_lang
        enc = tok(s, return_tensors="pt")
        ids = enc.input_ids
        entry = {"text": s, "input_ids": ids[0].tolist(), "tokens": tok.convert_ids_to_tokens(ids[0].tolist()),
                 "decoded": tok.decode(ids[0], skip_special_tokens=True)}
        extra = {}
        if tgt_lang is not None:
            get_lang_id = getattr(tok, "get_lang_id", None)  # M2M100Tokenizer; NLLB's codes are tokens
            extra["forced_bos_token_id"] = get_lang_id(tgt_lang) if get_lang_id else tok.convert_tokens_to_ids(tgt_lang)
        with torch.no_grad():
            greedy = model.generate(**enc, num_beams=1, **extra)[0]
            entry["greedy"] = greedy[1:].tolist()
            entry["greedy_text"] = tok.decode(greedy, skip_special_tokens=True)
            for name, kw in gen_variants.items():
                seqs = model.generate(**enc, **kw, **extra)
                entry[name] = [q[1:].tolist() for q in seqs]
            # Teacher forced over the greedy output: logits and every map.
            dec_in = greedy.unsqueeze(0)
            fw = model(input_ids=ids, attention_mask=enc.attention_mask, decoder_input_ids=dec_in,
                       output_attentions=True)
            entry["decoder_input_ids"] = dec_in[0].tolist()
            entry["logits"] = fw.logits[0].tolist()
            entry["encoder_attentions"] = [a[0].tolist() for a in fw.encoder_attentions]
            entry["decoder_attentions"] = [a[0].tolist() for a in fw.decoder_attentions]
            entry["cross_attentions"] = [a[0].tolist() for a in fw.cross_attentions]
        out.append(entry)
    return out


def make_marian(out, lines):
    work = os.path.join(out, "_marian_spm")
    os.makedirs(work, exist_ok=True)
    src = train_spm(os.path.join(work, "src"), lines, 220, "unigram")
    tgt = train_spm(os.path.join(work, "tgt"), lines, 200, "unigram")
    pieces = []
    for path in (src, tgt):
        sp = spm.SentencePieceProcessor(model_file=path)
        pieces += [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    vocab = {}
    for p in ["</s>", "<unk>"] + [p for p in pieces if p not in ("<unk>", "<s>", "</s>")] + [">>fra<<", ">>deu<<", "<pad>"]:
        vocab.setdefault(p, len(vocab))
    folder = os.path.join(out, "marian")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    tok = MarianTokenizer(src, tgt, os.path.join(folder, "vocab.json"))
    tok.save_pretrained(folder)
    V = len(vocab)
    cfg = MarianConfig(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                       decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=48, max_position_embeddings=64,
                       activation_function="swish", scale_embedding=True, pad_token_id=tok.pad_token_id,
                       eos_token_id=tok.eos_token_id, decoder_start_token_id=tok.pad_token_id,
                       forced_eos_token_id=tok.eos_token_id)
    torch.manual_seed(3)
    model = MarianMTModel(cfg)
    train_to_copy(model, tok, lines, 3)
    model.generation_config = GenerationConfig(num_beams=4, max_length=16, bad_words_ids=[[tok.pad_token_id]],
                                               decoder_start_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                                               forced_eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    model.save_pretrained(folder)
    # The same weights as torch.save writes a state_dict (what older folders hold as pytorch_model.bin;
    # transformers 5 itself writes safetensors only): tied tensors share one storage.
    binary = os.path.join(out, "marian_bin")
    model.save_pretrained(binary)
    os.remove(os.path.join(binary, "model.safetensors"))
    torch.save(model.state_dict(), os.path.join(binary, "pytorch_model.bin"))
    tok.save_pretrained(binary)
    model.config._attn_implementation = "eager"
    variants = {"beam": {}, "beam_lp": {"num_beams": 3, "length_penalty": 0.6, "num_return_sequences": 2},
                "beam_early": {"num_beams": 5, "early_stopping": True},
                "beam_never": {"num_beams": 2, "early_stopping": "never", "no_repeat_ngram_size": 2}}
    return references(model, tok, SAMPLES, variants)


def make_m2m100(out, lines):
    folder = os.path.join(out, "m2m100")
    os.makedirs(folder, exist_ok=True)
    work = os.path.join(out, "_m2m_spm")
    os.makedirs(work, exist_ok=True)
    model_file = train_spm(os.path.join(work, "bpe"), lines, 260, "bpe")
    sp = spm.SentencePieceProcessor(model_file=model_file)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for i in range(sp.get_piece_size()):
        vocab.setdefault(sp.id_to_piece(i), len(vocab))
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    tok = M2M100Tokenizer(os.path.join(folder, "vocab.json"), model_file, src_lang="en", tgt_lang="fr")
    tok.save_pretrained(folder)
    V = len(vocab) + 100 + 8  # the vocabulary, 100 language codes, M2M100's 8 made-up words
    cfg = M2M100Config(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=3, encoder_attention_heads=4,
                       decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=40, max_position_embeddings=64,
                       activation_function="relu", scale_embedding=True, pad_token_id=1, bos_token_id=0,
                       eos_token_id=2, decoder_start_token_id=2)
    torch.manual_seed(5)
    model = M2M100ForConditionalGeneration(cfg)
    train_to_copy(model, tok, lines, 5)
    model.generation_config = GenerationConfig(num_beams=3, max_length=14, decoder_start_token_id=2, eos_token_id=2,
                                               pad_token_id=1, bos_token_id=0, bad_words_ids=[[1]])
    model.save_pretrained(folder)
    model.config._attn_implementation = "eager"
    variants = {"beam": {}, "beam_lp": {"num_beams": 4, "length_penalty": 2.0, "num_return_sequences": 2}}
    return references(model, tok, [s for s in SAMPLES if ">>" not in s], variants, src_lang="en", tgt_lang="fr")


def make_m2m100_json(out, m2m_reference):
    """The m2m100 folder with tokenizer.json instead of vocab.json + sentencepiece.bpe.model: a BPE over
    vocab.json's ids with the SentencePiece model's merges and rule table, Metaspace, the 100 language
    codes as special added tokens, the template "__en__ A </s>". Its ids must be M2M100Tokenizer's;
    decoding is the tokenizers library's (the language codes dropped as special tokens)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers.convert_slow_tokenizer import SentencePieceExtractor, import_protobuf
    from transformers.models.m2m_100.tokenization_m2m_100 import FAIRSEQ_LANGUAGE_CODES
    src = os.path.join(out, "m2m100")
    spm_file = os.path.join(src, "sentencepiece.bpe.model")
    with open(os.path.join(src, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    merges = SentencePieceExtractor(spm_file).extract(models.BPE)["merges"]
    proto = import_protobuf().ModelProto()
    with open(spm_file, "rb") as f:
        proto.ParseFromString(f.read())
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m) for m in merges], unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Precompiled(proto.normalizer_spec.precompiled_charsmap),
                                           normalizers.Replace(Regex(" {2,}"), " "), normalizers.Strip()])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ("<s>", "<pad>", "</s>", "<unk>")])
    langs = FAIRSEQ_LANGUAGE_CODES["m2m100"]
    tok.add_special_tokens([AddedToken(f"__{code}__", special=True, normalized=False) for code in langs])
    for i in range(8):
        tok.add_tokens([AddedToken(f"madeupword{i}", special=False, normalized=False)])
    en = tok.token_to_id("__en__")
    assert en == len(vocab) + langs.index("en"), "the language codes must follow the vocabulary"
    tok.post_processor = processors.TemplateProcessing(single="__en__ $A </s>", pair="__en__ $A $B </s>",
                                                       special_tokens=[("__en__", en), ("</s>", 2)])
    folder = os.path.join(out, "m2m100_json")
    if os.path.exists(folder):
        shutil.rmtree(folder)
    shutil.copytree(src, folder)
    os.remove(os.path.join(folder, "vocab.json"))
    os.remove(os.path.join(folder, "sentencepiece.bpe.model"))
    tok.save(os.path.join(folder, "tokenizer.json"))
    reference = []
    for e in m2m_reference:
        ids = tok.encode(e["text"]).ids
        assert ids == e["input_ids"], f"tokenizer.json gives {ids} for {e['text']!r}, M2M100Tokenizer {e['input_ids']}"
        entry = dict(e)
        entry["decoded"] = tok.decode(ids, skip_special_tokens=True)
        entry["greedy_text"] = tok.decode(e["greedy"], skip_special_tokens=True)
        reference.append(entry)
    return reference


def make_nllb(out, lines):
    """NLLB as transformers 5 saves it: the tokenizer built from a SentencePiece BPE model trained
    here, saved as tokenizer.json (its language codes among the added tokens), reopened from the saved
    folder as a user would."""
    from transformers import NllbTokenizer
    from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES
    work = os.path.join(out, "_nllb_spm")
    os.makedirs(work, exist_ok=True)
    model_file = train_spm(os.path.join(work, "bpe"), lines, 260, "bpe")
    shutil.copy(model_file, os.path.join(work, "sentencepiece.bpe.model"))
    built = NllbTokenizer.from_pretrained(work, additional_special_tokens=FAIRSEQ_LANGUAGE_CODES, src_lang="eng_Latn",
                                          tgt_lang="fra_Latn")
    folder = os.path.join(out, "nllb")
    os.makedirs(folder, exist_ok=True)
    built.save_pretrained(folder)
    for name in os.listdir(folder):  # transformers 5 writes tokenizer.json and tokenizer_config.json
        if name not in ("tokenizer.json", "tokenizer_config.json"):
            os.remove(os.path.join(folder, name))
    tok = NllbTokenizer.from_pretrained(folder)
    assert tok.convert_tokens_to_ids("fra_Latn") != tok.unk_token_id, "the saved NLLB tokenizer lost its language codes"
    V = len(tok)
    cfg = M2M100Config(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                       decoder_attention_heads=4, encoder_ffn_dim=48, decoder_ffn_dim=64, max_position_embeddings=64,
                       activation_function="relu", scale_embedding=True, pad_token_id=tok.pad_token_id,
                       bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                       decoder_start_token_id=tok.eos_token_id)
    torch.manual_seed(7)
    model = M2M100ForConditionalGeneration(cfg)
    train_to_copy(model, tok, lines, 7)
    model.generation_config = GenerationConfig(num_beams=2, max_length=14, decoder_start_token_id=tok.eos_token_id,
                                               eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                                               bos_token_id=tok.bos_token_id, bad_words_ids=[[tok.pad_token_id]])
    model.save_pretrained(folder)
    model.config._attn_implementation = "eager"
    variants = {"beam": {}, "beam_lp": {"num_beams": 3, "length_penalty": 1.5, "num_return_sequences": 2}}
    samples = [s for s in SAMPLES if ">>" not in s] + ["fra_Latn Bonjour", "日本語 ☃ zzz"]
    return references(model, tok, samples, variants, src_lang="eng_Latn", tgt_lang="fra_Latn")


def randomise_norms(model, seed, scale=0.1):
    """Every LayerNorm's weight and bias moved off 1 and 0 (so a norm read wrongly, or not at all, shows)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name or "layernorm" in name:
                p.add_(scale * torch.randn(p.shape, generator=g))


def make_bart(out, lines):
    """BART (bart-large-cnn's layout: post-norm, learned positions offset by 2, layernorm_embedding, GELU,
    final_logits_bias; </s> starts the decoder, <s> forced first) with a byte-level BPE tokenizer trained
    here by `tokenizers` and saved by transformers 5 as BartTokenizer saves it: tokenizer.json (and
    tokenizer_config.json) only; OUT/bart_files the same with vocab.json and merges.txt instead."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import BartConfig, BartForConditionalGeneration, BartTokenizer
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=520, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(lines, trainer)
    state = json.loads(bpe.to_str())
    vocab = dict(state["model"]["vocab"])
    vocab["<mask>"] = len(vocab)
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in state["model"]["merges"]]
    built = BartTokenizer(vocab=vocab, merges=merges)
    folder = os.path.join(out, "bart")
    os.makedirs(folder, exist_ok=True)
    built.save_pretrained(folder)
    for name in os.listdir(folder):
        if name not in ("tokenizer.json", "tokenizer_config.json"):
            os.remove(os.path.join(folder, name))
    tok = BartTokenizer.from_pretrained(folder)
    V = len(tok)
    cfg = BartConfig(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                     decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=48, max_position_embeddings=64,
                     activation_function="gelu", scale_embedding=False, pad_token_id=tok.pad_token_id,
                     bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, decoder_start_token_id=tok.eos_token_id,
                     forced_bos_token_id=tok.bos_token_id, forced_eos_token_id=tok.eos_token_id)
    torch.manual_seed(11)
    model = BartForConditionalGeneration(cfg)
    train_to_copy(model, tok, lines, 11)
    randomise_norms(model, 11)
    model.generation_config = GenerationConfig(num_beams=4, max_length=18, min_length=3, no_repeat_ngram_size=3,
                                               length_penalty=2.0, early_stopping=True,
                                               decoder_start_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id,
                                               pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                                               forced_bos_token_id=tok.bos_token_id, forced_eos_token_id=tok.eos_token_id)
    model.save_pretrained(folder)
    # The same model with the tokenizer as older folders hold it: vocab.json and merges.txt, no tokenizer.json.
    files = os.path.join(out, "bart_files")
    if os.path.exists(files):
        shutil.rmtree(files)
    shutil.copytree(folder, files)
    os.remove(os.path.join(files, "tokenizer.json"))
    tok.backend_tokenizer.model.save(files)
    model.config._attn_implementation = "eager"
    variants = {"beam": {}, "beam_lp": {"num_beams": 3, "length_penalty": 0.6, "num_return_sequences": 2},
                "beam_never": {"num_beams": 2, "early_stopping": "never", "no_repeat_ngram_size": 2}}
    samples = [s for s in SAMPLES if ">>" not in s] + ["日本語 ☃ zzz", "  leading and  double spaces", "Tom <mask> x"]
    return references(model, tok, samples, variants)


def make_mbart50(out, lines):
    """mBART-50 (pre-norm, final LayerNorms, learned positions, layernorm_embedding, scale_embedding) with
    MBart50Tokenizer built from a SentencePiece model trained here (fairseq ids, the 52 language codes
    en_XX ... after the pieces, <mask> last) and saved by transformers 5: tokenizer.json and
    tokenizer_config.json only, reopened from the saved folder; OUT/mbart50_spm the same with
    sentencepiece.bpe.model instead of tokenizer.json."""
    from transformers import MBart50Tokenizer, MBartConfig, MBartForConditionalGeneration
    work = os.path.join(out, "_mbart50_spm")
    os.makedirs(work, exist_ok=True)
    model_file = train_spm(os.path.join(work, "spm"), lines, 280, "unigram")
    shutil.copy(model_file, os.path.join(work, "sentencepiece.bpe.model"))
    built = MBart50Tokenizer.from_pretrained(work, src_lang="en_XX", tgt_lang="fr_XX")
    folder = os.path.join(out, "mbart50")
    os.makedirs(folder, exist_ok=True)
    built.save_pretrained(folder)
    for name in os.listdir(folder):
        if name not in ("tokenizer.json", "tokenizer_config.json"):
            os.remove(os.path.join(folder, name))
    tok = MBart50Tokenizer.from_pretrained(folder, src_lang="en_XX", tgt_lang="fr_XX")
    assert tok.convert_tokens_to_ids("fr_XX") != tok.unk_token_id, "the saved mBART-50 tokenizer lost its language codes"
    V = len(tok)
    cfg = MBartConfig(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=3, encoder_attention_heads=4,
                      decoder_attention_heads=4, encoder_ffn_dim=48, decoder_ffn_dim=64, max_position_embeddings=64,
                      activation_function="gelu", scale_embedding=True, pad_token_id=tok.pad_token_id,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      decoder_start_token_id=tok.eos_token_id, forced_eos_token_id=tok.eos_token_id)
    torch.manual_seed(13)
    model = MBartForConditionalGeneration(cfg)
    train_to_copy(model, tok, lines, 13)
    randomise_norms(model, 13)
    model.generation_config = GenerationConfig(num_beams=3, max_length=14, decoder_start_token_id=tok.eos_token_id,
                                               eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                                               bos_token_id=tok.bos_token_id, forced_eos_token_id=tok.eos_token_id)
    model.save_pretrained(folder)
    # The same model as older folders hold it: sentencepiece.bpe.model (fairseq's ids) instead of tokenizer.json.
    spm_folder = os.path.join(out, "mbart50_spm")
    if os.path.exists(spm_folder):
        shutil.rmtree(spm_folder)
    shutil.copytree(folder, spm_folder)
    os.remove(os.path.join(spm_folder, "tokenizer.json"))
    shutil.copy(model_file, os.path.join(spm_folder, "sentencepiece.bpe.model"))
    model.config._attn_implementation = "eager"
    variants = {"beam": {}, "beam_lp": {"num_beams": 4, "length_penalty": 1.5, "num_return_sequences": 2}}
    samples = [s for s in SAMPLES if ">>" not in s] + ["fr_XX Bonjour", "日本語 ☃ zzz"]
    return references(model, tok, samples, variants, src_lang="en_XX", tgt_lang="fr_XX")


TRAINING_PAIRS = [("Hello, Tom.", "Bonjour, Tom."), ("I am a small frog.", "Je suis une petite grenouille."),
                  ("Where is the bus stop?", "Où est l'arrêt de bus ?")]


def training_references(out):
    """What a multilingual model is fine-tuned on, as transformers gives it: per model, per pair,
    tokenizer(source, text_target=target)'s input_ids and labels, the model's loss on them, and the
    decoder's input the model makes of the labels (its shift_tokens_right: decoder_start_token_id first for M2M100 / NLLB; for
    mBART the labels' last token, </s>, wrapped to the front)."""
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoTokenizer
    from transformers.models.m2m_100.modeling_m2m_100 import shift_tokens_right as m2m_shift
    from transformers.models.mbart.modeling_mbart import shift_tokens_right as mbart_shift
    ref = {}
    for name, src, tgt in (("m2m100", "en", "fr"), ("nllb", "eng_Latn", "fra_Latn"), ("mbart50", "en_XX", "fr_XX")):
        folder = os.path.join(out, name)
        tok = AutoTokenizer.from_pretrained(folder, src_lang=src, tgt_lang=tgt)
        cfg = AutoConfig.from_pretrained(folder)
        model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
        entries = []
        for source, target in TRAINING_PAIRS:
            enc = tok(source, text_target=target)
            labels = torch.tensor([enc["labels"]])
            dec_in = (mbart_shift(labels, cfg.pad_token_id) if cfg.model_type == "mbart"
                      else m2m_shift(labels, cfg.pad_token_id, cfg.decoder_start_token_id))
            with torch.no_grad():  # the mean token loss of the labels, as fine-tuning computes it
                loss = model(input_ids=torch.tensor([enc["input_ids"]]), labels=labels).loss.item()
            entries.append({"source": source, "target": target, "src_lang": src, "tgt_lang": tgt,
                            "input_ids": enc["input_ids"], "labels": enc["labels"],
                            "decoder_input_ids": dec_in[0].tolist(), "loss": loss})
        ref[name] = entries
    return ref


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    digest = hashlib.sha256()
    for path in (os.path.abspath(__file__), os.path.join(HERE, "hf_fixtures_t5.py")):  # the T5 family's module too
        with open(path, "rb") as f:
            digest.update(f.read())
    stamp = digest.hexdigest() + " " + transformers.__version__ + " " + torch.__version__
    stamp_file = os.path.join(out, "stamp")
    if os.path.exists(stamp_file) and os.path.exists(os.path.join(out, "reference.json")):
        with open(stamp_file) as f:
            if f.read() == stamp:
                return 0
    torch.set_num_threads(1)
    lines = corpus_lines()
    ref = {"transformers": transformers.__version__, "torch": torch.__version__,
           "marian": make_marian(out, lines), "m2m100": make_m2m100(out, lines), "nllb": make_nllb(out, lines)}
    ref["m2m100_json"] = make_m2m100_json(out, ref["m2m100"])
    import hf_fixtures_t5  # tools/hf_fixtures_t5.py: T5 (relu, tied) and Flan-T5-style (gated-gelu, own lm_head)
    for name, gated, seed in (("t5", False, 21), ("flan_t5", True, 23)):
        ref[name], ref[name + "_extra"] = hf_fixtures_t5.make_t5(out, lines, train_to_copy, references, name=name,
                                                                 gated=gated, seed=seed)
    hf_fixtures_t5.clean(out)
    ref["bart"] = make_bart(out, lines)
    ref["mbart50"] = make_mbart50(out, lines)
    ref["training"] = training_references(out)
    with open(os.path.join(out, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(ref, f, ensure_ascii=False)
    with open(stamp_file, "w") as f:
        f.write(stamp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
