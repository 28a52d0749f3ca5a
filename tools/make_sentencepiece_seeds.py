#!/usr/bin/env python3
"""Writes the seeds of tests/fuzz/fuzz_sentencepiece_pretrained.cpp: SentencePiece models as
pretrained translation models have them (a normalizer rule table built by SentencePiece's own
builder, control and user-defined pieces, byte fallback, a denormalizer), small enough for the
fuzzer's -max_len (nmt_nfkc's own table is 240 KB, so the rules here are a few of its kind).

    .venv/bin/python tools/make_sentencepiece_seeds.py tests/fuzz/corpus/sentencepiece_pretrained

Needs the sentencepiece package (the project's .venv has it); run once, the output is committed.
"""
import io
import os
import struct
import sys
import tempfile

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as pb

SENTENCES = ["the red car sees a dog", "a small dog sees the car", "la voiture rouge voit un chien",
             "un petit chien voit la voiture", "Abc 1 \u30ab", "abc 123 \u30ab\u30ab"] * 4

# Rules of nmt_nfkc's kind: full-width letters, circled digits, half-width katakana, a
# two-character source, a deletion (a zero-width space), one rule a prefix of another. Then two tables alone (for the harness's
# "T" inputs): the builder's and a chain of 32 rules matching at one position. Then crafted
# tables that must be refused: a trie offset, a rule's string and the trie size past the end, a
# string without NUL, 33 rules matching at one position.
RULES = [("FF21", "41"), ("FF42", "62"), ("FF43", "63"), ("2460", "31"), ("2461", "32"),
         ("FF76", "30AB"), ("FF76 FF9E", "30AC"), ("200B", ""), ("3000", "20"), ("FB01", "66 69"),
         ("1F600", "3A 29"), ("00C5", "41 030A")]
DENORMALIZE = [("30AB", "FF76"), ("41 030A", "00C5")]


def train(out, name, rules_path, vocab_size=60, **options):
    f = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(SENTENCES), model_writer=f, vocab_size=vocab_size,
                                   character_coverage=1.0, hard_vocab_limit=False, num_threads=1,
                                   minloglevel=3, normalization_rule_tsv=rules_path, **options)
    with open(os.path.join(out, name), "wb") as w:
        w.write(f.getvalue())
    print(name, len(f.getvalue()), "bytes")


def crafted(out, model_path):
    model = pb.ModelProto()
    model.ParseFromString(open(model_path, "rb").read())
    table = bytes(model.normalizer_spec.precompiled_charsmap)
    unit = lambda t, i: struct.unpack_from("<I", t, 4 + 4 * i)[0]
    offset = lambda u: (u >> 10) << ((u & (1 << 9)) >> 6)

    def walk(t, text):
        node = 0
        for c in text:
            node = node ^ offset(unit(t, node)) ^ c
            assert unit(t, node) & 0x800000FF == c
        return node

    def save(name, new_table):
        m = pb.ModelProto()
        m.CopyFrom(model)
        m.normalizer_spec.precompiled_charsmap = bytes(new_table)
        with open(os.path.join(out, name), "wb") as w:
            w.write(m.SerializeToString())

    # Tables alone, which the harness puts into a model of its own ("T" + the table).
    with open(os.path.join(out, "table_rules.bin"), "wb") as w:
        w.write(b"T" + table)
    first, rule = walk(table, b"\xef"), walk(table, "\uff21".encode())
    t = bytearray(table)
    struct.pack_into("<I", t, 4 + 4 * first, (1 << 30) | 0xEF)
    save("crafted_offset_past.model", t)
    t = bytearray(table)
    struct.pack_into("<I", t, 4 + 4 * (rule ^ offset(unit(table, rule))), 0x80000000 | 0x7FFFFFF0)
    save("crafted_value_past.model", t)
    t = bytearray(table)
    struct.pack_into("<I", t, 0, len(table) - 4 + 3)
    save("crafted_size_past.model", t)
    save("crafted_no_nul.model", table[:-1])
    units = [(i & 0xFF) ^ 1 for i in range(35 * 256)]  # a chain of 33 'a' rules, each with a leaf
    units[0], node = 256 << 10, 0
    for k in range(1, 34):
        child, child_base = node ^ (units[node] >> 10) ^ ord("a"), (k + 1) * 256
        units[child], units[child_base], node = ((child ^ child_base) << 10) | 0x100 | ord("a"), 0x80000000, child
    chain = struct.pack("<I", 4 * len(units)) + struct.pack(f"<{len(units)}I", *units) + b"x\0"
    save("crafted_33_matches.model", chain)
    # The same chain cut after 32 rules (the 33rd 'a' selects a unit labelled otherwise): accepted.
    node32 = 0
    for _ in range(32):
        node32 = node32 ^ (units[node32] >> 10) ^ ord("a")
    units[node32 ^ (units[node32] >> 10) ^ ord("a")] = 0x1FF
    with open(os.path.join(out, "table_32_matches.bin"), "wb") as w:
        w.write(b"T" + struct.pack("<I", 4 * len(units)) + struct.pack(f"<{len(units)}I", *units) + b"x\0")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        rules = os.path.join(tmp, "rules.tsv")
        with open(rules, "w") as f:
            f.writelines(f"{a}\t{b}\n" for a, b in RULES)
        denorm = os.path.join(tmp, "denorm.tsv")
        with open(denorm, "w") as f:
            f.writelines(f"{a}\t{b}\n" for a, b in DENORMALIZE)
        train(out, "rules_unigram.model", rules, model_type="unigram", user_defined_symbols=[">>fra<<"],
              control_symbols=["<2fr>"], pad_id=3)
        train(out, "rules_bpe_byte_fallback.model", rules, model_type="bpe", byte_fallback=True, vocab_size=300,
              denormalization_rule_tsv=denorm)
        train(out, "rules_word.model", rules, model_type="word")
    crafted(out, os.path.join(out, "rules_unigram.model"))
    f = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(SENTENCES), model_writer=f, vocab_size=40, hard_vocab_limit=False,
                                   normalization_rule_name="identity", minloglevel=3, num_threads=1)
    with open(os.path.join(out, "identity.model"), "wb") as w:
        w.write(f.getvalue())


if __name__ == "__main__":
    main()
