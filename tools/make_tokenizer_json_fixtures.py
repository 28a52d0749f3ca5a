#!/usr/bin/env python3
"""tokenizer.json files of every kind attnviz reads, and what the `tokenizers` library computes
with them: the fixtures of tests/base/test_tokenizer_json.cpp (attnviz's reader must give the same
ids, tokens and decoded text).

    make_tokenizer_json_fixtures.py OUT_DIR [--sentences N] [--bench-corpus TSV]

Everything is built offline, from the repository's own text:
  - tokenizers trained with the library's trainers: a Unigram with SentencePiece's normalizer
    (Precompiled) and Metaspace as T5/mT5; a byte-level BPE with RobertaProcessing as BART/RoBERTa;
    a Metaspace BPE with byte fallback as NLLB / Llama in transformers 5 (and a Llama-2 style one:
    Prepend + Replace normalizers, ByteFallback + Fuse + Strip decoders); a WordLevel with Whitespace
    and BertProcessing; a BPE with "##" continuing pieces and the Split / Digits / Punctuation /
    Replace / Strip / Lowercase / NFKC normalizers and pre-tokenizers, TemplateProcessing and the
    WordPiece decoder; a Unigram with byte fallback; a BPE whose merges are "a b" strings; GPT-2's
    pattern as a Split before a ByteLevel without its own regex (Llama 3 / Qwen style).
  - tokenizers saved by transformers 5 (save_pretrained, tokenizer.json only) where transformers
    builds them from a SentencePiece model trained here with the `sentencepiece` package, or from
    vocab.json + merges.txt: T5, mT5, NLLB (with language codes), mBART-50, XLM-RoBERTa, Llama,
    BART, GPT-2.
Writes OUT/NAME.json for each and OUT/expected.json:
  {"tokenizers": version, "transformers": version,
   "fixtures": [{"name", "file", "cases": [{"text", "ids", "tokens", "plain_ids", "plain_tokens",
                                            "decoded", "decoded_all", "hf_decoded"?}]}]}
ids/tokens: encode(text) (add_special_tokens=True); plain_*: add_special_tokens=False;
decoded: decode(ids, skip_special_tokens=True); decoded_all: skip_special_tokens=False;
hf_decoded: transformers' tokenizer.decode(ids, skip_special_tokens=True) (transformers' folders).
With --sentences N, OUT/bench_sentences.txt holds N sentences for tools/bench_tokenizer_json.py; with
--bench-corpus TSV (e.g. ../shared/data/tatoeba-eng-fra-5000.tsv) the sentences are that file's and
OUT/bench_*.json are transformers' tokenizers with vocabularies 30 times larger trained on it.
Exit status 77 when tokenizers, transformers or sentencepiece is missing (the tests then skip).
"""
import hashlib
import json
import os
import shutil
import sys
import tempfile

try:
    import sentencepiece as spm
    import tokenizers
    import transformers
    from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors,
                            trainers)
except ImportError as e:  # pragma: no cover
    print(f"make_tokenizer_json_fixtures: {e}; skipping", file=sys.stderr)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

EXTRA = [
    "Le chat est sur la table.", "Der Hund läuft schnell über die Straße.", "où est l'arrêt de bus ?",
    "naïve café déjà vu", "Ich bin ein kleiner Frosch.", "Tom a demandé conseil à son professeur.",
    "The quick brown fox jumps over the lazy dog.", "Ελληνικά και русский текст вместе.",
    "I'm sure you'll see they've done it, haven't they?", "She sells sea shells by the sea shore.",
    "¿Dónde está la biblioteca?", "日本語の文章です。", "中文句子很好。", "שלום עולם", "مرحبا بالعالم",
    "In 2024, 3.14159 was 42% of 1,000,000.", "HELLO World MiXeD CaSe", "e-mail: tom@example.com",
    "Ｆｕｌｌ ｗｉｄｔｈ ①②③", "Zürich, Genève, Łódź, İstanbul", "ΟΔΟΣ οδός", "tab\tseparated\ttext",
]

