#!/usr/bin/env bash
# attnviz set-up: installs everything the project needs on Debian 12 and is
# safe to run again (a second run only checks and finishes in seconds).
#
#   ./setup.sh            install system packages + LibTorch (PyTorch wheel) into .venv
#   ./setup.sh --run      ... then build the app and the CLI (release preset) and start the app
#   ./setup.sh --test     ... then build everything, tests included, and run every test (ctest)
#   ./setup.sh --no-apt   skip the Debian packages (e.g. on a machine without root)
#
# Environment:
#   ATTNVIZ_VENV=DIR           the virtual environment to install into and build against
#                              (default ./.venv; one environment can serve several clones;
#                              `cmake --preset ...` reads it too)
#   ATTNVIZ_JOBS=N             build jobs (default: the cores, fewer where memory is short)
#   ATTNVIZ_BENCH_PEERS=1      also install the benchmark peers (ctranslate2)
#   ATTNVIZ_TORCH_VERSION=V    another torch wheel than 2.11.0
#   PYTHON=python3.x           the Python that creates the environment
#   CCACHE_DIR=DIR             ccache's own settings apply (default ~/.cache/ccache)
#
# LibTorch comes from the PyTorch wheel on PyPI, installed into the virtual
# environment; CMake finds it through torch.utils.cmake_prefix_path. Builds go
# through ccache and link with mold (both installed here; CMake uses them when present).
set -euo pipefail

TORCH_VERSION="${ATTNVIZ_TORCH_VERSION:-2.11.0}"
# Python packages of the tests and tools (pinned): safetensors (the PyTorch side of the
# interop tests), transformers + sentencepiece (models to and from Hugging Face),
# tensorboard (its reader checks the event files); ctranslate2 is a benchmark peer only.
PY_PACKAGES=(safetensors==0.8.0 transformers==5.24.0 sentencepiece==0.2.3 tensorboard==2.21.0)
BENCH_PACKAGES=(ctranslate2==4.8.5)
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${ATTNVIZ_VENV:-$ROOT/.venv}"
DO_APT=1
ACTION=""
for arg in "$@"; do
  case "$arg" in
    --no-apt) DO_APT=0 ;;
    --run) ACTION=run ;;
    --test) ACTION=test ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

say() { printf '[setup] %s\n' "$*"; }
start=$(date +%s)

# Free megabytes on the disk that holds $1 (or its nearest existing parent).
free_mb() {
  local d="$1"
  while [ ! -e "$d" ]; do d=$(dirname "$d"); done
  df -Pm "$d" 2>/dev/null | awk 'NR == 2 { print $4 }'
}
# need_space DIR MB WHAT: stop with one line a user can act on, before any download.
need_space() {
  local have
  have=$(free_mb "$1")
  if [ -n "$have" ] && [ "$have" -lt "$2" ]; then
    echo "setup.sh: $3 needs about $(( ($2 + 512) / 1024 )) GB free on the disk of $1, which has $have MB free." \
      "Free some space (or set ATTNVIZ_VENV to a folder on a larger disk) and run ./setup.sh again." >&2
    exit 1
  fi
}

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  python3 python3-venv python3-pip
  qt6-base-dev qt6-charts-dev qt6-svg-dev libqt6opengl6-dev libxkbcommon-dev libgl-dev libvulkan-dev
  catch2 libcli11-dev nlohmann-json3-dev
  libicu-dev libsentencepiece-dev zlib1g-dev libcurl4-openssl-dev libssl-dev
  clang libclang-rt-14-dev
  xvfb xauth
  ccache mold
)
# The tests also open the web page in a headless browser (tests/cli/web_page_heads_check.py).
[ "$ACTION" = test ] && APT_PACKAGES+=(chromium)

