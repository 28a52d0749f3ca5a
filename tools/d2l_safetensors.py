#!/usr/bin/env python3
"""d2l's Bahdanau seq2seq (PyTorch) <-> attnviz, through one safetensors file.

The file: the tensors of the d2l model's state_dict() under their own names
(encoder.embedding.weight, encoder.rnn.weight_ih_l0, ..., decoder.attention.W_q.weight,
decoder.dense.bias), and in __metadata__ three JSON strings:
  src_vocab, tgt_vocab  the vocabularies' idx_to_token lists, in index order
  config                {"embed", "hidden", "layers", "num_steps", "dropout", "cell", "scoring", ...}
`attnviz-cli translate --model FILE.safetensors` reads it; `attnviz-cli export` writes it.

As a module:
  save(model, src_vocab, tgt_vocab, num_steps, path)   a d2l Seq2Seq + d2l Vocabs -> file
  load(path) -> (model, src_vocab, tgt_vocab, config)  file -> d2l classes (load_state_dict)
  translate(model, src_vocab, tgt_vocab, config, sentences, max_length)
                                                      d2l's predict_step greedy loop, with attention
As a program:
  d2l_safetensors.py train DATA.tsv --out FILE.safetensors [--batches 50 --num-steps 9 ...]
  d2l_safetensors.py translate FILE.safetensors [SENTENCE ...] [--max-length N] [--json OUT]
The d2l classes come from d2l_reference.py, found with --d2l DIR_OR_FILE, else
$ATTNVIZ_D2L_DIR, else ../shared/bench next to the repository.
"""
import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

FORMAT = 'd2l-seq2seq'  # __metadata__["format"]: tells it from an attnviz checkpoint (also safetensors)
_d2l = None