# The multilingual sample: byte fallback (characters no piece has), unknown pieces, emoji, combining
# marks, CJK, right-to-left text, runs of whitespace, added tokens, language codes.
SAMPLES = [
    "Hello, Tom.", "I am a small frog.", "Привет, мир!", "Le chat est sur la table.", "naïve café ☃ zzz",
    "Where is the bus stop?", "a  b", "a   b    c", "  leading and trailing  ", "tabs\tand\nnewlines\r\n",
    "Ελληνικά", "", " ", "Tom </s> x", "</s>", "<s> hello </s>", "x<mask>y", "hello <mask> world",
    "fra_Latn Bonjour", "eng_Latn Hello fra_Latn", "__en__ hi", "日本語の文章です。", "我爱你，世界！",
    "한국어 문장", "שלום עולם!", "مرحبا بالعالم", "e\u0301te\u0301 (combining accents)", "Ａｂｃ ① ｶ ㍻",
    "emoji 👍🏽 👨‍👩‍👧 🇫🇷 ok", "smile 😀😀", "I'm sure you'll see they've done it.", "3.14159 and 42% of 1,000,000",
    "HELLO World MiXeD", "ΟΔΟΣ", "İstanbul", "zero\u200bwidth\u200djoiner", "nbsp\u00a0here", "ideographic\u3000space",
    "vertical\x0btab", "next\x85line", "line\u2028sep", "ẞ straße", "ﬁ ligature", "a_b-c.d/e", "''quoted''",
    "don't can't won't", "<unk>", "▁already▁marked", "  ", "\t", "x" * 40, "z̀͂ zalgo", "Ǆemal",
]


# And seeded random texts from pieces that stress the pipeline (spaces of every kind, marks alone,
# added tokens glued to words, controls, emoji sequences, the Metaspace mark itself).
RANDOM_POOL = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789") + [
    " ", " ", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2581", ".", ",", "'", "'s", "-", "_", "!", "?", "¿",
    "…", "—", "\u0301", "\u0308", "é", "ß", "İ", "Σ", "ς", "日", "本", "語", "한", "ש", "ل", "م", "😀", "👍🏽", "👨‍👩‍👧", "🇫🇷",
    "\u200b", "\u200d", "\x0b", "\x85", "\u2028", "Ａ", "①", "ﬁ", "㍻", "<s>", "</s>", "<mask>", "<unk>", "[CLS]",
    "eng_Latn", "fra_Latn", "<|im_start|>", " world", "hello", "cat", "Hey", "x", "\x00", "\x7f", "\ufffd", "z\u0300\u0301"]


def random_samples(n=150, seed=47):
    import random
    rng = random.Random(seed)
    return ["".join(rng.choice(RANDOM_POOL) for _ in range(rng.randint(0, 14))) for _ in range(n)]


def corpus_lines():
    lines = []
    for name in ("eng-rus.tsv", "eng-ell.tsv"):
        with open(os.path.join(ROOT, "tests", "data", name), encoding="utf-8") as f:
            for line in f:
                lines.extend(p for p in line.rstrip("\n").split("\t") if p)
    return lines + EXTRA * 3


def expected_cases(tok, hf=None, texts=None):
    cases = []
    for text in (SAMPLES + random_samples() if texts is None else texts):
        enc = tok.encode(text)
        plain = tok.encode(text, add_special_tokens=False)
        case = {"text": text, "ids": enc.ids, "tokens": enc.tokens, "plain_ids": plain.ids, "plain_tokens": plain.tokens,
                "decoded": tok.decode(enc.ids, skip_special_tokens=True),
                "decoded_all": tok.decode(enc.ids, skip_special_tokens=False)}
        if hf is not None:
            case["hf_ids"] = hf(text).input_ids
            case["hf_decoded"] = hf.decode(enc.ids, skip_special_tokens=True)
        cases.append(case)
    return cases


def byte_tokens():
    return [f"<0x{b:02X}>" for b in range(256)]


# ---- tokenizers trained here -------------------------------------------------------------------

def charsmap(work, lines):
    """SentencePiece's nmt_nfkc rule table, as transformers' converter puts it into tokenizer.json."""
    model = train_spm(os.path.join(work, "charsmap"), lines, 300, "unigram")
    from transformers.convert_slow_tokenizer import import_protobuf
    pb = import_protobuf()
    m = pb.ModelProto()
    with open(model, "rb") as f:
        m.ParseFromString(f.read())
    return m.normalizer_spec.precompiled_charsmap


