#!/usr/bin/env python3
"""CTest: d2l's PyTorch Transformer and attnviz translate, and train, alike through safetensors.

  1. d2l -> attnviz: d2l_transformer_reference.py's classes train a small Transformer for a few
     batches; tools/d2l_safetensors.py saves it; `attnviz-cli translate --model X.safetensors`
     must give d2l's predict_step translations (every output token at position 0, as d2l decodes)
     and every attention map -- cross and decoder self-attention of every layer and head, and
     the encoder's self-attention -- within 1e-5.
  2. Loss and gradients: a tiny random Transformer (dropout 0) and one batch of pairs; d2l's loss
     and every parameter's gradient against attnviz's, which come from one step of plain SGD at
     learning rate 1 (`attnviz-cli train --resume FILE --optimizer sgd --lr 1 --clip 0`): the
     exported weights after the step are the weights before it minus the gradient. Within 1e-5.
  3. attnviz -> d2l: `attnviz-cli train --arch transformer`, then `attnviz-cli export`; the file
     loads with load_state_dict into d2l's classes, which decode at true positions (the file says
     d2l_decode_positions false) and must give attnviz's translations and maps; the exported file
     read back by attnviz gives the checkpoint's own output exactly.
Sentences include unknown words and ones longer than num_steps. Exit code 77 (CTest's
SKIP_RETURN_CODE) when the data file, the d2l code, torch or safetensors is missing. Prints the
largest differences as JSON.
"""
import json
import sys
import tempfile
import time
from pathlib import Path

from interop_support import TOLERANCE, attnviz_translate, compare, d2l_to_attnviz, d2l_translate, parse_args, run

SENTENCES = [
    'go .', 'i lost .', "he's calm .", "i'm home .", 'we won .', 'i am cold .', 'tom is here .',
    'hug me .', 'help !', 'i know you .',
    'the xylophone quibbled with a zebra .',                      # unknown words
    'i think that tom is very happy to be here with us today .',  # longer than num_steps
]
SIZE = ['--hidden', 32, '--layers', 2]


def read_file(path):
    from safetensors import safe_open
    with safe_open(str(path), framework='pt') as f:
        meta = f.metadata()
        return {k: f.get_tensor(k) for k in f.keys()}, json.loads(meta['src_vocab']), json.loads(meta['tgt_vocab'])


def gradient_check(a, python, d2l, tmp):
    """d2l's loss and gradients of one batch against attnviz's, identical weights, dropout 0."""
    before = tmp / 'tiny.safetensors'
    run([python, a.tool, '--d2l', d2l, '--threads', '1', 'train', a.data, '--arch', 'transformer',
         '--out', before, '--batches', 0, '--num-steps', 12, '--hidden', 16, '--layers', 2, '--heads', 4,
         '--ffn', 24, '--dropout', 0, '--num-train', 200, '--num-val', 10, '--seed', 3])
    # One batch: 40 short pairs of the same file (their words are in the vocabulary or map to <unk>).
    lines = [l for l in Path(a.data).read_text(encoding='utf-8').split('\n') if l.strip()][100:140]
    batch = tmp / 'batch.tsv'
    batch.write_text('\n'.join('\t'.join(l.split('\t')[:2]) for l in lines) + '\n', encoding='utf-8')
    theirs = tmp / 'grads.json'
    run([python, a.tool, '--d2l', d2l, '--threads', '1', 'grads', before, batch, '--json', theirs])
    ref = json.loads(theirs.read_text())
    ckpt, after = tmp / 'step.ckpt', tmp / 'after.safetensors'
    out = run([a.cli, '--threads', '1', 'train', '--resume', before, '--data', batch, '--optimizer', 'sgd',
               '--lr', 1, '--clip', 0, '--epochs', 1, '--batch', 64, '--val-fraction', 0, '--eval-sample', 0,
               '--json', '--quiet', '--save', ckpt])
    run([a.cli, 'export', '--model', ckpt, '--out', after])
    import torch
    w0, src0, tgt0 = read_file(before)
    w1, src1, tgt1 = read_file(after)
    # attnviz lists its special tokens first: rows follow the tokens, not the indices.
    order = {'encoder.embedding.weight': (src0, src1), 'decoder.embedding.weight': (tgt0, tgt1),
             'decoder.dense.weight': (tgt0, tgt1), 'decoder.dense.bias': (tgt0, tgt1)}
    worst, worst_name = 0.0, ''
    for name, g in ref['grads'].items():
        g = torch.tensor(g)
        new = w1[name]
        if name in order:
            before_tokens, after_tokens = order[name]
            index = {t: i for i, t in enumerate(after_tokens)}
            new = new[torch.tensor([index[t] for t in before_tokens])]
        step = w0[name] - new  # SGD at rate 1: exactly the gradient, up to float rounding
        diff = float((step - g).abs().max())
        if diff > worst:
            worst, worst_name = diff, name
    losses = [json.loads(l) for l in out.splitlines() if l.startswith('{')]
    ours = next((e['train_loss'] for e in reversed(losses) if 'train_loss' in e), None)
    if ours is None:
        sys.exit(f'attnviz-cli train --json printed no train_loss:\n{out}')
    if abs(ours - ref['loss']) > TOLERANCE:
        sys.exit(f'loss: attnviz {ours}, d2l {ref["loss"]}')
    if worst > TOLERANCE:
        sys.exit(f'gradients differ by {worst:.3g} at {worst_name} (tolerance {TOLERANCE})')
    return {'loss_attnviz': ours, 'loss_d2l': ref['loss'], 'max_gradient_diff': worst,
            'parameters': len(ref['grads'])}


