"""What the d2l interop CTests share (tests/cli/interop_d2l.py for the RNN,
tests/cli/interop_d2l_transformer.py for the Transformer): running the tools, translating a
list of sentences with attnviz-cli and with tools/d2l_safetensors.py, and comparing the two
outputs' tokens and attention maps."""
import argparse
import json
import subprocess
import sys
from pathlib import Path

SKIP = 77         # CTest's SKIP_RETURN_CODE
TOLERANCE = 1e-5  # the largest difference of an attention weight, a loss or a gradient


def skip(why):
    print(f'SKIPPED: {why}')
    sys.exit(SKIP)


def require(files, data):
    """Exits with SKIP unless every path of `files` and the data file exist and this Python has
    torch and safetensors."""
    for f in files:
        if not Path(f).is_file():
            skip(f'no {f}')
    if not Path(data).is_file():
        skip(f'{data}: no such data file')
    try:
        import torch  # noqa: F401
        import safetensors  # noqa: F401
    except ImportError as e:
        skip(f'{sys.executable} lacks {e.name}')


def parse_args(batches, references):
    """The flags both interop scripts take (--cli, --tool, --d2l, --data, --batches); exits with
    SKIP unless the d2l `references` (file names beside d2l_reference.py), the data, torch and
    safetensors are there. Returns (arguments, the directory of the d2l code)."""
    ap = argparse.ArgumentParser()
    ap.add_argument('--cli', required=True)
    ap.add_argument('--tool', required=True)
    ap.add_argument('--d2l', required=True, help='d2l_reference.py or its directory')
    ap.add_argument('--data', required=True)
    ap.add_argument('--batches', type=int, default=batches)
    a = ap.parse_args()
    d2l = Path(a.d2l)
    d2l_dir = d2l if d2l.is_dir() else d2l.parent
    require([d2l_dir / r for r in references], a.data)
    return a, d2l_dir


def d2l_to_attnviz(a, d2l_dir, tmp, train_flags, sentences):
    """Direction 1: d2l's code trains a small model for --batches batches (num_steps 6, so several
    sentences are cut and the others read padding), tools/d2l_safetensors.py saves it, and
    attnviz-cli translates with that file as d2l does. Returns the report entry, with the maps compared."""
    num_steps = 6
    d2l_file = tmp / 'd2l.safetensors'
    trained = json.loads(run([sys.executable, a.tool, '--d2l', d2l_dir, '--threads', '1', 'train', a.data,
                              '--out', d2l_file, '--batches', a.batches, '--num-steps', num_steps,
                              '--num-train', 1000, '--num-val', 10, *train_flags]))
    theirs = d2l_translate(sys.executable, a.tool, d2l_dir, d2l_file, num_steps, tmp / 'd2l.json', sentences)
    ours = attnviz_translate(a.cli, d2l_file, num_steps, tmp / 'attnviz.json', sentences)
    worst, maps = compare('d2l -> attnviz', ours, theirs, len(sentences))
    return {'max_attention_diff': worst, 'maps_compared': maps, 'd2l_train_loss': trained['last_loss'],
            'translations': [' '.join(d['output']) for d in theirs]}


def run(cmd, **kw):
    """Runs cmd; exits with its output when it fails. Returns its stdout."""
    res = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if res.returncode != 0:
        sys.exit(f'command failed ({res.returncode}): {" ".join(map(str, cmd))}\n{res.stdout}\n{res.stderr}')
    return res.stdout


def attnviz_translate(cli, model, max_length, out, sentences):
    run([cli, '--threads', '1', 'translate', '--model', model, '--max-length', max_length,
         '--attention-out', out, *sentences])
    return json.loads(Path(out).read_text(encoding='utf-8'))


def d2l_translate(python, tool, d2l, model, max_length, out, sentences):
    run([python, tool, '--d2l', d2l, '--threads', '1', 'translate', model, *sentences, '--max-length', max_length,
         '--json', out])
    return json.loads(Path(out).read_text(encoding='utf-8'))


def rows_diff(where, a, b):
    """The largest difference of two matrices given as lists of rows; exits when their shapes differ."""
    if len(a) != len(b):
        sys.exit(f'{where}: {len(a)} rows in attnviz, {len(b)} in d2l')
    worst = 0.0
    for r, (ra, rb) in enumerate(zip(a, b)):
        if len(ra) != len(rb):
            sys.exit(f'{where}: row {r} has {len(ra)} weights in attnviz, {len(rb)} in d2l')
        worst = max([worst] + [abs(x - y) for x, y in zip(ra, rb)])
    return worst


def compare(what, ours, theirs, count):
    """Same source and output tokens for each of `count` sentences; the primary map and every map
    d2l lists ('maps', when it does) within TOLERANCE. Returns (largest difference, maps compared)."""
    assert len(ours) == len(theirs) == count, what
    worst, maps = 0.0, 0
    for a, d in zip(ours, theirs):
        where = f'{what}: "{d["input"]}"'
        if a['source'] != d['source']:
            sys.exit(f'{where}: source tokens differ: attnviz {a["source"]}, d2l {d["source"]}')
        if a['output'] != d['output']:
            sys.exit(f'{where}: translations differ: attnviz {a["output"]}, d2l {d["output"]}')
        if d['masked_max'] != 0.0:
            sys.exit(f'{where}: d2l gave padding a weight of {d["masked_max"]}')
        worst = max(worst, rows_diff(f'{where}, primary map', a['weights'], d['weights']))
        by_id = {(m['kind'], m['layer'], m['head']): m for m in a.get('attention_maps', [])}
        for m in d.get('maps', []):
            key = (m['kind'], m['layer'], m['head'])
            if key not in by_id:
                sys.exit(f'{where}: attnviz has no {key} map')
            worst = max(worst, rows_diff(f'{where}, {key}', by_id[key]['weights'], m['weights']))
            maps += 1
    if worst > TOLERANCE:
        sys.exit(f'{what}: attention differs by {worst:.3g} (tolerance {TOLERANCE})')
    return worst, maps
