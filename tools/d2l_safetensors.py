#!/usr/bin/env python3
"""d2l's Bahdanau seq2seq and d2l's Transformer (PyTorch) <-> attnviz, through one safetensors file.

The file: the tensors of the d2l model's state_dict() under their own names
(encoder.embedding.weight, encoder.rnn.weight_ih_l0, ..., decoder.attention.W_q.weight,
decoder.dense.bias; a Transformer's encoder.blks.block0.attention.W_q.weight, ...,
decoder.blks.block0.attention2.W_o.weight, ...), and in __metadata__ three JSON strings:
  src_vocab, tgt_vocab  the vocabularies' idx_to_token lists, in index order
  config                {"embed", "hidden", "layers", "num_steps", "dropout", "cell", "scoring", ...}
                        or {"arch": "transformer", "hidden", "layers", "heads", "ffn", "num_steps",
                        "dropout", "d2l_decode_positions"}
`attnviz-cli translate --model FILE.safetensors` reads it; `attnviz-cli export` writes it.
A Transformer's "d2l_decode_positions" (absent: true) says how it decodes: true, as d2l's
predict_step (every output token gets position 0's encoding); false, at true positions (attnviz's
own models, trained that way), which d2l's classes compute by running the whole prefix again
under the causal mask of training, dropout off.

As a module:
  save(model, src_vocab, tgt_vocab, num_steps, path)   a d2l Seq2Seq + d2l Vocabs -> file
  load(path) -> (model, src_vocab, tgt_vocab, config)  file -> d2l classes (load_state_dict)
  translate(model, src_vocab, tgt_vocab, config, sentences, max_length)
                                                      d2l's predict_step greedy loop, with attention
As a program:
  d2l_safetensors.py train DATA.tsv --out FILE.safetensors [--batches 50 --num-steps 9 ...]
  d2l_safetensors.py translate FILE.safetensors [SENTENCE ...] [--max-length N] [--json OUT]
  d2l_safetensors.py train DATA.tsv --arch transformer --out FILE [--heads 4 --ffn 64 ...]
  d2l_safetensors.py grads FILE.safetensors DATA.tsv --json OUT
                          d2l's training loss of one batch of every pair of DATA, and every gradient
The d2l classes come from d2l_reference.py (and d2l_transformer_reference.py beside it), found with
--d2l DIR_OR_FILE, else $ATTNVIZ_D2L_DIR, else ../shared/bench next to the repository.
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
_d2l_transformer = None


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


def import_d2l_transformer():
    """Imports d2l_transformer_reference.py from beside d2l_reference.py (import_d2l's directory)."""
    global _d2l_transformer
    if _d2l_transformer is None:
        path = Path(import_d2l().__file__).parent / 'd2l_transformer_reference.py'
        if not path.is_file():
            raise FileNotFoundError(f'd2l_transformer_reference.py not found at {path}')
        spec = importlib.util.spec_from_file_location('d2l_transformer_reference', path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _d2l_transformer = module
    return _d2l_transformer


def is_transformer(model):
    return hasattr(model.encoder, 'blks')


# --- save / load -------------------------------------------------------------------

def save(model, src_vocab, tgt_vocab, num_steps, path, dropout=None, decode_positions=None):
    """Writes a d2l Seq2Seq (encoder Seq2SeqEncoder, decoder Seq2SeqAttentionDecoder; or
    TransformerEncoder, TransformerDecoder) and its vocabularies. num_steps: the length d2l
    pads sources to (0 or None: natural lengths). decode_positions (a Transformer's
    d2l_decode_positions): None leaves it out (d2l's predict_step)."""
    if is_transformer(model):
        blk = model.encoder.blks.block0
        config = {'arch': 'transformer', 'hidden': model.encoder.num_hiddens, 'layers': len(model.encoder.blks),
                  'heads': blk.attention.num_heads, 'ffn': blk.ffn.dense1.out_features,
                  'dropout': float(blk.addnorm1.dropout.p if dropout is None else dropout), 'level': 'word'}
        if decode_positions is not None:
            config['d2l_decode_positions'] = bool(decode_positions)
    else:
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


def build_transformer(src_size, tgt_size, config):
    """d2l's Transformer of a file's config (the classes of d2l_transformer_reference.py)."""
    d2l, tf = import_d2l(), import_d2l_transformer()
    H, F, heads, L = config['hidden'], config['ffn'], config['heads'], config['layers']
    dropout = config.get('dropout', 0.0)
    enc = tf.TransformerEncoder(src_size, H, F, heads, L, dropout)
    dec = tf.TransformerDecoder(tgt_size, H, F, heads, L, dropout)
    return d2l.Seq2Seq(enc, dec, 0)


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
    if config.get('arch') == 'transformer':
        src_vocab, tgt_vocab = _vocab(json.loads(meta['src_vocab'])), _vocab(json.loads(meta['tgt_vocab']))
        model = build_transformer(len(src_vocab), len(tgt_vocab), config)
        model.tgt_pad = tgt_vocab['<pad>']
        model.load_state_dict(state)  # strict; the lazy layers take the file's shapes
        return model.to(device).eval(), src_vocab, tgt_vocab, config
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


def _heads(w, batch, heads):
    """d2l's [B*h, q, k] attention weights as [B, h, q, k]."""
    return w.reshape(batch, heads, w.shape[-2], w.shape[-1])


@torch.no_grad()
def translate_transformer(model, src_vocab, tgt_vocab, config, tokenized, max_length):
    """Greedy decoding in d2l's classes, every attention map recorded. d2l_decode_positions
    (default true): d2l's predict_step, one token a step with its cache, each at position 0.
    false: true positions -- the whole prefix again at each step in training mode (the causal
    mask of d2l's training), every dropout off. Returns (ids [B, steps], maps) with maps
    {'cross', 'decoder_self'}: [layer][step] -> [B, h, keys] and 'encoder_self': [layer] ->
    [B, h, S, S]."""
    device = next(model.parameters()).device
    heads, L = config['heads'], config['layers']
    src = torch.tensor([src_vocab[s] for s in tokenized], device=device)
    valid_len = (src != src_vocab['<pad>']).type(torch.int32).sum(1)
    B = len(tokenized)
    predict_step = config.get('d2l_decode_positions', True)
    outputs = [torch.full((B, 1), tgt_vocab['<bos>'], device=device)]
    maps = {'cross': [[] for _ in range(L)], 'decoder_self': [[] for _ in range(L)]}
    if predict_step:
        enc_all = model.encoder(src, valid_len)
        state = model.decoder.init_state(enc_all, valid_len)
    else:
        model.train()
        for m in model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.eval()
        enc_all = model.encoder(src, valid_len)
    maps['encoder_self'] = [_heads(w, B, heads) for w in model.encoder.attention_weights]
    for step in range(max_length):
        if predict_step:
            Y, state = model.decoder(outputs[-1], state)
        else:
            state = model.decoder.init_state(enc_all, valid_len)
            Y, _ = model.decoder(torch.cat(outputs, 1), state)
        outputs.append(Y[:, -1:].argmax(2))
        for l in range(L):
            self_w, cross_w = model.decoder._attention_weights[0][l], model.decoder._attention_weights[1][l]
            maps['decoder_self'][l].append(_heads(self_w, B, heads)[:, :, -1, :step + 1])
            maps['cross'][l].append(_heads(cross_w, B, heads)[:, :, -1, :])
    model.eval()
    return torch.cat(outputs[1:], 1).cpu(), maps


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
    if config.get('arch') == 'transformer':
        for group in groups:
            results += _transformer_results(model, src_vocab, tgt_vocab, config, group, max_length)
        for r, s in zip(results, sentences):
            r['input'] = s
        return results
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


def _transformer_results(model, src_vocab, tgt_vocab, config, group, max_length):
    """translate()'s dicts for a Transformer, with 'maps': every map as attnviz's --attention-out
    lists them (kind, layer, head, weights over the real source positions; decoder rows over the
    steps so far), and 'weights', the primary map: the mean of the last layer's cross heads."""
    ids, maps = translate_transformer(model, src_vocab, tgt_vocab, config, group, max_length)
    heads, L = config['heads'], config['layers']
    results = []
    for b, toks in enumerate(group):
        n = sum(1 for t in toks if t != '<pad>')
        out = []
        for i in ids[b].tolist():
            out.append(tgt_vocab.idx_to_token[i])
            if out[-1] == '<eos>':
                break
        steps = len(out)
        entries, masked = [], 0.0
        for l in range(L):
            cross = torch.stack([maps['cross'][l][t][b] for t in range(steps)], 1)  # [h, steps, S]
            if cross.shape[-1] > n:
                masked = max(masked, float(cross[:, :, n:].max()))
            for h in range(heads):
                entries.append({'kind': 'cross', 'layer': l, 'head': h, 'weights': cross[h, :, :n].tolist()})
            for h in range(heads):
                entries.append({'kind': 'decoder_self', 'layer': l, 'head': h,
                                'weights': [maps['decoder_self'][l][t][b, h].tolist() for t in range(steps)]})
            enc = maps['encoder_self'][l][b]  # [h, S, S]
            if enc.shape[-1] > n:
                masked = max(masked, float(enc[:, :n, n:].max()))
            for h in range(heads):
                entries.append({'kind': 'encoder_self', 'layer': l, 'head': h, 'weights': enc[h, :n, :n].tolist()})
        primary = torch.stack([maps['cross'][L - 1][t][b] for t in range(steps)], 1).mean(0)[:, :n]
        results.append({'source': [src_vocab.idx_to_token[src_vocab[t]] for t in toks[:n]], 'output': out,
                        'text': ' '.join(t for t in out if t != '<eos>'), 'weights': primary.tolist(),
                        'maps': entries, 'masked_max': masked})
    return results


def gradients(model, src_vocab, tgt_vocab, config, data_path):
    """d2l's training loss (Seq2Seq.loss, the mean over the real target tokens) of one batch holding
    every pair of data_path, each side pad_or_trim(tokens + <eos>, num_steps) as d2l's Data does
    (num_steps: the config's, else the longest side + 2), in training mode with every dropout off;
    and the gradient of every parameter by name. Returns (loss, {name: grad})."""
    d2l = import_d2l()
    with open(data_path, encoding='utf-8') as f:
        raw = '\n'.join('\t'.join(line.split('\t')[:2]) for line in f.read().split('\n'))
    src_tok, tgt_tok = d2l.tokenize(d2l.preprocess(raw))
    num_steps = config.get('num_steps') or max(len(s) for s in src_tok + tgt_tok) + 2
    pad = lambda seq: seq[:num_steps] if len(seq) > num_steps else seq + ['<pad>'] * (num_steps - len(seq))
    src = torch.tensor([src_vocab[pad(s)] for s in src_tok])
    tgt = torch.tensor([tgt_vocab[['<bos>'] + pad(t)] for t in tgt_tok])
    valid_len = (src != src_vocab['<pad>']).type(torch.int32).sum(1)
    model.train()
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.eval()
    model.tgt_pad = tgt_vocab['<pad>']
    model.zero_grad()
    loss = model.loss(model(src, tgt[:, :-1], valid_len), tgt[:, 1:])
    loss.backward()
    model.eval()
    return float(loss.detach()), {name: p.grad.detach().clone() for name, p in model.named_parameters()}


# --- training ----------------------------------------------------------------------------

def train(data_path, batches, num_steps=9, embed=32, hidden=32, layers=2, dropout=0.2, lr=0.005, batch=64,
          num_train=512, num_val=128, seed=0, arch='rnn', heads=4, ffn=64):
    """d2l's training (Data, Adam, gradient clipping at norm 1) for a number of batches, cycling
    the epochs (arch 'transformer': d2l's Transformer of width hidden, `layers` blocks, `heads`
    heads, feed-forward ffn); returns (model in eval mode, data, last training loss)."""
    d2l = import_d2l()
    torch.manual_seed(seed)
    with open(data_path, encoding='utf-8') as f:  # the first two columns, as d2l_reference.main()
        raw = '\n'.join('\t'.join(line.split('\t')[:2]) for line in f.read().split('\n'))
    data = d2l.Data(raw, num_steps, num_train, num_val)
    if arch == 'transformer':
        model = build_transformer(len(data.src_vocab), len(data.tgt_vocab),
                                  {'hidden': hidden, 'ffn': ffn, 'heads': heads, 'layers': layers, 'dropout': dropout})
        model.tgt_pad = data.tgt_vocab['<pad>']
    else:
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
    t.add_argument('--arch', default='rnn', choices=('rnn', 'transformer'), help='(default rnn)')
    t.add_argument('--heads', type=int, default=4, help='transformer: heads (default 4)')
    t.add_argument('--ffn', type=int, default=64, help='transformer: feed-forward width (default 64)')
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
    g = sub.add_parser('grads', help="d2l's loss and gradients of one batch of a file's pairs")
    g.add_argument('model', help='FILE.safetensors')
    g.add_argument('data', help='tab-separated pairs: one batch of all of them')
    g.add_argument('--json', required=True, help='write {loss, grads: {name: nested lists}} here')
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
                                  a.batch, a.num_train, a.num_val, a.seed, a.arch, a.heads, a.ffn)
        config = save(model, data.src_vocab, data.tgt_vocab, a.num_steps, a.out, a.dropout)
        print(json.dumps({'out': a.out, 'batches': a.batches, 'last_loss': loss, 'src_vocab': len(data.src_vocab),
                          'tgt_vocab': len(data.tgt_vocab), 'config': config,
                          'seconds': round(time.perf_counter() - t0, 2)}))
        return 0
    if a.command == 'grads':
        model, src_vocab, tgt_vocab, config = load(a.model)
        loss, grads = gradients(model, src_vocab, tgt_vocab, config, a.data)
        Path(a.json).write_text(json.dumps({'loss': loss, 'grads': {k: v.tolist() for k, v in grads.items()}}))
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
