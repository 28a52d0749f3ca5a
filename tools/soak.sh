#!/usr/bin/env bash
# Soak test: trains for MINUTES (default 30) in the CLI and then in the GUI
# (offscreen) on a large generated corpus, sampling the resident memory every
# 10 s, and in the GUI the event loop's lateness (a 5 ms timer; the app's hidden
# --soak mode logs it, ui/tools/Soak.cpp). Prints one JSON object: per run the RSS
# samples, RSS growth after warm-up (the first 20% of the run, at least 60 s):
# end against start (medians of three samples) and a fitted trend (MB/min),
# and for the GUI the worst and 99th-percentile timer lateness ("stall"), the GUI
# thread's longest event-loop pass, and for both the heap's bytes in use and held free.
#
#   tools/soak.sh [MINUTES] [cli|gui|both]
#
# Environment: ATTNVIZ_BUILD (default build/release: needs attnviz-cli, and for the GUI an
# attnviz built with the developer tooling: cmake --preset release -DATTNVIZ_APP_TOOLS=ON),
# SOAK_PAIRS (corpus size, default 200000), SOAK_DIR (work directory, default a temporary one).
# Goal (issue 11): RSS growth < 1% after warm-up, no stall > 16 ms.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MINUTES="${1:-30}"
WHICH="${2:-both}"
BUILD="${ATTNVIZ_BUILD:-$ROOT/build/release}"
CLI="$BUILD/app/attnviz-cli"
GUI="$BUILD/app/attnviz"
if [ "$WHICH" != cli ] && ! QT_QPA_PLATFORM=offscreen "$GUI" --help 2>/dev/null | grep -q -- --screenshot; then
  echo "soak.sh: $GUI has no soak mode: configure with -DATTNVIZ_APP_TOOLS=ON and build again" >&2
  exit 2
fi
PAIRS="${SOAK_PAIRS:-200000}"
WORK="${SOAK_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/attnviz-soak-XXXXXX")}"
SECS=$(awk -v m="$MINUTES" 'BEGIN { printf "%d", m * 60 }')
mkdir -p "$WORK"
say() { printf '[soak] %s\n' "$*" >&2; }

# A large corpus: source sentences of 4..14 words from a 4000-word vocabulary; the
# target is the source reversed with every word suffixed, so the task is learnable.
corpus="$WORK/corpus.tsv"
if [ ! -s "$corpus" ]; then
  say "generating $PAIRS pairs into $corpus"
  awk -v n="$PAIRS" 'BEGIN {
    srand(11);
    for (i = 0; i < n; i++) {
      len = 4 + int(rand() * 11); s = ""; t = "";
      for (k = 0; k < len; k++) { w[k] = "w" int(rand() * rand() * 4000); s = s (k ? " " : "") w[k] }
      for (k = len - 1; k >= 0; k--) t = t w[k] "x" (k ? " " : "");
      print s "\t" t
    }
  }' >"$corpus"
fi