if [ "$DO_APT" = 1 ]; then
  missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    say "Debian packages: all ${#APT_PACKAGES[@]} present"
  else
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
      command -v sudo >/dev/null || { echo "setup.sh: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
      SUDO="sudo"
    fi
    say "Debian packages: installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  say "virtual environment: creating $VENV"
  "$PY" -m venv "$VENV"
fi
have=$("$VENV/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || true)
if [ "$have" = "$TORCH_VERSION" ]; then
  say "LibTorch: torch $have already in $VENV"
else
  # torch and its CUDA libraries take about 4 GB once installed. pip would hold every
  # wheel (2.3 GB) in its temporary folder and again in its cache before installing
  # any, so they go in one at a time without the cache: the disk needs the installed
  # size plus the largest wheel. triton is left out: it serves torch.compile only,
  # which nothing here uses.
  need_space "$VENV" 4700 "installing torch==$TORCH_VERSION"
  say "LibTorch: installing torch==$TORCH_VERSION from PyPI into $VENV (large download, once; $(free_mb "$VENV") MB free)"
  "$VENV/bin/python" -m pip install -q --no-cache-dir --upgrade pip
  plan="$VENV/torch-install-plan.json"
  pins=()
  if "$VENV/bin/python" -m pip install -q --no-cache-dir --dry-run --report "$plan" \
      "torch==$TORCH_VERSION" numpy >/dev/null 2>&1; then
    mapfile -t pins < <("$VENV/bin/python" - "$plan" <<'PYEOF'
import json, sys
# Small packages on one line (one pip run), each large one on its own.
small, large = [], []
for item in json.load(open(sys.argv[1]))["install"]:
    name, version = item["metadata"]["name"], item["metadata"]["version"]
    if name.lower() == "triton":
        continue
    heavy = name.lower().startswith(("nvidia-", "torch"))
    (large if heavy else small).append(f"{name}=={version}")
if small:
    print(" ".join(small))
for pin in large:
    print(pin)
PYEOF
)
  fi
  rm -f "$plan"
  if [ ${#pins[@]} -eq 0 ]; then
    # No plan (an old pip, or a resolver error it will print again): pip's own way.
    "$VENV/bin/python" -m pip install --no-cache-dir --progress-bar off "torch==$TORCH_VERSION" numpy
  else
    n=0
    for line in "${pins[@]}"; do
      n=$((n + 1))
      say "LibTorch: ($n/${#pins[@]}) $line"
      # shellcheck disable=SC2086
      "$VENV/bin/python" -m pip install -q --no-cache-dir --no-deps --progress-bar off $line
    done
  fi
fi
wanted=("${PY_PACKAGES[@]}")
[ "${ATTNVIZ_BENCH_PEERS:-0}" = 1 ] && wanted+=("${BENCH_PACKAGES[@]}")
# One Python start lists the pins that are not installed at their version.
need=$("$VENV/bin/python" - "${wanted[@]}" <<'PYEOF'
import importlib.metadata as md, sys
for pin in sys.argv[1:]:
    name, version = pin.split("==")
    try:
        ok = md.version(name) == version
    except md.PackageNotFoundError:
        ok = False
    if not ok:
        print(pin)
PYEOF
)
if [ -z "$need" ]; then
  say "Python packages: all ${#wanted[@]} pinned versions present"
else
  say "Python packages: installing" $need
  # shellcheck disable=SC2086
  "$VENV/bin/python" -m pip install -q --no-cache-dir --progress-bar off $need
fi
prefix=$("$VENV/bin/python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
say "LibTorch: CMAKE_PREFIX_PATH=$prefix"
say "set-up done in $(( $(date +%s) - start )) s"

[ -n "$ACTION" ] || exit 0
cd "$ROOT"
# Jobs: one per core, but each compile of LibTorch code takes up to ~1.5 GB.
if [ -z "${ATTNVIZ_JOBS:-}" ]; then
  JOBS=$(nproc)
  mem_jobs=$(awk '/MemAvailable/ { print int($2 / 1572864) }' /proc/meminfo 2>/dev/null || echo "$JOBS")
  [ "${mem_jobs:-0}" -ge 1 ] && [ "$mem_jobs" -lt "$JOBS" ] && JOBS=$mem_jobs
else
  JOBS=$ATTNVIZ_JOBS
fi
# The build folder takes about 2 GB with the tests, 1.2 GB without (precompiled headers
# most of it): say so before a build that would stop half-way with a full disk.
build_mb=1200
[ "$ACTION" = test ] && build_mb=2100
have_mb=$(free_mb "$ROOT")
if [ -n "$have_mb" ] && [ "$have_mb" -lt "$build_mb" ]; then
  say "warning: the build needs about $build_mb MB and the disk of $ROOT has $have_mb MB free; it may stop with 'No space left on device'"
fi
cmake --preset release -DATTNVIZ_PYTHON="$VENV/bin/python" >/dev/null
if [ "$ACTION" = test ]; then
  say "building everything (cmake --build --preset release, $JOBS jobs)"
  cmake --build --preset release -j "$JOBS"
else
  # The app and the CLI only: the tests are most of the build (--test builds them).
  say "building the app and the CLI (cmake --build --preset release --target attnviz attnviz-cli, $JOBS jobs)"
  cmake --build --preset release -j "$JOBS" --target attnviz attnviz-cli
fi
say "built in $(( $(date +%s) - start )) s from the start of set-up"
if [ "$ACTION" = test ]; then
  say "running the tests (ctest --preset release)"
  ctest --preset release -j "$JOBS"
else
  if [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ] && [ -z "${QT_QPA_PLATFORM:-}" ]; then
    say "no display found: starting the app under Xvfb (xvfb-run)"
    exec xvfb-run -a -s '-screen 0 1600x1000x24' build/release/app/attnviz
  fi
  say "starting build/release/app/attnviz"
  exec build/release/app/attnviz
fi