def unigram_t5(lines, work):
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.Precompiled(charsmap(work, lines)),
                                           normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.UnigramTrainer(vocab_size=300, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>",
                                      show_progress=False)
    tok.train_from_iterator(lines, trainer)
    tok.add_special_tokens(["<extra_id_0>", "<extra_id_1>"])
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>",
                                                       special_tokens=[("</s>", tok.token_to_id("</s>"))])
    return tok


def unigram_byte_fallback(lines, work):
    base = unigram_t5(lines, work)
    model = json.loads(base.to_str())["model"]
    vocab = [tuple(v) for v in model["vocab"]]
    have = {p for p, _ in vocab}
    vocab += [(b, -20.0) for b in byte_tokens() if b not in have]
    tok = Tokenizer(models.Unigram(vocab, unk_id=model["unk_id"], byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Strip(left=True, right=True)])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(replacement="▁", prepend_scheme="first")])
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True), "</s>"])
    return tok


def unigram_split_first(lines, work):
    """Metaspace with prepend_scheme "first" after a WhitespaceSplit: only a piece at the text's first
    byte gets the "▁" (a text with leading spaces: none)."""
    tok = unigram_t5(lines, work)
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")])
    return tok


def bpe_bytelevel(lines, work, vocab_size=500):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(lines, trainer)
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=False, special=True)])
    tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")),
                                                      trim_offsets=True, add_prefix_space=False)
    return tok


def bpe_metaspace_fallback(lines, work, llama2=False):
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    if llama2:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(content=" ", left=1, right=0)])
    else:
        tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Replace(Regex(" {2,}"), " ")])
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
        tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(replacement="▁", prepend_scheme="always")])
    specials = ["<unk>", "<s>", "</s>"] + byte_tokens()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=specials, show_progress=False,
                                  limit_alphabet=120)
    tok.train_from_iterator(lines, trainer)
    langs = ["eng_Latn", "fra_Latn", "rus_Cyrl"]
    tok.add_special_tokens(langs + [AddedToken("<mask>", lstrip=True, special=True, normalized=True)])
    bos = tok.token_to_id("<s>")
    eos = tok.token_to_id("</s>")
    if llama2:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                           special_tokens=[("<s>", bos)])
    else:
        tok.post_processor = processors.TemplateProcessing(single="eng_Latn $A </s>", pair="eng_Latn $A $B </s>",
                                                           special_tokens=[("eng_Latn", tok.token_to_id("eng_Latn")),
                                                                           ("</s>", eos)])
    return tok


def wordlevel(lines, work):
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(vocab_size=400, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                        show_progress=False)
    tok.train_from_iterator(lines, trainer)
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")), ("[CLS]", tok.token_to_id("[CLS]")))
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    return tok


def wordlevel_split(lines, work):
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.BertPreTokenizer(),
                                                 pre_tokenizers.CharDelimiterSplit("-")])
    trainer = trainers.WordLevelTrainer(vocab_size=400, special_tokens=["[UNK]", "[CLS]", "[SEP]"], show_progress=False)
    tok.train_from_iterator(lines, trainer)
    tok.post_processor = processors.Sequence([processors.ByteLevel(trim_offsets=False),
                                              processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                                        ("[CLS]", tok.token_to_id("[CLS]")))])
    return tok


def bpe_misc(lines, work):
    tok = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##", fuse_unk=False))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(r"\s+"), " "),
                                           normalizers.Strip(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"[\p{P}]"), behavior="isolated"),
        pre_tokenizers.Split(" ", behavior="removed"),
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.Punctuation(behavior="contiguous"),
        pre_tokenizers.Split(Regex(r"[aeiou]+"), behavior="merged_with_previous"),
        pre_tokenizers.Split(Regex(r"x"), behavior="merged_with_next", invert=True),
    ])
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["[UNK]", "[CLS]", "[SEP]"],
                                  continuing_subword_prefix="##", show_progress=False, limit_alphabet=150)
    tok.train_from_iterator(lines, trainer)
    tok.add_tokens([AddedToken("hello", single_word=True), AddedToken("cat", normalized=True)])
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP] [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", tok.token_to_id("[CLS]")),
                                                                       ("[SEP]", tok.token_to_id("[SEP]"))])
    tok.decoder = decoders.Sequence([decoders.WordPiece(prefix="##", cleanup=False), decoders.Replace("e", "E"),
                                     decoders.Strip(content="E", left=2, right=0)])
    return tok


