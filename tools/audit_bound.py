#!/usr/bin/env python3
"""Re-measures the memory bound's crafted cases of issue 40 (peak RSS, wall time, outcome).

    audit_bound.py ATTNVIZ_CLI WORK_DIR [--only NAME ...] [--timeout S] [--as-limit-gb G]

Copies ATTNVIZ_CLI into WORK_DIR (so that a rebuild does not change it mid-run; it finds
LibTorch by absolute rpath), builds every crafted input there with that copy (tiny models
trained for 2 batches, a d2l export with "num_steps" edited to 1000, long corpora and stdin
lines), then runs each case as a child process, one at a time, and prints one JSON object:
the machine, the CLI's version and per case {name, class, before (issue 40's figure),
command, exit_code, peak_rss_mb (os.wait4's ru_maxrss), seconds, stderr_first_line, outcome}.

Every child runs under RLIMIT_AS (as `prlimit --as=` / `ulimit -v` would set it; 8 GiB by
default) and a hard timeout (300 s by default), so a regression cannot take the machine down:
a case that hits either is reported, not hidden. ATTNVIZ_MEMORY_BOUND is removed from the
children's environment: they run under the default bound (2 GiB).

Python 3, stdlib only. Needs nothing built but the CLI.
"""
import argparse
import json
import os
import platform
import resource
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

GIB = 1 << 30
BOUND_MB = 2048  # the default bound the README promises (2 GiB)

# The tiny models: trained for 2 batches (untrained in effect: the Transformer never emits
# <eos>, so it decodes to --max-length).
TINY_TRANSFORMER = ['--arch', 'transformer', '--hidden', '16', '--heads', '4', '--ffn', '16', '--layers', '2']
TINY_RNN = ['--arch', 'rnn', '--hidden', '16', '--embed', '16']
HEADS_8x64 = ['--arch', 'transformer', '--hidden', '64', '--heads', '64', '--ffn', '64', '--layers', '8']
SYMBOLS = list('abcdefghij')  # the reverse task's source vocabulary


def words(n, offset=0):
    return ' '.join(SYMBOLS[(offset + 7 * i) % len(SYMBOLS)] for i in range(n))


# ---------------------------------------------------------------- safetensors, stdlib only

def read_safetensors_header(path):
    data = Path(path).read_bytes()
    n = struct.unpack('<Q', data[:8])[0]
    return json.loads(data[8:8 + n]), data[8 + n:]


def write_safetensors(path, header, body):
    raw = json.dumps(header, separators=(',', ':')).encode()
    raw += b' ' * (-len(raw) % 8)  # the data stays 8-byte aligned, as safetensors writes it
    Path(path).write_bytes(struct.pack('<Q', len(raw)) + raw + body)


def set_d2l_num_steps(src, dst, num_steps):
    """A d2l safetensors file (export's layout) whose config says "num_steps": N."""
    header, body = read_safetensors_header(src)
    config = json.loads(header['__metadata__']['config'])
    config['num_steps'] = num_steps
    header['__metadata__']['config'] = json.dumps(config, separators=(',', ':'))
    write_safetensors(dst, header, body)


def never_ending_d2l(src, dst):
    """A d2l safetensors file whose output layer's <eos> bias is -1e4: it never ends a sentence."""
    header, body = read_safetensors_header(src)
    vocab = json.loads(header['__metadata__']['tgt_vocab'])
    bias = header['decoder.dense.bias']
    assert bias['dtype'] == 'F32', bias
    at = bias['data_offsets'][0] + 4 * vocab.index('<eos>')
    body = body[:at] + struct.pack('<f', -1e4) + body[at + 4:]
    write_safetensors(dst, header, body)


# ---------------------------------------------------------------- running a child

