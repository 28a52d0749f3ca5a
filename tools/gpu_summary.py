#!/usr/bin/env python3
"""Summaries for tools/gpu_check.sh, from the JSON files in its work directory.

  gpu_summary.py compare DIR DEVICE   the same weights on the CPU and DEVICE: metrics, outputs,
                                      every attention map, attributions (largest differences)
  gpu_summary.py train DIR            training rounds: medians of attnviz and d2l's code
  gpu_summary.py speed DIR            decoding and attribution timings
"""
import glob
import json
import os
import statistics
import sys


def load(path):
    try:
        with open(path, encoding='utf-8') as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def max_diff(a, b):
    """Largest absolute difference of two equally nested lists of numbers (inf when shapes differ)."""
    if isinstance(a, list) or isinstance(b, list):
        if not isinstance(a, list) or not isinstance(b, list) or len(a) != len(b):
            return float('inf')
        return max([max_diff(x, y) for x, y in zip(a, b)] + [0.0])
    if a is None or b is None:
        return 0.0 if a == b else float('inf')
    return abs(a - b)


def compare(w, dev):
    for m in ('rnn', 'tf'):
        e0, e1 = load(f'{w}/eval_{m}_cpu.json'), load(f'{w}/eval_{m}_{dev}.json')
        if e0 and e1:
            keys = ['val_loss', 'accuracy', 'token_accuracy', 'teacher_forced_token_accuracy', 'bleu']
            print(f'[{m}] eval cpu / {dev}: ' + ', '.join(f'{k} {e0[k]:.6f} / {e1[k]:.6f}' for k in keys))
        a0, a1 = load(f'{w}/att_{m}_cpu.json'), load(f'{w}/att_{m}_{dev}.json')
        if a0 and a1:
            same = len(a0) == len(a1) and all(x['output'] == y['output'] for x, y in zip(a0, a1))
            maps = sum(len(x['attention_maps']) for x in a0)
            def worst(key):
                return max(max_diff([mm.get(key, []) for mm in x['attention_maps']],
                                    [mm.get(key, []) for mm in y['attention_maps']]) for x, y in zip(a0, a1))
            dl = max(abs(x['log_prob'] - y['log_prob']) for x, y in zip(a0, a1))
            print(f'[{m}] beam-4 hypotheses {len(a0)}, same tokens: {same}; {maps} attention maps: '
                  f'max |d weight| {worst("weights"):.2e}, max |d score| {worst("raw_scores"):.2e}, max |d log p| {dl:.2e}')
        r0, r1 = load(f'{w}/attr_{m}_cpu.json'), load(f'{w}/attr_{m}_{dev}.json')
        if r0 and r1:
            rel = {}
            for x, y in zip(r0, r1):
                for s0, s1 in zip(x['steps'], y['steps']):
                    for k, v0 in s0['attributions'].items():
                        scale = max(abs(v) for v in v0) or 1.0
                        rel[k] = max(rel.get(k, 0.0), max_diff(v0, s1['attributions'][k]) / scale)
            print(f'[{m}] attributions, max |difference| / max |value|: ' + ', '.join(f'{k} {v:.1e}' for k, v in rel.items()))
        elif r0 or r1:
            print(f'[{m}] attributions: only one device produced them')


def train(w):
    for fam in ('rnn', 'transformer', 'transformer-bf16', 'transformer-before', 'transformer-16k',
                'transformer-16k-bf16'):
        ours = [x for x in (load(p) for p in sorted(glob.glob(f'{w}/bench_{fam}_[1-9]*.json'))) if x]
        peer = fam.replace('-before', '').replace('-16k-bf16', '-16k')  # d2l's code has no such variants
        theirs = [x for x in (load(p) for p in sorted(glob.glob(f'{w}/d2l_{peer}_[1-9]*.json'))) if x]
        if not ours:
            continue
        line = (f'{fam}: attnviz {statistics.median(x["tokens_per_second"] for x in ours):.0f} tok/s '
                f'(rounds {[round(x["tokens_per_second"]) for x in ours]}), val loss {ours[-1]["last_val_loss"]:.4f}, '
                f'mean BLEU {ours[-1].get("mean_bleu", float("nan")):.3f}')
        if theirs:
            ratio = statistics.median(x['tokens_per_second'] for x in ours) / statistics.median(
                x['tokens_per_second'] for x in theirs)
            line += (f' | d2l {statistics.median(x["tokens_per_second"] for x in theirs):.0f} tok/s (rounds '
                     f'{[round(x["tokens_per_second"]) for x in theirs]}), val loss {theirs[-1]["last_val_loss"]:.4f}, '
                     f'mean BLEU {theirs[-1].get("mean_bleu", float("nan")):.3f} | {ratio:.2f}x')
        print(line)


def speed(w):
    for p in sorted(glob.glob(f'{w}/decode_*.json')):
        x = load(p)
        if x:
            print(os.path.basename(p), x['device'], f'{x["sentences"]} sentences:', ', '.join(
                f'{r["name"]} {r["median_seconds"] * 1000:.0f} ms' for r in x['runs']))
    for p in sorted(glob.glob(f'{w}/attribute_*.json')):
        x = load(p)
        if x:
            print(os.path.basename(p), x['device'], f'{x["output_tokens"]} output tokens:', ', '.join(
                f'{r["name"]} {r["median_ms"]:.1f} ms' for r in x['runs']))


if __name__ == '__main__':
    if len(sys.argv) < 3 or sys.argv[1] not in ('compare', 'train', 'speed'):
        sys.exit(__doc__)
    {'compare': lambda: compare(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else 'cuda'),
     'train': lambda: train(sys.argv[2]), 'speed': lambda: speed(sys.argv[2])}[sys.argv[1]]()
