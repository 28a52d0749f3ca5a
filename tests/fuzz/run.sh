#!/usr/bin/env bash
# Builds the `fuzz` preset (clang, libFuzzer + ASan + UBSan) and runs every
# harness for SECONDS each (default 30), FUZZ_PARALLEL of them at a time (default:
# one per core; each harness is one process on one core).
#
#   tests/fuzz/run.sh [SECONDS] [HARNESS...]        e.g. tests/fuzz/run.sh 3600 tsv
#
# Each harness starts from its committed seeds (tests/fuzz/corpus/NAME) and
# regression inputs (tests/fuzz/regressions/NAME); inputs it finds go to
# build/fuzz/work/NAME (not committed). A crash, a sanitizer report, a broken
# invariant, a leak or a timeout stops the run: the input is saved as
# build/fuzz/artifacts/NAME/crash-*, the script prints how to replay it and
# exits 1. Fixed bugs keep their input in tests/fuzz/regressions/NAME, which
# ctest replays in every build (fuzz_replay_NAME).
# Environment: ATTNVIZ_PYTHON (python with torch; default $ATTNVIZ_VENV/bin/python, else
# .venv/bin/python), ATTNVIZ_JOBS (build jobs),
# FUZZ_TIMEOUT (seconds one input may take, default 30: a slower one is a hang),
# FUZZ_FLAGS (more libFuzzer flags, e.g. "-jobs=4 -workers=4", then with FUZZ_PARALLEL=1),
# FUZZ_PARALLEL (harnesses run at once; default the number of cores).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
SECONDS_EACH="${1:-30}"
shift || true
PY="${ATTNVIZ_PYTHON:-${ATTNVIZ_VENV:-$ROOT/.venv}/bin/python}"
JOBS="${ATTNVIZ_JOBS:-$(nproc)}"
BUILD="$ROOT/build/fuzz"
say() { printf '[fuzz] %s\n' "$*"; }

t0=$(date +%s)
cmake --preset fuzz -DATTNVIZ_PYTHON="$PY" >/dev/null
cmake --build --preset fuzz -j "$JOBS" --target fuzz_all
t1=$(date +%s)
say "build: $((t1 - t0)) s"

IFS=';' read -r -a ALL < "$BUILD/fuzz_harnesses.txt"
HARNESSES=("$@")
[ ${#HARNESSES[@]} -gt 0 ] || HARNESSES=("${ALL[@]}")

for h in "${HARNESSES[@]}"; do
  [ -x "$BUILD/tests/fuzz/fuzz_$h" ] || { echo "fuzz: no harness '$h' (have: ${ALL[*]})" >&2; exit 2; }
done

# One harness: its log in $BUILD/NAME.log, its exit status in $BUILD/NAME.rc.
run_harness() {
  local h=$1 exe="$BUILD/tests/fuzz/fuzz_$1" work="$BUILD/work/$1" art="$BUILD/artifacts/$1"
  mkdir -p "$work" "$art"
  local inputs=("tests/fuzz/corpus/$h")
  [ -d "tests/fuzz/regressions/$h" ] && inputs+=("tests/fuzz/regressions/$h")
  # -timeout: one input taking this long is a hang (inputs take milliseconds; the margin is for
  # busy machines); -rss_limit_mb: a runaway allocation.
  set +e
  # shellcheck disable=SC2086
  "$exe" -max_total_time="$SECONDS_EACH" -timeout="${FUZZ_TIMEOUT:-30}" -rss_limit_mb=4096 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$art/" ${FUZZ_FLAGS:-} \
    "$work" "${inputs[@]}" >"$BUILD/$h.log" 2>&1
  echo $? >"$BUILD/$h.rc"
}

# FUZZ_PARALLEL harnesses at a time: on a 2-core CI machine the 30 s runs take half the time.
PARALLEL="${FUZZ_PARALLEL:-$(nproc)}"
running=0
for h in "${HARNESSES[@]}"; do
  say "$h: ${SECONDS_EACH} s"
  rm -f "$BUILD/$h.rc"
  run_harness "$h" &
  running=$((running + 1))
  if [ "$running" -ge "$PARALLEL" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true

status=0
summary=()
for h in "${HARNESSES[@]}"; do
  exe="$BUILD/tests/fuzz/fuzz_$h" art="$BUILD/artifacts/$h" log="$BUILD/$h.log"
  rc=$(cat "$BUILD/$h.rc" 2>/dev/null || echo "?")
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || true)
  summary+=("$h: ${runs:-?} executions, ${rate:-?} exec/s, coverage ${cov:-?}, exit $rc")
  if [ "$rc" != 0 ]; then
    status=1
    echo "---- $h failed (exit $rc); the end of $log:" >&2
    tail -n 60 "$log" >&2
    for a in "$art"/*; do
      [ -e "$a" ] || continue
      echo "input: $a  (replay: $exe $a; once fixed, keep it: mkdir -p tests/fuzz/regressions/$h && cp $a tests/fuzz/regressions/$h/)" >&2
    done
  fi
done
say "runs: $(( $(date +%s) - t1 )) s; total with the build: $(( $(date +%s) - t0 )) s"
for s in "${summary[@]}"; do say "$s"; done
exit $status