def run_child(argv, cwd, stdin_path=None, stdout_path=None, timeout=300.0, as_limit=8 * GIB, env=None):
    """Runs argv; returns {exit_code, signal, timed_out, peak_rss_mb, seconds, stderr}."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (as_limit, as_limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    stdin = open(stdin_path, 'rb') if stdin_path else subprocess.DEVNULL
    stdout = open(stdout_path, 'wb') if stdout_path else subprocess.DEVNULL
    err_path = Path(cwd) / '.stderr.tmp'
    with open(err_path, 'wb') as stderr:
        start = time.monotonic()
        p = subprocess.Popen(argv, cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr, env=env,
                             preexec_fn=limit, start_new_session=True)
        timed_out = False
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid == p.pid:
                break
            if time.monotonic() - start > timeout:
                timed_out = True
                os.killpg(p.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(p.pid, 0)
                break
            time.sleep(0.02)
        seconds = time.monotonic() - start
        p.returncode = 0  # reaped by wait4: keep Popen from waiting again
    for f in (stdin, stdout):
        if hasattr(f, 'close'):
            f.close()
    err = err_path.read_bytes().decode('utf-8', 'replace')
    err_path.unlink()
    return {
        'exit_code': os.waitstatus_to_exitcode(status),
        'signal': os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        'timed_out': timed_out,
        'peak_rss_mb': round(usage.ru_maxrss / 1024, 1),
        'seconds': round(seconds, 2),
        'stderr': err,
    }


def first_line(text):
    for line in text.splitlines():
        if line.strip():
            return line if len(line) <= 400 else line[:400] + '...'
    return ''


# ---------------------------------------------------------------- inputs

class Inputs:
    """Builds the crafted inputs in WORK_DIR with the CLI itself, each once, on demand."""

    def __init__(self, cli, work):
        self.cli, self.work = cli, work
        self.built = {}

    def path(self, name):
        return self.work / name

    def _cli(self, args):
        r = subprocess.run([str(self.cli)] + args, cwd=self.work, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f'building inputs: {shlex.join(args)} failed ({r.returncode}): {r.stderr.strip()}')

    def model(self, name, arch_args, task='reverse'):
        path = self.path(name)
        if name not in self.built:
            self._cli(['train', '--task', task, *arch_args, '--epochs', '1', '--max-batches', '2',
                       '--seed', '0', '--save', name, '-q'])
            self.built[name] = path
        return path

    def tiny(self):
        return self.model('tiny_transformer.ckpt', TINY_TRANSFORMER)

    def rnn(self):
        return self.model('tiny_rnn.ckpt', TINY_RNN)

    def heads(self):
        return self.model('heads_8x64.ckpt', HEADS_8x64)

    def d2l_tiny(self):
        name = 'd2l_tiny.safetensors'
        if name not in self.built:
            self.tiny()
            self._cli(['export', '--model', 'tiny_transformer.ckpt', '--out', name])
            self.built[name] = self.path(name)
        return self.built[name]

    def d2l_num_steps(self):
        name = 'd2l_num_steps_1000.safetensors'
        if name not in self.built:
            set_d2l_num_steps(self.d2l_tiny(), self.path(name), 1000)
            self.built[name] = self.path(name)
        return self.built[name]

    def never_ends(self):
        name = 'never_ends.safetensors'
        if name not in self.built:
            never_ending_d2l(self.d2l_tiny(), self.path(name))
            self.built[name] = self.path(name)
        return self.built[name]

    def text(self, name, make):
        if name not in self.built:
            with open(self.path(name), 'w') as f:
                make(f)
            self.built[name] = self.path(name)
        return self.built[name]

    def lines_64x1000(self):
        return self.text('lines_64x1000.txt', lambda f: f.writelines(words(1000, i) + '\n' for i in range(64)))

    def sentence_1000(self):
        return self.text('sentence_1000.txt', lambda f: f.write(words(1000) + '\n'))

    def corpus(self, long_words):
        # 20 short pairs and, on line 21, a source of `long_words` words (4,900: 9,799 bytes; the
        # corpus reader skips lines over 10,000 bytes) and a short target.
        def make(f):
            for i in range(20):
                s = words(4 + i % 5, i)
                f.write(s + '\t' + ' '.join(reversed(s.split())) + '\n')
            f.write(words(long_words) + '\t' + words(5) + '\n')
        return self.text(f'corpus_21_lines_{long_words}.tsv', make)

    def corpus_4900(self):
        return self.corpus(4900)

    def stdin_line(self, name, size):
        # One line of `size` bytes of words ("a b c ..."), then a newline.
        def make(f):
            unit = (words(50) + ' ') * 200
            left = size
            while left > 0:
                chunk = unit[:left]
                f.write(chunk)
                left -= len(chunk)
            f.write('\n')
        return self.text(name, make)


# ---------------------------------------------------------------- the cases

def cases(inp):
    """(name, class, before, argv-after-the-cli, stdin-file or None, extra-output-files) for each case."""
    tiny, rnn = 'tiny_transformer.ckpt', 'tiny_rnn.ckpt'
    never = 'never_ends.safetensors'  # the tiny Transformer, exported, its <eos> bias -1e4
    return [
        dict(name='baseline', cls='baseline: LibTorch and the CLI alone',
             before='(none: the reference the others are read against)',
             prepare=inp.tiny, args=['translate', '--model', tiny, 'a b c d e']),
        dict(name='translate_64x1000_transformer',
             cls='Transformer decoding: encoder and decoder self-attention uncounted',
             before='4.4 GB (64 lines of 1,000 words through a 93 KB Transformer checkpoint)',
             prepare=lambda: (inp.tiny(), inp.lines_64x1000()), args=['translate', '--model', tiny],
             stdin='lines_64x1000.txt'),
        dict(name='translate_64x1000_rnn', cls='the RNN on the same input (the bound held for it)',
             before='572 MB (the RNN on the same 64 lines)',
             prepare=lambda: (inp.rnn(), inp.lines_64x1000()), args=['translate', '--model', rnn],
             stdin='lines_64x1000.txt'),
        dict(name='never_ends_max_length_1000_attention_out',
             cls='Transformer decoding: per-head maps kept for output',
             before='passes 12 GB (a Transformer that never ends its output at --max-length 1000 with --attention-out)',
             prepare=inp.never_ends,
             args=['translate', '--model', never, '--max-length', '1000', '--attention-out', 'never_ends.json',
                   'a b c d e'],
             outputs=['never_ends.json'], check_length=1000),
        dict(name='checkpoint_8_blocks_64_heads_one_word', cls='sizes from a file: blocks and heads',
             before='2.6 GB (a valid 1.6 MB checkpoint of 8 blocks x 64 heads, one word)',
             prepare=inp.heads, args=['translate', '--model', 'heads_8x64.ckpt', 'a']),
        dict(name='checkpoint_8_blocks_64_heads_one_word_attention_out',
             cls='sizes from a file: blocks and heads, every map kept',
             before='2.6 GB (a valid 1.6 MB checkpoint of 8 blocks x 64 heads, one word)',
             prepare=inp.heads,
             args=['translate', '--model', 'heads_8x64.ckpt', '--attention-out', 'heads_att.json', 'a'],
             outputs=['heads_att.json']),
        dict(name='d2l_num_steps_1000', cls='sizes from a file: d2l num_steps',
             before='the defect fixed for the RNN came back ("num_steps": 1000 in a 93 KB d2l file)',
             prepare=inp.d2l_num_steps,
             args=['translate', '--model', 'd2l_num_steps_1000.safetensors', 'a b c d e']),
        dict(name='d2l_num_steps_1000_attention_out', cls='sizes from a file: d2l num_steps, every map kept',
             before='the defect fixed for the RNN came back ("num_steps": 1000 in a 93 KB d2l file)',
             prepare=inp.d2l_num_steps,
             args=['translate', '--model', 'd2l_num_steps_1000.safetensors', '--attention-out', 'd2l_att.json',
                   'a b c d e'],
             outputs=['d2l_att.json']),
        dict(name='train_21_lines_one_4900_words', cls='training: Transformer step (forward, autograd, backward)',
             before='passes 14 GB (training on a 21-line corpus with one 4,900-word line)',
             prepare=inp.corpus_4900,
             args=['train', '--data', 'corpus_21_lines_4900.tsv', *TINY_TRANSFORMER, '--epochs', '1',
                   '--seed', '0', '--save', 'trained_4900.ckpt'],
             outputs=['trained_4900.ckpt']),
        dict(name='train_21_lines_one_2500_words', cls='training: a long pair that fits the bound alone',
             before='(crafted here: under the --max-length 2601 the refusal above suggests)',
             prepare=lambda: inp.corpus(2500),
             args=['train', '--data', 'corpus_21_lines_2500.tsv', *TINY_TRANSFORMER, '--epochs', '1',
                   '--seed', '0', '--save', 'trained_2500.ckpt'],
             outputs=['trained_2500.ckpt']),
        dict(name='agreement_21_lines_one_4900_words', cls='attribution over a corpus (agreement)',
             before='7.7 GB (agreement over such a corpus)',
             prepare=lambda: (inp.tiny(), inp.corpus_4900()),
             args=['agreement', '--model', tiny, '--data', 'corpus_21_lines_4900.tsv', '--split', 'all']),
        dict(name='attribute_1000_words', cls='attribution (all four methods, --ig-steps auto)',
             before='passes 12 GB (a 1,000-word sentence under attribute)',
             prepare=lambda: (inp.tiny(), inp.sentence_1000()),
             args=['attribute', '--model', tiny, '--out', 'attribute_1000.json'], stdin='sentence_1000.txt',
             outputs=['attribute_1000.json'], ig_report=True),
        # attribute_1000_words method by method: where its time goes.
        *[dict(name=f'attribute_1000_words_{m}', cls='attribution, one method (where the time goes)',
               before='passes 12 GB (a 1,000-word sentence under attribute, all methods)',
               prepare=lambda: (inp.tiny(), inp.sentence_1000()),
               args=['attribute', '--model', tiny, '--method', m, '--out', f'attribute_1000_{m}.json'],
               stdin='sentence_1000.txt', outputs=[f'attribute_1000_{m}.json'], ig_report=True)
          for m in ('saliency', 'occlusion', 'integrated-gradients')],
        dict(name='stdin_line_80mb', cls='lines from standard input',
             before='3.8 GB reached before the refusal (an 80 MB line on standard input)',
             prepare=lambda: (inp.tiny(), inp.stdin_line('line_80mb.txt', 80 * 1000 * 1000)),
             args=['translate', '--model', tiny], stdin='line_80mb.txt'),
        dict(name='stdin_line_4mb', cls='lines from standard input',
             before='estimated 1.3 GB, used 3.3 GB (a 4 MB line)',
             prepare=lambda: (inp.tiny(), inp.stdin_line('line_4mb.txt', 4 * 1000 * 1000)),
             args=['translate', '--model', tiny], stdin='line_4mb.txt'),
        dict(name='stdin_line_1mb', cls='lines from standard input: just under the 1 MiB line limit',
             before='(crafted here: the longest line stdin accepts, 1,000,000 bytes = 500,000 words)',
             prepare=lambda: (inp.tiny(), inp.stdin_line('line_1mb.txt', 1000 * 1000)),
             args=['translate', '--model', tiny], stdin='line_1mb.txt'),
        dict(name='intervene_uniform_max_length_1000', cls='interventions: the linear reference',
             before='0.6 s (--intervene uniform --max-length 1000)',
             prepare=inp.never_ends,
             args=['translate', '--model', never, '--max-length', '1000', '--intervene', 'uniform', 'a b c d e'],
             check_length=1000),
        dict(name='intervene_zero_max_length_1000', cls='interventions that recomputed every earlier step',
             before='42.7 s against 0.6 s for uniform (--intervene zero=1 --max-length 1000)',
             prepare=inp.never_ends,
             args=['translate', '--model', never, '--max-length', '1000', '--intervene', 'zero=1', 'a b c d e'],
             check_length=1000),
        dict(name='intervene_permute_max_length_1000', cls='interventions that recomputed every earlier step',
             before='(same class as zero=: quadratic in the output length)',
             prepare=inp.never_ends,
             args=['translate', '--model', never, '--max-length', '1000', '--intervene', 'permute', 'a b c d e'],
             check_length=1000),
    ]


def last_line(text):
    lines = [l for l in text.replace('\r', '\n').splitlines() if l.strip()]
    return (lines[-1] if len(lines[-1]) <= 400 else lines[-1][:400] + '...') if lines else ''


def outcome(r, rss_limit_mb=2560, slow_s=60):
    if r['timed_out']:
        return 'DEFECT: timed out'
    if r['signal'] is not None:
        return f'DEFECT: killed by signal {r["signal"]}'
    if r['peak_rss_mb'] > rss_limit_mb:
        return f'DEFECT: peak RSS {r["peak_rss_mb"]} MB over {rss_limit_mb} MB'
    if r['seconds'] > slow_s:
        return f'DEFECT?: ran {r["seconds"]} s'
    if r['exit_code'] == 0:
        return 'ran within the bound'
    if r['exit_code'] in (1, 2) and len([l for l in r['stderr'].splitlines() if l.strip()]) == 1:
        return f'refused (exit {r["exit_code"]}, one line)'
    return f'failed (exit {r["exit_code"]})'


def machine():
    model = ''
    try:
        for line in Path('/proc/cpuinfo').read_text().splitlines():
            if line.startswith('model name'):
                model = line.split(':', 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        for line in Path('/proc/meminfo').read_text().splitlines():
            if line.startswith('MemTotal:'):
                mem_gb = round(int(line.split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    return {
        'cpu': model or platform.processor(),
        'cores': os.cpu_count(),
        'cores_usable': len(os.sched_getaffinity(0)),
        'memory_gb': mem_gb,
        'load_average_at_start': [round(x, 2) for x in os.getloadavg()],
        'kernel': platform.release(),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('cli', help='attnviz-cli (copied into WORK_DIR first; the copy runs)')
    ap.add_argument('work', help='folder for the crafted inputs and outputs (created)')
    ap.add_argument('--only', nargs='+', metavar='NAME', help='run only these cases (names as in the output)')
    ap.add_argument('--timeout', type=float, default=300, help='seconds per case before it is killed (300)')
    ap.add_argument('--as-limit-gb', type=float, default=8, help="each child's RLIMIT_AS in GiB (8)")
    ap.add_argument('--list', action='store_true', help='list the case names and exit')
    a = ap.parse_args()

    work = Path(a.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    cli = work / 'attnviz-cli'
    if Path(a.cli).resolve() != cli:
        shutil.copy2(a.cli, cli)
    inp = Inputs(cli, work)
    all_cases = cases(inp)
    if a.list:
        print('\n'.join(c['name'] for c in all_cases))
        return 0
    if a.only:
        unknown = set(a.only) - {c['name'] for c in all_cases}
        if unknown:
            ap.error('unknown case(s): ' + ', '.join(sorted(unknown)))
        all_cases = [c for c in all_cases if c['name'] in a.only]

    env = {k: v for k, v in os.environ.items() if k != 'ATTNVIZ_MEMORY_BOUND'}
    version = subprocess.run([str(cli), '--version'], capture_output=True, text=True).stdout.strip()
    as_limit = int(a.as_limit_gb * GIB)
    results = []
    for c in all_cases:  # one at a time: never in parallel
        print(f'audit_bound: {c["name"]} ...', file=sys.stderr, flush=True)
        c['prepare']()
        argv = [str(cli), *c['args']]
        stdout_path = work / (c['name'] + '.stdout')
        r = run_child(argv, work, stdin_path=work / c['stdin'] if c.get('stdin') else None,
                      stdout_path=stdout_path, timeout=a.timeout, as_limit=as_limit, env=env)
        command = shlex.join(['attnviz-cli', *c['args']]) + (f' < {c["stdin"]}' if c.get('stdin') else '')
        entry = {
            'name': c['name'],
            'class': c['cls'],
            'before': c['before'],
            'command': command,
            'exit_code': r['exit_code'],
            'peak_rss_mb': r['peak_rss_mb'],
            'seconds': r['seconds'],
            'stderr_first_line': first_line(r['stderr']),
            'stderr_last_line': last_line(r['stderr']),
            'stderr_lines': len([l for l in r['stderr'].splitlines() if l.strip()]),
            'outcome': outcome(r),
        }
        if r['timed_out']:
            entry['timed_out_after_s'] = a.timeout
        if r['signal'] is not None:
            entry['signal'] = r['signal']
        if c.get('stdin'):
            entry['stdin_bytes'] = (work / c['stdin']).stat().st_size
        out = stdout_path.read_bytes() if stdout_path.exists() else b''
        if c.get('check_length') and r['exit_code'] == 0:
            # The model never ends its output: the translation runs to --max-length (<eos> not printed).
            entry['output_tokens'] = len(out.decode('utf-8', 'replace').split())
        for name in c.get('outputs', []):
            p = work / name
            if p.exists() and c.get('ig_report') and name.endswith('.json'):
                try:  # integrated gradients' points per output step (auto), from the file
                    doc = json.loads(p.read_text())
                    entry['output_steps'] = [len(x['steps']) for x in doc]
                    points = [st['ig_steps'] for x in doc for st in x['steps'] if st.get('ig_steps') is not None]
                    if points:
                        entry['ig_points_per_step'] = points
                except (ValueError, KeyError, TypeError):
                    pass
            if p.exists():
                entry.setdefault('output_files_bytes', {})[name] = p.stat().st_size
                p.unlink()  # attention files of 1,000 steps are large: keep the disk free
        stdout_path.unlink(missing_ok=True)
        results.append(entry)
        print(f'audit_bound: {c["name"]}: exit {entry["exit_code"]}, {entry["peak_rss_mb"]} MB, '
              f'{entry["seconds"]} s: {entry["outcome"]}', file=sys.stderr, flush=True)

    sizes = {name: p.stat().st_size for name, p in sorted(inp.built.items()) if p.exists()}
    report = {
        'tool': 'tools/audit_bound.py',
        'machine': machine(),
        'cli_version': version,
        'memory_bound': 'default, 2 GiB (ATTNVIZ_MEMORY_BOUND removed from the environment)',
        'guard': f'each child under RLIMIT_AS = {a.as_limit_gb:g} GiB (as prlimit --as / ulimit -v) and a '
                 f'{a.timeout:g} s timeout (SIGKILL); run one at a time',
        'measured': 'peak_rss_mb: ru_maxrss of the child from os.wait4; seconds: wall time',
        'inputs_bytes': sizes,
        'cases': results,
    }
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == '__main__':
    sys.exit(main())
