#!/usr/bin/env bash
# One-time (and idempotent) set-up: system packages, LibTorch, configure, build.
# Usage: scripts/setup.sh [extra cmake -D options]
#   BUILD_DIR=build (default)   ATTNPROF_TORCH_PIP=torch==2.11.0 (pinned wheel)
# LibTorch comes from, in order: CMAKE_PREFIX_PATH / Torch_DIR if set; a python3
# that already has torch 2.11 (the GPU machine's); else a local .venv with the
# pinned PyPI wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build}
TORCH_PIN=${ATTNPROF_TORCH_PIP:-torch==2.11.0}
say() { printf '[setup] %s\n' "$*" >&2; }

# --- system packages (Debian names); only what is missing, only where apt works.
# Tools count as present when on PATH (the GPU machine has pip's cmake and ninja).
need=()
for tool in cmake:cmake g++:g++ ninja:ninja-build; do
  command -v "${tool%%:*}" >/dev/null || need+=("${tool#*:}")
done
for pkg in libcli11-dev nlohmann-json3-dev zlib1g-dev libgtest-dev python3-venv; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ((${#need[@]})); then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ] &&
     { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"; } >/dev/null 2>&1; then
    say "installed ${need[*]}"
  else
    say "could not install ${need[*]}; continuing in case they are provided another way"
  fi
fi

# --- LibTorch
torch_prefix=""
if [ -n "${Torch_DIR:-}" ]; then
  say "LibTorch from Torch_DIR=$Torch_DIR"
elif [ -n "${CMAKE_PREFIX_PATH:-}" ]; then
  say "LibTorch from CMAKE_PREFIX_PATH=$CMAKE_PREFIX_PATH"
else
  want=${TORCH_PIN#torch==}
  for py in "$ROOT/.venv/bin/python" python3; do
    if v=$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null) && [ "${v%%+*}" = "$want" ]; then
      torch_prefix=$("$py" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null)
      say "LibTorch $v from $py"
      break
    fi
  done
  if [ -z "$torch_prefix" ]; then
    say "installing $TORCH_PIN from PyPI into .venv (about 4.5 GB, a minute or two)"
    python3 -m venv "$ROOT/.venv"
    "$ROOT/.venv/bin/pip" install -q --disable-pip-version-check "$TORCH_PIN"
    torch_prefix=$("$ROOT/.venv/bin/python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null)
  fi
fi

# --- cuobjdump + nvdisasm (pinned, PyPI) for the ctest that reads the sm_90a
# kernels' SASS, where the CUDA toolkit lacks them; into $BUILD_DIR/tools,
# where CMake looks. Skipped when already there or on PATH.
SASS_TOOLS_PIN=${ATTNPROF_SASS_TOOLS_PIN:-13.2.78}
tools="$BUILD_DIR/tools"
nvcc_bin=$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")
if ! command -v cuobjdump >/dev/null && [ ! -x "$nvcc_bin/cuobjdump" ] &&
   [ ! -x "$tools/nvidia/cu13/bin/cuobjdump" ]; then
  pip_py=python3
  [ -x "$ROOT/.venv/bin/python" ] && pip_py="$ROOT/.venv/bin/python"
  mkdir -p "$BUILD_DIR"
  if "$pip_py" -m pip install -q --disable-pip-version-check --no-cache-dir --target "$tools" \
       "nvidia-cuda-cuobjdump==$SASS_TOOLS_PIN" "nvidia-cuda-nvdisasm==$SASS_TOOLS_PIN" >"$BUILD_DIR.tools.log" 2>&1; then
    say "installed cuobjdump/nvdisasm $SASS_TOOLS_PIN into $tools"
  else
    say "could not install cuobjdump (log: $BUILD_DIR.tools.log); the SASS test will skip"
  fi
fi

# --- configure and build
gen=()
command -v ninja >/dev/null && [ ! -f "$BUILD_DIR/Makefile" ] && gen=(-G Ninja)
say "configuring $BUILD_DIR"
cmake -S . -B "$BUILD_DIR" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  ${torch_prefix:+-DCMAKE_PREFIX_PATH="$torch_prefix"} "$@" >"$BUILD_DIR.configure.log" 2>&1 \
  || { cat "$BUILD_DIR.configure.log" >&2; exit 1; }
say "building (log: $BUILD_DIR.build.log)"
cmake --build "$BUILD_DIR" -j "$(nproc)" >"$BUILD_DIR.build.log" 2>&1 \
  || { tail -50 "$BUILD_DIR.build.log" >&2; exit 1; }
say "built $BUILD_DIR/attnprof"
