#!/usr/bin/env bash
# Pretrained models on a GPU machine (docs/pretrained.md, docs/benchmarks.md): builds the
# headless CLI and the pretrained tests, makes the transformers fixtures, runs the tests on the
# CPU, compares CUDA with the CPU (translations and every attention map of the fixtures), then
# the decoding and fine-tuning benchmarks of an opus-mt-sized model on 2 CPU threads (pinned
# to two cores with taskset) and decoding on CUDA. Prints a summary; the JSON stays in OUT.
#
#   tools/gpu_pretrained.sh OUT [STEPS]      STEPS default "build fixtures tests cuda decode finetune"
#
# Environment: ATTNVIZ_PYTHON (python with torch, transformers, sentencepiece; default
# .venv/bin/python, else python3), CT2_WHEEL (a ctranslate2 wheel to pip install first when
# the python lacks it), JOBS (build jobs, default nproc), ATTNVIZ_BUILD (the build folder,
# default build/headless: e.g. build/release with a binary carried from another machine).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:?usage: tools/gpu_pretrained.sh OUT [STEPS]}"; mkdir -p "$OUT"
STEPS=" ${2:-build fixtures tests cuda decode finetune} "; want() { [[ "$STEPS" == *" $1 "* ]]; }
PY="${ATTNVIZ_PYTHON:-$ROOT/.venv/bin/python}"; [ -x "$PY" ] || PY=python3
JOBS="${JOBS:-$(nproc)}"
B="${ATTNVIZ_BUILD:-$ROOT/build/headless}"  # a build folder made elsewhere works too (its app/attnviz-cli)
C="$B/app/attnviz-cli"
FX="$B/tests/hf_fixtures"  # where attnviz_tests_pretrained looks (tests/CMakeLists.txt)
t0=$(date +%s); step() { echo "--- $(( $(date +%s) - t0 )) s: $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null || true
"$PY" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'

if want build; then
  step "build (headless preset: attnviz-cli, attnviz_tests_pretrained)"
  cmake --preset headless -DATTNVIZ_PYTHON="$PY" >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
  cmake --build "$B" -j "$JOBS" --target attnviz-cli attnviz_tests_pretrained >"$OUT/build.log" 2>&1 \
    || { grep -a -E 'error|FAILED' "$OUT/build.log" | head -30; exit 1; }
fi
if want fixtures; then
  step "fixtures (transformers makes the tiny Marian and M2M100)"
  "$PY" "$ROOT/tools/make_hf_fixtures.py" "$FX" >"$OUT/fixtures.log" 2>&1 || { tail -20 "$OUT/fixtures.log"; exit 1; }
fi
if want tests; then
  step "pretrained tests on the CPU"
  "$B/tests/attnviz_tests_pretrained" 2>&1 | tail -4
fi
if want cuda; then
  step "CUDA against the CPU: translations and every map of the fixtures"
  for m in marian m2m100; do
    lang=fra; [ "$m" = m2m100 ] && lang=fr
    for dev in cpu cuda; do
      "$C" translate --model "$FX/$m" --device "$dev" --target-lang "$lang" --beam 3 \
        --attention-out "$OUT/${m}_$dev.json" "the cat sees the dog" "a small house by the river" \
        >"$OUT/${m}_$dev.txt" 2>"$OUT/${m}_$dev.err" || { echo "$m on $dev failed:"; cat "$OUT/${m}_$dev.err"; }
    done
    "$PY" - "$OUT/${m}_cpu.json" "$OUT/${m}_cuda.json" "$m" <<'PYEOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
worst, maps = 0.0, 0
def walk(x, y):
    global worst, maps
    if isinstance(x, dict):
        for k in x:
            if k in y: walk(x[k], y[k])
    elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        if x and all(isinstance(v, (int, float)) for v in x):
            maps += 1
            worst = max(worst, max(abs(p - q) for p, q in zip(x, y)))
        else:
            for p, q in zip(x, y): walk(p, q)
walk(a, b)
print(json.dumps({"model": sys.argv[3], "rows_compared": maps, "max_abs_difference": worst}))
PYEOF
    cmp -s "$OUT/${m}_cpu.txt" "$OUT/${m}_cuda.txt" && echo "$m: CUDA translations equal the CPU's" || echo "$m: translations DIFFER"
  done
fi
if want decode; then
  step "decoding an opus-mt-sized Marian, 2 threads on cores 0-1: attnviz, CTranslate2, transformers"
  if ! "$PY" -c 'import ctranslate2' 2>/dev/null && [ -n "${CT2_WHEEL:-}" ]; then
    "$PY" -m pip install -q --no-deps "$CT2_WHEEL" >/dev/null 2>&1 || echo "ctranslate2 wheel did not install"
  fi
  taskset -c 0,1 "$PY" "$ROOT/tools/bench_pretrained.py" "$C" "$OUT/bench" --rounds "${ROUNDS:-2}" \
    --sentences "${SENTENCES:-12}" --threads 2 >"$OUT/bench_decode.json" 2>"$OUT/bench_decode.err" \
    && cat "$OUT/bench_decode.json" || tail -20 "$OUT/bench_decode.err"
  step "decoding on CUDA (attnviz bench-decode, batch 1, 24 tokens)"
  "$C" bench-decode --model "$OUT/bench/opus-mt-sized" --data "$OUT/bench/sentences.tsv" --device cuda --batch 1 \
    --fixed-length 24 --beam 4 --repeat 1 --sentences "${SENTENCES:-12}" >"$OUT/bench_decode_cuda.json" 2>&1 \
    && cat "$OUT/bench_decode_cuda.json" | head -40 || tail -5 "$OUT/bench_decode_cuda.json"
fi
if want finetune; then
  step "fine-tuning the opus-mt-sized Marian, 2 threads on cores 0-1: attnviz against a transformers loop"
  taskset -c 0,1 "$PY" "$ROOT/tools/bench_finetune.py" "$C" "$OUT/bench" --pairs "${PAIRS:-128}" --rounds 1 \
    >"$OUT/bench_finetune.json" 2>"$OUT/bench_finetune.err" && cat "$OUT/bench_finetune.json" || tail -20 "$OUT/bench_finetune.err"
fi
step "done"
