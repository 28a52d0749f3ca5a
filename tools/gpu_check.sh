#!/usr/bin/env bash
# GPU check: on a machine with an NVIDIA GPU, trains d2l's RNN and Transformer configurations
# on CUDA, then runs the same weights on the CPU and on CUDA (eval, beam-4 translations with
# every attention map, the four attribution methods) and prints the largest differences;
# then the training benchmark beside d2l's PyTorch code (interleaved rounds), decoding and
# attribution speed on both devices and a corpus agreement run. Prints a summary; every
# JSON it wrote stays in the work directory. How the GPU figures of docs/benchmarks.md were made.
#
#   tools/gpu_check.sh DATA.tsv [D2L_DIR]
#
# DATA: a Tatoeba-style file (the figures: ../shared/data/tatoeba-eng-fra-5000.tsv).
# D2L_DIR: the directory of d2l_reference.py and d2l_transformer_reference.py (default
# ../shared/bench; the d2l rounds are left out when absent); they need a Python with torch
# (ATTNVIZ_PYTHON, default .venv/bin/python, else python3).
# Environment: ATTNVIZ_CLI (default build/headless/app/attnviz-cli, else build/release/...),
# ATTNVIZ_TESTS (the core tests, default build/headless/tests/attnviz_tests_core, else
# build/release/...: step 0 runs its [device] tests on DEVICE),
# GPU_DIR (work directory, default a new temporary one), ROUNDS (default "1 2 3"),
# DEVICE (default cuda; DEVICE=cpu runs the same script on a CPU to try it),
# STEPS (default "0 1 2 3 4 5"; 2 and 4 use the models step 1 saves), FAMILIES (the training
# rounds' model families, default "rnn transformer"),
# BIG (a larger Tatoeba-style file, e.g. tools/make_speed_corpus.py's 16,000 pairs: each round
# also trains the Transformer one epoch on 15,000 of its pairs, float32 and bf16, beside d2l's code),
# BEFORE_CLI (an older attnviz-cli: each round also runs its Transformer bench, for an A/B).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
D="${1:?usage: tools/gpu_check.sh DATA.tsv [D2L_DIR]}"
REF="${2:-$ROOT/../shared/bench}"
C="${ATTNVIZ_CLI:-}"
if [ -z "$C" ]; then
  for c in "$ROOT/build/headless/app/attnviz-cli" "$ROOT/build/release/app/attnviz-cli"; do
    [ -x "$c" ] && { C="$c"; break; }
  done
fi
[ -x "$C" ] || { echo "gpu_check: no attnviz-cli (build it, or set ATTNVIZ_CLI)" >&2; exit 2; }
PY="${ATTNVIZ_PYTHON:-$ROOT/.venv/bin/python}"; [ -x "$PY" ] || PY=python3
W="${GPU_DIR:-$(mktemp -d /tmp/attnviz-gpu-XXXXXX)}"; mkdir -p "$W"
DEV="${DEVICE:-cuda}"
T="${ATTNVIZ_TESTS:-}"
if [ -z "$T" ]; then
  for t in "$ROOT/build/headless/tests/attnviz_tests_core" "$ROOT/build/release/tests/attnviz_tests_core"; do
    [ -x "$t" ] && { T="$t"; break; }
  done