def bpe_words_suffix(lines, work):
    tok = Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix="</w>", fuse_unk=True))
    tok.normalizer = normalizers.NFKD()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(), pre_tokenizers.Digits(individual_digits=False)])
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>"], end_of_word_suffix="</w>",
                                  show_progress=False, limit_alphabet=100)
    tok.train_from_iterator(lines, trainer)
    tok.decoder = decoders.BPEDecoder(suffix="</w>")
    return tok


def gpt2_split(lines, work):
    gpt2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(gpt2), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(lines, trainer)
    tok.add_special_tokens([AddedToken("<|im_start|>", special=True), AddedToken("<|im_end|>", special=True)])
    tok.add_tokens([AddedToken(" world", normalized=False)])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def legacy_merges(tok):
    """The same tokenizer with its merges written as "a b" strings (files of tokenizers < 0.20)."""
    j = json.loads(tok.to_str())
    j["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in j["model"]["merges"]]
    j["model"]["merges"] = [m for m in j["model"]["merges"] if m.count(" ") == 1]
    return Tokenizer.from_str(json.dumps(j))


# ---- the library's edge cases, as raw files (where attnviz's reading once differed) -------------

def raw(model, added=(), normalizer=None, pre=None, post=None, decoder=None):
    """The file as written here (the library would save its own reading of it: ids and all)."""
    j = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": list(added), "normalizer": normalizer,
         "pre_tokenizer": pre, "post_processor": post, "decoder": decoder, "model": model}
    return json.dumps(j, ensure_ascii=False)


