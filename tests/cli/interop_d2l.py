#!/usr/bin/env python3
"""CTest: d2l's PyTorch seq2seq and attnviz translate alike through safetensors.

  1. d2l -> attnviz: d2l_reference.py's code trains a small model for a few batches;
     tools/d2l_safetensors.py saves it; `attnviz-cli translate --model X.safetensors`
     must give d2l's greedy translations and its attention weights within 1e-5.
  2. attnviz -> d2l: `attnviz-cli train` then `attnviz-cli export`; the file loads with
     load_state_dict into d2l's classes, whose predict_step loop must give attnviz's
     translations and attention; and the exported file read back by attnviz gives the
     checkpoint's own output exactly.
Sentences include unknown words and ones longer than num_steps. Exit code 77 (CTest's
SKIP_RETURN_CODE) when the data file, d2l_reference.py, torch or safetensors is missing.
Prints the largest attention difference of each direction as JSON.
"""
import json
import sys
import tempfile
import time
from pathlib import Path

from interop_support import attnviz_translate, compare, d2l_to_attnviz, d2l_translate, parse_args, run

SENTENCES = [
    'go .', 'i lost .', "he's calm .", "i'm home .", 'we won .', 'i am cold .', 'tom is here .',
    'hug me .', 'help !', 'i know you .',
    'the xylophone quibbled with a zebra .',                      # unknown words
    'i think that tom is very happy to be here with us today .',  # longer than num_steps
    'we are not sure if you are right about that , tom .',        # longer, with a comma
]


def main():
    a, d2l = parse_args(150, ['d2l_reference.py'])
    python, t0 = sys.executable, time.perf_counter()
    report = {}
    with tempfile.TemporaryDirectory(prefix='attnviz-interop-') as tmp:
        tmp = Path(tmp)
        # 1. d2l -> attnviz.
        report['d2l_to_attnviz'] = d2l_to_attnviz(a, d2l, tmp, ['--embed', 32, '--hidden', 48, '--layers', 2],
                                                  SENTENCES)

        # 2. attnviz -> d2l, natural source lengths (attnviz's default).
        ckpt, exported = tmp / 'attnviz.ckpt', tmp / 'attnviz.safetensors'
        run([a.cli, '--threads', '1', 'train', '--data', a.data, '--max-pairs', 1000, '--embed', 32,
             '--hidden', 48, '--layers', 2, '--epochs', 50, '--max-batches', a.batches, '--batch', 64,
             '--min-freq', 2, '--eval-sample', 0, '--quiet', '--save', ckpt])
        run([a.cli, 'export', '--model', ckpt, '--out', exported])
        max_length = 10
        ours = attnviz_translate(a.cli, ckpt, max_length, tmp / 'attnviz2.json', SENTENCES)
        theirs = d2l_translate(python, a.tool, d2l, exported, max_length, tmp / 'd2l2.json', SENTENCES)
        back = attnviz_translate(a.cli, exported, max_length, tmp / 'attnviz3.json', SENTENCES)
        for x, y in zip(ours, back):
            if (x['output'], x['weights']) != (y['output'], y['weights']):
                sys.exit(f'the exported file translates "{x["input"]}" differently from its checkpoint')
        report['attnviz_to_d2l'] = {'max_attention_diff': compare('attnviz -> d2l', ours, theirs, len(SENTENCES))[0],
                                    'translations': [' '.join(d['output']) for d in theirs]}
    report['seconds'] = round(time.perf_counter() - t0, 1)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == '__main__':
    sys.exit(main())