def main():
    a, d2l_dir = parse_args(80, ['d2l_reference.py', 'd2l_transformer_reference.py'])
    python, t0 = sys.executable, time.perf_counter()
    report = {}
    with tempfile.TemporaryDirectory(prefix='attnviz-interop-tf-') as tmp:
        tmp = Path(tmp)
        # 1. d2l -> attnviz: predict_step's positions, every map.
        report['d2l_to_attnviz'] = d2l_to_attnviz(a, d2l_dir, tmp, ['--arch', 'transformer', *SIZE, '--heads', 4,
                                                                     '--ffn', 48, '--lr', 0.005], SENTENCES)

        # 2. The training loss and every gradient of one batch, the same weights in both.
        report['gradients'] = gradient_check(a, python, d2l_dir, tmp)

        # 3. attnviz -> d2l, natural source lengths (attnviz's default), true positions.
        ckpt, exported = tmp / 'attnviz.ckpt', tmp / 'attnviz.safetensors'
        run([a.cli, '--threads', '1', 'train', '--data', a.data, '--max-pairs', 1000, '--arch', 'transformer',
             *SIZE, '--heads', 4, '--ffn', 48, '--epochs', 50, '--max-batches', a.batches, '--batch', 64,
             '--min-freq', 2, '--eval-sample', 0, '--quiet', '--save', ckpt])
        run([a.cli, 'export', '--model', ckpt, '--out', exported])
        max_length = 10
        ours = attnviz_translate(a.cli, ckpt, max_length, tmp / 'attnviz2.json', SENTENCES)
        theirs = d2l_translate(python, a.tool, d2l_dir, exported, max_length, tmp / 'd2l2.json', SENTENCES)
        back = attnviz_translate(a.cli, exported, max_length, tmp / 'attnviz3.json', SENTENCES)
        for x, y in zip(ours, back):
            if (x['output'], x['attention_maps']) != (y['output'], y['attention_maps']):
                sys.exit(f'the exported file translates "{x["input"]}" differently from its checkpoint')
        worst, maps = compare('attnviz -> d2l', ours, theirs, len(SENTENCES))
        report['attnviz_to_d2l'] = {'max_attention_diff': worst, 'maps_compared': maps,
                                    'translations': [' '.join(d['output']) for d in theirs]}
    report['seconds'] = round(time.perf_counter() - t0, 1)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == '__main__':
    sys.exit(main())