def added(id, content, special=False, normalized=None, lstrip=False, rstrip=False, single_word=False):
    return {"id": id, "content": content, "single_word": single_word, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": (not special) if normalized is None else normalized, "special": special}


def word_level(tokens, unk="[UNK]"):
    return {"type": "WordLevel", "vocab": {t: i for i, t in enumerate(tokens)}, "unk_token": unk}


def byte_bpe(normalizer=None, pre=(), added_tokens=(), decoders_after=()):
    """A BPE of the 256 byte-level characters and no merges: its tokens are the normalized text's bytes."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
             "vocab": {c: i for i, c in enumerate(alphabet)}, "merges": []}
    steps = list(pre) + [{"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]
    decoder = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    if decoders_after:
        decoder = {"type": "Sequence", "decoders": [decoder] + list(decoders_after)}
    return raw(model, added_tokens, normalizer=normalizer, pre={"type": "Sequence", "pretokenizers": steps}, decoder=decoder)


def regex(pattern):
    return {"Regex": pattern}


EDGE_TEXTS = ["का क्षमा ক্ষমা a\u20dd é ü", "a\u0378b \U0001fae8 d\nt d\rt", "  lead\nmid  \ntrail  ", "c\rd c\u2028d c\x85d c\nd",
              "a\tb c 0x1F", "axxb xx", "<a> \nb", "<a>\n\nb", "<a> world", "x<a>  \n  y", "<s> a <t>", "a <x> c", "<t>  b",
              "b<t>c", "a <y> <x> b", "<0x+A> <0x41>", "ab c", "xab"]


def edge_fixtures():
    """(name, tokenizer, texts or None for the whole sample): the library's behaviour where a reading
    of its format goes wrong easily."""
    alphabet_texts = SAMPLES + random_samples(60, seed=48) + EDGE_TEXTS
    out = [
        # Every combining mark (Mn, Mc, Me) for StripAccents; BertNormalizer's strip_accents takes Mn
        # alone and its clean_text keeps unassigned code points.
        ("edge_strip_accents", byte_bpe(normalizer={"type": "Sequence", "normalizers": [
            {"type": "NFD"}, {"type": "StripAccents"}]}), alphabet_texts),
        ("edge_bert_normalizer", byte_bpe(normalizer={"type": "BertNormalizer", "clean_text": True,
                                                      "handle_chinese_chars": True, "strip_accents": True,
                                                      "lowercase": True}), alphabet_texts),
        # Oniguruma's Ruby syntax: ^ and $ at every line, a dot that is anything but \n, \h a hex digit,
        # (?m) a dot that takes \n; no empty match where the last one ended; an empty literal matches
        # at every boundary.
        ("edge_regex_dialect", byte_bpe(normalizer={"type": "Sequence", "normalizers": [
            {"type": "Replace", "pattern": regex("^ +"), "content": "<"},
            {"type": "Replace", "pattern": regex(" +$"), "content": ">"},
            {"type": "Replace", "pattern": regex("c.d"), "content": "!"},
            {"type": "Replace", "pattern": regex("(?m)d.t"), "content": "?"},
            {"type": "Replace", "pattern": regex("\\h\\h"), "content": "#"},
            {"type": "Replace", "pattern": regex("[\\H\\s]e"), "content": "%"}]},
            pre=[{"type": "Split", "pattern": regex("x*"), "behavior": "Isolated", "invert": False}],
            decoders_after=[{"type": "Replace", "pattern": regex("x*"), "content": "_"},
                            {"type": "Replace", "pattern": regex("^_"), "content": "^"}]), alphabet_texts),
        # (Not in a Replace normalizer: there the library's text and its alignments disagree, its first
        # insertion doubled, or it panics for a pattern like x*.)
        ("edge_empty_patterns", byte_bpe(pre=[{"type": "Split", "pattern": {"String": ""}, "behavior": "Isolated",
                                               "invert": False}],
                                         decoders_after=[{"type": "Replace", "pattern": {"String": ""}, "content": "|"}]),
         alphabet_texts),
        # A token that rstrip's whitespace took part of still matches (the two overlap).
        ("edge_rstrip_overlap", byte_bpe(added_tokens=[added(256, "<a>", special=True, rstrip=True),
                                                       added(257, "\n", special=True),
                                                       added(258, " world", normalized=False)]), alphabet_texts),
        # Ids as the library gives them, not as the file says: out of order, a gap, a content the
        # model has, a content given again with other properties, one given again as it was, and a
        # vocabulary with a hole (its entry count, not its largest id, comes next).
        ("edge_added_ids", raw({"type": "WordLevel", "vocab": {"[UNK]": 0, "a": 1, "b": 2, "c": 4}, "unk_token": "[UNK]"},
                               [added(9, "<t>", special=True), added(2, "<s>", special=True), added(3, "a", special=True),
                                added(17, "<x>"), added(5, "<t>", rstrip=True), added(6, "<x>"), added(40, "<y>", special=True)],
                               pre={"type": "WhitespaceSplit"}), None),
        ("edge_added_ids_dense", raw(word_level(["[UNK]", "a", "b", "c"]),
                                     [added(7, "<t>", special=True), added(4, "<s>", special=True), added(20, "<x>")],
                                     pre={"type": "WhitespaceSplit"}), None),
        # Decoders: BPEDecoder's empty suffix (Rust's replace of "" puts a space at every boundary),
        # ByteFallback's "<0x+A>" (from_str_radix takes a sign).
        ("edge_decoders", raw(word_level(["[UNK]", "ab", "c", "<0x+A>", "<0x41>", "é"]), pre={"type": "WhitespaceSplit"},
                              decoder={"type": "Sequence", "decoders": [{"type": "ByteFallback"},
                                                                          {"type": "BPEDecoder", "suffix": ""}]}), None),
        # A Unigram without an unknown token: an error only where the path needs one.
        ("edge_unigram_no_unk", raw({"type": "Unigram", "unk_id": None, "byte_fallback": False,
                                     "vocab": [["x", -1.0], ["xa", -1.0], ["ab", -1.0], ["b", -1.0], ["a", -5.0]]}),
         ["xab", "ab", "xa", "b", "xaab", "bab", ""]),
    ]
    return out


# ---- tokenizers transformers 5 builds and saves --------------------------------------------------

def train_spm(prefix, lines, vocab_size, model_type, **kw):
    text = prefix + ".txt"
    with open(text, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    spm.SentencePieceTrainer.train(input=text, model_prefix=prefix, vocab_size=vocab_size, character_coverage=0.98,
                                   model_type=model_type, minloglevel=2, normalization_rule_name="nmt_nfkc",
                                   hard_vocab_limit=False, **kw)
    os.remove(text)
    return prefix + ".model"


def saved(tok_class, folder, out, **kwargs):
    hf = tok_class.from_pretrained(folder, **kwargs)
    save = os.path.join(folder, "saved")
    hf.save_pretrained(save)
    tok = Tokenizer.from_file(os.path.join(save, "tokenizer.json"))
    shutil.copy(os.path.join(save, "tokenizer.json"), out)
    return tok, hf


def transformers_fixtures(lines, work, out, prefix="hf_", scale=1):
    """transformers' tokenizers, as FILE OUT/PREFIXNAME.json; scale multiplies the vocabulary sizes."""
    made = {}
    work = os.path.join(work, prefix)
    os.makedirs(work, exist_ok=True)

    def spm_folder(name, file_name, model_type, vocab_size, **kw):
        folder = os.path.join(work, name)
        os.makedirs(folder, exist_ok=True)
        model = train_spm(os.path.join(work, name + "_spm"), lines, vocab_size * scale, model_type, **kw)
        shutil.copy(model, os.path.join(folder, file_name))
        return folder

    from transformers import (BartTokenizer, GPT2Tokenizer, LlamaTokenizer, MBart50Tokenizer,
                              NllbTokenizer, T5Tokenizer, XLMRobertaTokenizer)
    from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES

    made[prefix + "t5"] = saved(T5Tokenizer, spm_folder("t5", "spiece.model", "unigram", 250, pad_id=0, eos_id=1, unk_id=2,
                                                  bos_id=-1), os.path.join(out, prefix + "t5.json"), extra_ids=5)
    made[prefix + "mt5"] = saved(T5Tokenizer, spm_folder("mt5", "spiece.model", "unigram", 600, pad_id=0, eos_id=1,
                                                    unk_id=2, bos_id=-1, byte_fallback=True),
                           os.path.join(out, prefix + "mt5.json"), extra_ids=3)
    made[prefix + "nllb"] = saved(NllbTokenizer, spm_folder("nllb", "sentencepiece.bpe.model", "bpe", 300),
                            os.path.join(out, prefix + "nllb.json"), additional_special_tokens=FAIRSEQ_LANGUAGE_CODES,
                            src_lang="fra_Latn")
    made[prefix + "mbart50"] = saved(MBart50Tokenizer, spm_folder("mbart50", "sentencepiece.bpe.model", "unigram", 280),
                               os.path.join(out, prefix + "mbart50.json"), src_lang="en_XX", tgt_lang="fr_XX")
    made[prefix + "xlmr"] = saved(XLMRobertaTokenizer, spm_folder("xlmr", "sentencepiece.bpe.model", "unigram", 270),
                            os.path.join(out, prefix + "xlmr.json"))
    made[prefix + "llama"] = saved(LlamaTokenizer, spm_folder("llama", "tokenizer.model", "bpe", 700, byte_fallback=True,
                                                        split_digits=True), os.path.join(out, prefix + "llama.json"))
    # BART / GPT-2: vocab.json + merges.txt of a byte-level BPE trained here.
    bl = bpe_bytelevel(lines, work, 500 * scale)
    j = json.loads(bl.to_str())
    for name, cls in ((prefix + "bart", BartTokenizer), (prefix + "gpt2", GPT2Tokenizer)):
        folder = os.path.join(work, name)
        os.makedirs(folder, exist_ok=True)
        vocab = dict(j["model"]["vocab"])
        for t in j["added_tokens"]:
            vocab.setdefault(t["content"], t["id"])
        with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump(vocab, f, ensure_ascii=False)
        with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n" + "\n".join(" ".join(m) for m in j["model"]["merges"]) + "\n")
        kw = {"add_prefix_space": True} if name.endswith("gpt2") else {}
        made[name] = saved(cls, folder, os.path.join(out, name + ".json"), **kw)
    return made


def main():
    args = sys.argv[1:]
    n_bench = 0
    if "--sentences" in args:
        i = args.index("--sentences")
        n_bench = int(args[i + 1])
        del args[i:i + 2]
    bench_corpus = None
    if "--bench-corpus" in args:
        i = args.index("--bench-corpus")
        bench_corpus = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = args[0]
    os.makedirs(out, exist_ok=True)
    with open(os.path.abspath(__file__), "rb") as f:
        stamp = hashlib.sha256(f.read()).hexdigest() + " " + tokenizers.__version__ + " " + transformers.__version__
    stamp_file = os.path.join(out, "stamp")
    if (os.path.exists(stamp_file) and os.path.exists(os.path.join(out, "expected.json")) and
            (n_bench == 0 or os.path.exists(os.path.join(out, "bench_sentences.txt")))):
        with open(stamp_file) as f:
            if f.read() == stamp:
                return 0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    lines = corpus_lines()
    fixtures = []
    with tempfile.TemporaryDirectory() as work:
        trained = {
            "unigram_t5": unigram_t5(lines, work),
            "unigram_byte_fallback": unigram_byte_fallback(lines, work),
            "unigram_split_first": unigram_split_first(lines, work),
            "bpe_bytelevel": bpe_bytelevel(lines, work),
            "bpe_metaspace_fallback": bpe_metaspace_fallback(lines, work),
            "bpe_llama2": bpe_metaspace_fallback(lines, work, llama2=True),
            "wordlevel_bert": wordlevel(lines, work),
            "wordlevel_split": wordlevel_split(lines, work),
            "bpe_misc": bpe_misc(lines, work),
            "bpe_suffix": bpe_words_suffix(lines, work),
            "gpt2_split": gpt2_split(lines, work),
        }
        trained["bpe_legacy_merges"] = legacy_merges(trained["bpe_bytelevel"])
        for name, tok in trained.items():
            path = os.path.join(out, name + ".json")
            if name == "bpe_legacy_merges":
                j = json.loads(tok.to_str())
                j["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in j["model"]["merges"]]
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(j, f, ensure_ascii=False)
                tok = Tokenizer.from_file(path)
            else:
                tok.save(path)
            fixtures.append({"name": name, "file": name + ".json", "cases": expected_cases(tok)})
        for name, text, texts in edge_fixtures():
            with open(os.path.join(out, name + ".json"), "w", encoding="utf-8") as f:
                f.write(text)
            tok = Tokenizer.from_file(os.path.join(out, name + ".json"))
            fixtures.append({"name": name, "file": name + ".json", "cases": expected_cases(tok, texts=texts)})
        for name, (tok, hf) in transformers_fixtures(lines, work, out).items():
            fixtures.append({"name": name, "file": name + ".json", "cases": expected_cases(tok, hf)})
        if bench_corpus:
            # Benchmark tokenizers of realistic vocabularies (8,000 pieces and more) trained on a larger
            # corpus (e.g. the Tatoeba sample's two columns); its sentences are the benchmark's.
            with open(bench_corpus, encoding="utf-8") as f:
                bench_lines = [c for line in f for c in line.rstrip("\n").split("\t")[:2] if c]
            lines = bench_lines
            transformers_fixtures(bench_lines + corpus_lines(), work, out, prefix="bench_", scale=30)
    with open(os.path.join(out, "expected.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizers": tokenizers.__version__, "transformers": transformers.__version__, "fixtures": fixtures},
                  f, ensure_ascii=False, indent=0)
    if n_bench:
        # N sentences: the corpus's own (the bench corpus's when given), two joined where it is short.
        with open(os.path.join(out, "bench_sentences.txt"), "w", encoding="utf-8") as f:
            base = lines if bench_corpus else lines + SAMPLES
            for i in range(n_bench):
                text = base[i % len(base)] if bench_corpus else base[i % len(base)] + " " + base[(i * 7 + 3) % len(base)]
                f.write(text.replace("\n", " ").replace("\r", " ") + "\n")
    with open(stamp_file, "w") as f:
        f.write(stamp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