# Samples VmRSS (MB) of $1 every 10 s until it exits, into $2 (one "seconds mb" per line),
# and every minute where the resident memory lies, into $2.maps ("seconds heap anon file
# other" in MB: the main heap [heap], anonymous mappings (other malloc arenas, large
# blocks, thread stacks), mapped files (libraries, fonts), the rest).
sample_rss() {
  local pid=$1 out=$2 t=0
  : >"$out"
  : >"$out.maps"
  while kill -0 "$pid" 2>/dev/null; do
    rss=$(awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status" 2>/dev/null || true)
    [ -n "$rss" ] && echo "$t $rss" >>"$out"
    if [ $((t % 60)) -eq 0 ]; then
      awk -v t="$t" '
        /^[0-9a-f]+-[0-9a-f]+ / { kind = NF < 6 ? "anon" : $6 == "[heap]" ? "heap" : $6 ~ /^\[/ ? "other" : "file"; next }
        /^Rss:/ { kb[kind] += $2 }
        END { printf "%d %.1f %.1f %.1f %.1f\n", t, kb["heap"] / 1024, kb["anon"] / 1024, kb["file"] / 1024, kb["other"] / 1024 }
      ' "/proc/$pid/smaps" >>"$out.maps" 2>/dev/null || true
    fi
    sleep 10
    t=$((t + 10))
  done
}

if [ "$WHICH" = cli ] || [ "$WHICH" = both ]; then
  say "CLI: training for $MINUTES min"
  "$CLI" train --data "$corpus" --epochs 100000 --device cpu -q --max-length 20 --patience 0 \
    --save "$WORK/cli.ckpt" --checkpoint-every-minutes 5 --memory-log "$WORK/cli.mem.jsonl" \
    >"$WORK/cli.out" 2>"$WORK/cli.err" &
  pid=$!
  sample_rss "$pid" "$WORK/cli.rss" &
  sampler=$!
  sleep "$SECS"
  kill -INT "$pid" 2>/dev/null || true  # stops after the batch, saves, exits 130
  wait "$pid" || true
  wait "$sampler" || true
fi

if [ "$WHICH" = gui ] || [ "$WHICH" = both ]; then
  say "GUI (offscreen): training for $MINUTES min"
  QT_QPA_PLATFORM=offscreen "$GUI" --soak "$SECS" --soak-log "$WORK/gui.jsonl" "$corpus" \
    >"$WORK/gui.out" 2>"$WORK/gui.err" &
  pid=$!
  sample_rss "$pid" "$WORK/gui.rss" &
  sampler=$!
  wait "$pid" || say "the GUI exited with $? (see $WORK/gui.err)"
  wait "$sampler" || true
fi

python3 - "$WORK" "$MINUTES" <<'PY'
import json, os, sys
work, minutes = sys.argv[1], float(sys.argv[2])
def rss(name):
    path = os.path.join(work, name + ".rss")
    if not os.path.exists(path):
        return None
    samples = [tuple(map(float, l.split())) for l in open(path) if l.strip()]
    if not samples:
        return None
    warm = max(60.0, 0.2 * samples[-1][0])
    after = [mb for t, mb in samples if t >= warm]
    out = {"samples": len(samples), "rss_mb": [mb for _, mb in samples], "warmup_s": warm,
           "rss_peak_mb": max(mb for _, mb in samples)}
    if len(after) >= 2:
        first = sorted(after[:3])[len(after[:3]) // 2]  # medians of three: one GC-like blip is not growth
        last = sorted(after[-3:])[len(after[-3:]) // 2]
        out.update(rss_after_warmup_mb=first, rss_end_mb=last, growth_after_warmup_pct=round(100 * (last - first) / first, 3))
        # The trend, less at the mercy of single samples: a least-squares line through every
        # sample after warm-up, as MB per minute and as % of the warm-up level over the run.
        pts = [(t, mb) for t, mb in samples if t >= warm]
        n = len(pts)
        mt = sum(t for t, _ in pts) / n
        mm = sum(mb for _, mb in pts) / n
        var = sum((t - mt) ** 2 for t, _ in pts)
        if var > 0:
            slope = sum((t - mt) * (mb - mm) for t, mb in pts) / var  # MB per second
            span = pts[-1][0] - pts[0][0]
            out.update(trend_mb_per_min=round(slope * 60, 3), trend_growth_pct=round(100 * slope * span / first, 3))
    # Where the resident memory lies (sample_rss's minute samples): at the first sample
    # after warm-up and at the end, MB per kind of mapping.
    maps = path + ".maps"
    if os.path.exists(maps):
        rows = [list(map(float, l.split())) for l in open(maps) if len(l.split()) == 5]
        after = [r for r in rows if r[0] >= warm]
        if len(after) >= 2:
            kinds = ("heap", "anon", "file", "other")
            out["resident_by_mapping_mb"] = {k: [after[0][i + 1], after[-1][i + 1]] for i, k in enumerate(kinds)}
    return out
def heap(out, rows):
    """Where the resident memory goes (glibc's mallinfo2): in use vs held free by the heap."""
    rows = [r for r in rows if "heap_in_use_mb" in r]
    if not rows:
        return
    warm = out.get("warmup_s", 0)
    after = [r for r in rows if r["t"] >= warm] or rows
    for key in ("heap_in_use_mb", "heap_free_mb"):
        out[key] = {"after_warmup": round(after[0][key], 1), "end": round(after[-1][key], 1),
                    "max": round(max(r[key] for r in rows), 1)}
result = {"minutes": minutes, "work": work}
for run in ("cli", "gui"):
    r = rss(run)
    if r is not None:
        result[run] = r
mem = os.path.join(work, "cli.mem.jsonl")  # attnviz-cli train --memory-log
if os.path.exists(mem) and "cli" in result:
    heap(result["cli"], [json.loads(l) for l in open(mem) if l.strip()])
log = os.path.join(work, "gui.jsonl")
if os.path.exists(log) and "gui" in result:
    rows = [json.loads(l) for l in open(log) if l.strip()]
    ticks = [r for r in rows if r.get("kind") == "window"]
    final = [r for r in rows if r.get("kind") == "summary"]
    if ticks:
        result["gui"]["max_stall_ms"] = max(r["max_ms"] for r in ticks)
        result["gui"]["p99_lateness_ms_worst_window"] = max(r["p99_ms"] for r in ticks)
        result["gui"]["windows_over_16ms"] = sum(1 for r in ticks if r["max_ms"] > 16)
        result["gui"]["windows"] = len(ticks)
        # The GUI thread's own longest event-loop pass: late ticks without a long pass
        # were the scheduler's, not the app's work.
        if "busy_max_ms" in ticks[0]:
            result["gui"]["busy_max_ms"] = max(r["busy_max_ms"] for r in ticks)
            result["gui"]["long_events"] = [{"t": round(r["t"]), "ms": round(r["busy_max_ms"], 1), "event": r.get("busy_event", "")}
                                            for r in ticks if r["busy_max_ms"] > 16]
            result["gui"]["windows_late_without_long_event"] = sum(
                1 for r in ticks if r["max_ms"] > 16 and r["busy_max_ms"] <= 16)
        if "late_app" in ticks[0]:
            # Whose the late ticks were: the GUI thread working > 16 ms between two ticks (the
            # app's) or waiting for a core (other threads, processes, the hypervisor's steal).
            result["gui"]["late_ticks_app"] = sum(r["late_app"] for r in ticks)
            result["gui"]["late_ticks_waiting"] = sum(r["late_waiting"] for r in ticks)
            result["gui"]["late_ticks_preempted"] = sum(r.get("late_preempted", 0) for r in ticks)
            result["gui"]["event_cpu_max_ms"] = round(max(r["event_cpu_max_ms"] for r in ticks), 1)
            result["gui"]["work_between_ticks_max_ms"] = round(max(r["work_between_ticks_max_ms"] for r in ticks), 1)
            result["gui"]["steal_ms"] = round(sum(r["steal_ms"] for r in ticks))
            result["gui"]["long_events"] = [
                dict(e, cpu_ms=round(r["busy_cpu_ms"], 1), blocked=r.get("busy_blocked"), preempted=r.get("busy_preempted"))
                for e, r in zip(result["gui"].get("long_events", []), [r for r in ticks if r["busy_max_ms"] > 16])]
        if "soak_ms" in ticks[0]:  # the soak's own heap sampling, counted in neither figure above
            result["gui"]["soak_sampling_max_ms"] = round(max(r["soak_ms"] for r in ticks), 1)
        heap(result["gui"], ticks)
    if final:
        result["gui"]["summary"] = final[-1]
print(json.dumps(result))
PY
