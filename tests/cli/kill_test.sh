#!/usr/bin/env bash
# Kill test: SIGKILLs a training attnviz-cli at random moments, many times,
# saving a checkpoint every ~0.1 s so that kills also land in the middle of
# saves, and after every kill checks that
#   - the checkpoint at --save, once written, always exists and loads (translate);
#   - what a kill leaves is at most the temporary file of the save it
#     interrupted (MODEL.tmp-<pid>-<random>), never anything else (temporaries
#     of earlier kills stay until a later run's save removes them);
# and at the end that the next save removed every stale temporary file.
# Each run resumes the checkpoint of the one before, as a user would.
#
#   tests/cli/kill_test.sh CLI [KILLS=10] [HIDDEN=64]
#
# Prints one JSON line: kills, kills that left a temporary file (landed during a
# save), loads checked, how many of those temporaries later saves removed (all of
# them, or the script fails). Exit 0 when every check held.
set -uo pipefail
CLI="$1"
KILLS="${2:-10}"
HIDDEN="${3:-64}"
dir="$(mktemp -d "${TMPDIR:-/tmp}/attnviz-kill-XXXXXX")"
trap 'rm -rf "$dir"' EXIT
ck="$dir/model.ckpt"
fail() { echo "kill_test: FAIL: $*" >&2; ls -la "$dir" >&2; exit 1; }

train_args() {
  local a=(--threads 1 train --task reverse --pairs 400 --batch 16 --device cpu -q --epochs 100000
           --checkpoint-every-minutes 0.0015 --save "$ck")
  if [ -f "$ck" ]; then a+=(--resume "$ck"); else a+=(--embed "$HIDDEN" --hidden "$HIDDEN" --seed 1); fi
  printf '%s\n' "${a[@]}"
}

kills=0 during_save=0 loads=0 had_checkpoint=0 cleaned=0
pending=()  # temporaries left by kills, not yet removed by a later save
for ((i = 1; i <= KILLS; i++)); do
  mapfile -t args < <(train_args)
  "$CLI" "${args[@]}" >"$dir/out.txt" 2>"$dir/err.txt" &
  pid=$!
  # 0.4 .. 2.4 s: LibTorch takes ~0.5 s to load, then batches and saves alternate.
  sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.3f", 0.4 + 2.0 * r / 32767 }')"
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  kills=$((kills + 1))
  left=()
  for f in "$dir"/*; do
    case "$(basename "$f")" in
      model.ckpt | out.txt | err.txt | load.txt) ;;
      model.ckpt.tmp-*) left+=("$f") ;;
      *) fail "kill $i left an unexpected file: $f" ;;
    esac
  done
  fresh=0
  for f in "${left[@]}"; do
    case "$f" in *".tmp-$pid-"*) fresh=1 ;; esac
  done
  during_save=$((during_save + fresh))
  still=()
  for f in "${pending[@]}"; do
    if [ -e "$f" ]; then still+=("$f"); else cleaned=$((cleaned + 1)); fi
  done
  pending=("${still[@]}")
  for f in "${left[@]}"; do
    case "$f" in *".tmp-$pid-"*) pending+=("$f") ;; esac
  done
  if [ -f "$ck" ]; then
    had_checkpoint=1
    "$CLI" --threads 1 translate --model "$ck" "1 2 3" >/dev/null 2>"$dir/load.txt" ||
      fail "kill $i: the checkpoint does not load: $(cat "$dir/load.txt")"
    loads=$((loads + 1))
  elif [ $had_checkpoint = 1 ]; then
    fail "kill $i: the checkpoint disappeared"
  fi
done

# One last run that ends by itself: its saves remove the stale temporary files.
stale_before=$(find "$dir" -name 'model.ckpt.tmp-*' | wc -l)
if [ -f "$ck" ]; then
  "$CLI" --threads 1 train --resume "$ck" --save "$ck" --max-batches 2 --device cpu -q --task reverse --pairs 400 \
    >/dev/null 2>"$dir/err.txt" || fail "the last run failed: $(cat "$dir/err.txt")"
  stale_after=$(find "$dir" -name 'model.ckpt.tmp-*' | wc -l)
  [ "$stale_after" -eq 0 ] || fail "$stale_after stale temporary files are left after a successful save"
  cleaned=$((cleaned + ${#pending[@]}))
  "$CLI" --threads 1 translate --model "$ck" "1 2 3" >/dev/null 2>&1 || fail "the last checkpoint does not load"
else
  fail "no kill came after the first save (raise the delay or KILLS)"
fi
printf '{"kills": %d, "kills_during_save": %d, "checkpoint_loads": %d, "temporaries_removed_by_later_saves": %d, "left_for_the_last_run": %d}\n' \
  "$kills" "$during_save" "$loads" "$cleaned" "$stale_before"