fi
STEPS=" ${STEPS:-0 1 2 3 4 5} "; want() { [[ "$STEPS" == *" $1 "* ]]; }
HAVE_D2L=0; [ -f "$REF/d2l_reference.py" ] && [ -f "$REF/d2l_transformer_reference.py" ] && HAVE_D2L=1
t0=$(date +%s); step() { echo "--- $(( $(date +%s) - t0 )) s: $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null || true
echo "work directory: $W"

if want 0; then
  step "0. the core tests that run on any device ([device]), on $DEV"
  if [ -x "$T" ]; then ATTNVIZ_TEST_DEVICE="$DEV" "$T" '[device]' || echo "device tests on $DEV FAILED"
  else echo "no attnviz_tests_core (set ATTNVIZ_TESTS): skipped"; fi
fi

want 1 && {
step "1. train d2l's configurations on $DEV, keep the models"
$C bench --data "$D" --device "$DEV" --save "$W/rnn.ckpt" -q > "$W/bench_rnn_0.json" || exit 1
$C bench --arch transformer --data "$D" --device "$DEV" --save "$W/tf.ckpt" -q > "$W/bench_tf_0.json" || exit 1
}

want 2 && {
step "2. the same weights on cpu and $DEV"
SENT=("go ." "i lost ." "he's calm ." "i'm home ." "tom is very happy to be here ." "i think that you are right .")
for m in rnn tf; do for d in cpu "$DEV"; do
  $C eval --model "$W/$m.ckpt" --data "$D" --max-pairs 1000 --device "$d" --json > "$W/eval_${m}_$d.json"
  $C translate --model "$W/$m.ckpt" --device "$d" --beam 4 --attention-out "$W/att_${m}_$d.json" "${SENT[@]}" > "$W/tr_${m}_$d.txt"
  $C attribute --model "$W/$m.ckpt" --device "$d" --method all --out "$W/attr_${m}_$d.json" "${SENT[@]:4:2}" > /dev/null \
    || echo "attribute $m on $d FAILED"
done; done
python3 "$ROOT/tools/gpu_summary.py" compare "$W" "$DEV"
}

want 3 && {
step "3. training speed: attnviz bench and d2l's code (--num-val 127: the same 640 pairs), interleaved"
for r in ${ROUNDS:-1 2 3}; do
  for fam in ${FAMILIES:-rnn transformer}; do
    $C bench --arch $fam --data "$D" --device "$DEV" -q > "$W/bench_${fam}_$r.json"
    if [ $HAVE_D2L = 1 ]; then
      ref=d2l_reference.py; [ $fam = transformer ] && ref=d2l_transformer_reference.py
      "$PY" "$REF/$ref" "$D" --num-val 127 --device "$DEV" --json "$W/d2l_${fam}_$r.json" > /dev/null
    fi
  done
  # Mixed precision (--precision bf16) against d2l's code run unchanged under torch.autocast.
  $C bench --arch transformer --precision bf16 --data "$D" --device "$DEV" -q > "$W/bench_transformer-bf16_$r.json"
  if [ $HAVE_D2L = 1 ]; then
    "$PY" "$ROOT/tools/d2l_peer.py" --bf16 "$REF/d2l_transformer_reference.py" "$D" --num-val 127 --device "$DEV" \
      --json "$W/d2l_transformer-bf16_$r.json" > /dev/null
  fi
  if [ -n "${BEFORE_CLI:-}" ]; then
    "$BEFORE_CLI" bench --arch transformer --data "$D" --device "$DEV" -q > "$W/bench_transformer-before_$r.json"
  fi
  if [ -n "${BIG:-}" ]; then
    big=(--data "$BIG" --num-train 15000 --num-val 1000 --epochs 1 --device "$DEV" -q)
    $C bench --arch transformer "${big[@]}" > "$W/bench_transformer-16k_$r.json"
    $C bench --arch transformer --precision bf16 "${big[@]}" > "$W/bench_transformer-16k-bf16_$r.json"
    if [ $HAVE_D2L = 1 ]; then
      "$PY" "$REF/d2l_transformer_reference.py" "$BIG" --num-train 15000 --num-val 999 --epochs 1 --device "$DEV" \
        --json "$W/d2l_transformer-16k_$r.json" > /dev/null
    fi
  fi
done
python3 "$ROOT/tools/gpu_summary.py" train "$W"
}

want 4 && {
step "4. decoding and attribution speed on $DEV and the CPU"
for m in rnn tf; do
  $C bench-decode --model "$W/$m.ckpt" --data "$D" --device "$DEV" --repeat 3 > "$W/decode_${m}_$DEV.json"
  $C bench-decode --model "$W/$m.ckpt" --data "$D" --device cpu --repeat 3 > "$W/decode_${m}_cpu.json"
  for d in "$DEV" cpu; do
    $C bench-attribute --model "$W/$m.ckpt" --device "$d" --repeat 7 "i think that tom is very happy to be here" \
      > "$W/attribute_${m}_$d.json"
  done
done
python3 "$ROOT/tools/gpu_summary.py" speed "$W"
}

want 5 && {
step "5. attention against attribution over 1,000 sentences on $DEV"
s=$(date +%s.%N)
$C agreement --model "$W/rnn.ckpt" --data "$D" --max-sentences 1000 --device "$DEV" --json > "$W/agreement_rnn.json"
echo "agreement: $(python3 -c "print(round($(date +%s.%N) - $s, 1))") s"
}
step done