def import_d2l(where=None):
    """Imports d2l_reference.py (a file, or a directory holding it) and returns the module."""
    global _d2l
    if _d2l is not None and where is None:
        return _d2l
    where = where or os.environ.get('ATTNVIZ_D2L_DIR') or str(Path(__file__).resolve().parents[1] / '..' / 'shared' / 'bench')
    path = Path(where)
    if path.is_dir():
        path = path / 'd2l_reference.py'
    if not path.is_file():
        raise FileNotFoundError(f'd2l_reference.py not found at {path} (use --d2l or ATTNVIZ_D2L_DIR)')
    spec = importlib.util.spec_from_file_location('d2l_reference', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _d2l = module
    return module


# --- save / load -------------------------------------------------------------------

def save(model, src_vocab, tgt_vocab, num_steps, path, dropout=None):
    """Writes a d2l Seq2Seq (encoder Seq2SeqEncoder, decoder Seq2SeqAttentionDecoder) and its
    vocabularies. num_steps: the length d2l pads sources to (0 or None: natural lengths)."""
    rnn = model.encoder.rnn
    config = {'embed': model.encoder.embedding.embedding_dim, 'hidden': rnn.hidden_size,
              'layers': rnn.num_layers, 'dropout': float(rnn.dropout if dropout is None else dropout),
              'cell': 'gru', 'scoring': 'additive', 'level': 'word'}
    if num_steps:
        config['num_steps'] = int(num_steps)
    tensors = {name: t.detach().to('cpu', torch.float32).contiguous() for name, t in model.state_dict().items()}
    metadata = {'format': FORMAT, 'src_vocab': json.dumps(list(src_vocab.idx_to_token), ensure_ascii=False),
                'tgt_vocab': json.dumps(list(tgt_vocab.idx_to_token), ensure_ascii=False),
                'config': json.dumps(config)}
    save_file(tensors, str(path), metadata=metadata)
    return config


def _vocab(tokens):
    d2l = import_d2l()
    v = d2l.Vocab([])
    v.idx_to_token = list(tokens)
    v.token_to_idx = {t: i for i, t in enumerate(v.idx_to_token)}
    return v


def load(path, device='cpu'):
    """Reads a file written by save() or `attnviz-cli export` into d2l's classes (load_state_dict,
    strict). Returns (model in eval mode, src_vocab, tgt_vocab, config)."""
    d2l = import_d2l()
    with safe_open(str(path), framework='pt') as f:
        meta = f.metadata() or {}
        state = {k: f.get_tensor(k) for k in f.keys()}
    for key in ('src_vocab', 'tgt_vocab', 'config'):
        if key not in meta:
            raise ValueError(f'{path}: __metadata__ has no "{key}": not a d2l seq2seq file')
    config = json.loads(meta['config'])
    d2l_shape = {'cell': 'gru', 'scoring': 'additive', 'bidirectional': False, 'reverse_source': False}
    variant = {k: config[k] for k in d2l_shape if config.get(k, d2l_shape[k]) != d2l_shape[k]}
    if config.get('attention_size') not in (None, 0, config['hidden']):
        variant['attention_size'] = config['attention_size']
    if variant:
        raise ValueError(f'{path}: an attnviz variant ({variant}); d2l\'s classes hold only GRU, additive '
                         'attention, a unidirectional encoder reading left to right')
    src_vocab, tgt_vocab = _vocab(json.loads(meta['src_vocab'])), _vocab(json.loads(meta['tgt_vocab']))
    E, H, L = config['embed'], config['hidden'], config['layers']
    dropout = config.get('dropout', 0.0)
    enc = d2l.Seq2SeqEncoder(len(src_vocab), E, H, L, dropout)
    dec = d2l.Seq2SeqAttentionDecoder(len(tgt_vocab), E, H, L, dropout)
    model = d2l.Seq2Seq(enc, dec, tgt_vocab['<pad>'])
    model.load_state_dict(state)  # strict: every name and shape must match (lazy layers take theirs)
    return model.to(device).eval(), src_vocab, tgt_vocab, config


# --- translation ---------------------------------------------------------------------

def tokenize(sentence, config):
    """d2l's preprocessing and word split (the same attnviz applies at word level)."""
    d2l = import_d2l()
    if config.get('level', 'word') in ('char', 'character'):
        return [c for c in ' '.join(sentence.lower().split())]
    return [t for t in d2l.preprocess(sentence).split(' ') if t]


@torch.no_grad()
def translate(model, src_vocab, tgt_vocab, config, sentences, max_length=None):
    """Greedy translation with d2l's predict_step loop (the decoder fed its own argmax for
    max_length steps, attention weights recorded). With config num_steps every source is
    pad_or_trim(tokens + <eos>, num_steps) and the sentences go as one batch, as d2l does;
    without it each sentence runs alone at its own length (no padding to read over).
    Returns one dict per sentence: input, source (the tokens read), output (up to the first
    <eos>, included), weights (one row per output token over the source), masked_max (the
    largest weight d2l gave a padding position; 0 when masked exactly)."""
    num_steps = config.get('num_steps') or 0
    max_length = max_length or num_steps or 10
    device = next(model.parameters()).device
    tokenized = [tokenize(s, config) + ['<eos>'] for s in sentences]
    if num_steps:
        pad = lambda seq: seq[:num_steps] if len(seq) > num_steps else seq + ['<pad>'] * (num_steps - len(seq))
        groups = [[pad(t) for t in tokenized]]
    else:
        groups = [[t] for t in tokenized]
    results = []
    for group in groups:
        src = torch.tensor([src_vocab[s] for s in group], device=device)
        valid_len = (src != src_vocab['<pad>']).type(torch.int32).sum(1)
        enc_all = model.encoder(src, valid_len)
        state = model.decoder.init_state(enc_all, valid_len)
        outputs = [torch.full((len(group), 1), tgt_vocab['<bos>'], device=device)]
        attention = []
        for _ in range(max_length):
            Y, state = model.decoder(outputs[-1], state)
            outputs.append(Y.argmax(2))
            attention.append(model.decoder._attention_weights[0][:, 0, :])  # [B, S]
        ids = torch.cat(outputs[1:], 1).cpu()
        weights = torch.stack(attention, 1).cpu()  # [B, steps, S]
        for b in range(len(group)):
            n = int(valid_len[b])
            out = []
            for i in ids[b].tolist():
                out.append(tgt_vocab.idx_to_token[i])
                if out[-1] == '<eos>':
                    break
            w = weights[b, :len(out)]
            results.append({'source': [src_vocab.idx_to_token[i] for i in src[b, :n].tolist()], 'output': out,
                            'text': ' '.join(t for t in out if t != '<eos>'), 'weights': w[:, :n].tolist(),
                            'masked_max': float(w[:, n:].max()) if w.size(1) > n else 0.0})
    for r, s in zip(results, sentences):
        r['input'] = s
    return results


# --- training ----------------------------------------------------------------------------

def train(data_path, batches, num_steps=9, embed=32, hidden=32, layers=2, dropout=0.2, lr=0.005, batch=64,
          num_train=512, num_val=128, seed=0):
    """d2l's training (Data, Adam, gradient clipping at norm 1) for a number of batches, cycling
    the epochs; returns (model in eval mode, data, last training loss)."""
    d2l = import_d2l()
    torch.manual_seed(seed)
    with open(data_path, encoding='utf-8') as f:  # the first two columns, as d2l_reference.main()
        raw = '\n'.join('\t'.join(line.split('\t')[:2]) for line in f.read().split('\n'))
    data = d2l.Data(raw, num_steps, num_train, num_val)
    enc = d2l.Seq2SeqEncoder(len(data.src_vocab), embed, hidden, layers, dropout)
    dec = d2l.Seq2SeqAttentionDecoder(len(data.tgt_vocab), embed, hidden, layers, dropout)
    model = d2l.Seq2Seq(enc, dec, data.tgt_vocab['<pad>'])
    with torch.no_grad():
        model(*next(iter(data.loader(True, batch)))[:-1])  # materialise the lazy layers
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    done, loss = 0, float('nan')
    model.train()
    while done < batches:
        for b in data.loader(True, batch):
            l = model.loss(model(*b[:-1]), b[-1])
            opt.zero_grad()
            l.backward()
            params = [p for p in model.parameters() if p.requires_grad]
            norm = torch.sqrt(sum(torch.sum(p.grad ** 2) for p in params))
            if norm > 1:
                for p in params:
                    p.grad[:] *= 1 / norm
            opt.step()
            loss, done = l.item(), done + 1
            if done >= batches:
                break
    return model.eval(), data, loss


# --- command line ----------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--d2l', help='d2l_reference.py or its directory (default: $ATTNVIZ_D2L_DIR, '
                                  'else ../shared/bench beside the repository)')
    ap.add_argument('--threads', type=int, default=0, help='CPU threads for torch (default: torch\'s choice)')
    sub = ap.add_subparsers(dest='command', required=True)
    t = sub.add_parser('train', help='train d2l\'s model for some batches and save it as safetensors')
    t.add_argument('data', help='tab-separated pairs (Tatoeba / manythings)')
    t.add_argument('--out', required=True, help='FILE.safetensors to write')
    for name, default, kind in (('batches', 50, int), ('num-steps', 9, int), ('embed', 32, int),
                                ('hidden', 32, int), ('layers', 2, int), ('dropout', 0.2, float),
                                ('lr', 0.005, float), ('batch', 64, int), ('num-train', 512, int),
                                ('num-val', 128, int), ('seed', 0, int)):
        t.add_argument('--' + name, type=kind, default=default, help=f'(default {default})')
    r = sub.add_parser('translate', help='load a file into d2l\'s classes and translate greedily')
    r.add_argument('model', help='FILE.safetensors (from this tool or attnviz-cli export)')
    r.add_argument('sentences', nargs='*', help='sentences (default: one per line on stdin)')
    r.add_argument('--max-length', type=int, default=0, help='output steps (default: num_steps, else 10)')
    r.add_argument('--json', help='write the results here instead of stdout')
    a = ap.parse_args(argv)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    try:
        import_d2l(a.d2l)
    except FileNotFoundError as e:
        print(f'd2l_safetensors.py: error: {e}', file=sys.stderr)
        return 1
    if a.command == 'train':
        t0 = time.perf_counter()
        model, data, loss = train(a.data, a.batches, a.num_steps, a.embed, a.hidden, a.layers, a.dropout, a.lr,
                                  a.batch, a.num_train, a.num_val, a.seed)
        config = save(model, data.src_vocab, data.tgt_vocab, a.num_steps, a.out, a.dropout)
        print(json.dumps({'out': a.out, 'batches': a.batches, 'last_loss': loss, 'src_vocab': len(data.src_vocab),
                          'tgt_vocab': len(data.tgt_vocab), 'config': config,
                          'seconds': round(time.perf_counter() - t0, 2)}))
        return 0
    sentences = a.sentences or [line.rstrip('\n') for line in sys.stdin if line.strip()]
    try:
        model, src_vocab, tgt_vocab, config = load(a.model)
    except (ValueError, RuntimeError) as e:
        print(f'd2l_safetensors.py: error: {e}', file=sys.stderr)
        return 1
    text = json.dumps(translate(model, src_vocab, tgt_vocab, config, sentences, a.max_length), ensure_ascii=False)
    if a.json:
        Path(a.json).write_text(text + '\n', encoding='utf-8')
    else:
        print(text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
