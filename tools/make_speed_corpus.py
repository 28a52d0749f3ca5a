#!/usr/bin/env python3
"""Builds the 16,000-pair, ~3,600-word benchmark corpus of docs/benchmarks.md
("The 16,000-pair corpus") from the 5,000-pair Tatoeba sample.

Usage: make_speed_corpus.py ../shared/data/tatoeba-eng-fra-5000.tsv > speed-16000.tsv
       [--pairs 16000] [--seed 0]

Recipe (deterministic, standard library only):
1. Read the first two columns; keep the pairs whose sides have at most 8 tokens
   after d2l's preprocessing (so with <eos> they fit d2l's 9 steps and its
   pad_or_trim truncates nothing: both implementations see the same tokens).
2. Pair i of the output is kept pair perm[i % K] in "dialect" i // K, where
   perm is a seeded shuffle of the K kept pairs. Dialect 0 is the pair as it is;
   dialect d > 0 appends d letters 'q' to every word on both sides (punctuation
   stays shared), so the vocabularies grow like those of a larger corpus while
   sentence lengths and the alignment structure stay Tatoeba's.
3. The output lines are shuffled with the same seed, so that a train/validation
   split by file order sees the same mixture of dialects and lengths.
"""
import argparse
import random
import sys


def preprocess(text):  # d2l's, as in ../shared/bench/d2l_reference.py
    text = text.replace('\u202f', ' ').replace('\xa0', ' ')
    no_space = lambda ch, prev: ch in ',.!?' and prev != ' '
    return ''.join(' ' + ch if i > 0 and no_space(ch, text[i - 1]) else ch for i, ch in enumerate(text.lower()))


def dialect(sentence, d):
    if d == 0:
        return sentence
    return ' '.join(w if w in ',.!?' else w + 'q' * d for w in preprocess(sentence).split(' ') if w)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('tsv')
    ap.add_argument('--pairs', type=int, default=16000)
    ap.add_argument('--seed', type=int, default=0)
    a = ap.parse_args()
    kept = []
    with open(a.tsv, encoding='utf-8') as f:
        for line in f.read().split('\n'):
            cols = line.split('\t')
            if len(cols) < 2:
                continue
            src, tgt = cols[0].strip(), cols[1].strip()
            if 0 < len(preprocess(src).split()) <= 8 and 0 < len(preprocess(tgt).split()) <= 8:
                kept.append((src, tgt))
    rng = random.Random(a.seed)
    perm = list(range(len(kept)))
    rng.shuffle(perm)
    out = []
    for i in range(a.pairs):
        src, tgt = kept[perm[i % len(kept)]]
        d = i // len(kept)
        out.append((dialect(src, d), dialect(tgt, d)))
    rng.shuffle(out)
    w = sys.stdout
    for src, tgt in out:
        w.write(src + '\t' + tgt + '\n')
    print(f'{len(kept)} of the sample\'s pairs fit 8 tokens; wrote {len(out)} pairs', file=sys.stderr)


if __name__ == '__main__':
    main()
