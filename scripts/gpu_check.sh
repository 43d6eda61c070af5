#!/usr/bin/env bash
# Build, test, profile and benchmark on the GPU machine, in stages, so one device
# lease does as much as possible. Logs collect in $OUT/work and come back as one
# tarball ($OUT/results.tgz); a short summary is printed last.
#   STAGES="build test run bench" (default) | "crosscheck nvtx sweep"
#   extra arguments go to scripts/setup.sh (CMake options)
set -uo pipefail
OUT=${OUT:-$PWD/gpu_out}
W="$OUT/work"; mkdir -p "$W"
STAGES=${STAGES:-build test run bench}
has() { [[ " $STAGES " == *" $1 "* ]]; }
summary=()
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$W/gpu.txt" 2>&1

if has build; then
  t0=$(date +%s)
  bash scripts/setup.sh "$@" > "$W/setup.log" 2>&1; rc=$?
  cp build.build.log "$W/" 2>/dev/null
  grep -E "ptxas info|spill" build.build.log > "$W/ptxas.txt" 2>/dev/null
  summary+=("build rc=$rc ($(( $(date +%s) - t0 )) s), spilling kernels: $(grep -c 'bytes spill stores' "$W/ptxas.txt" | tr -d '\n') reports, $(grep -E '[1-9][0-9]* bytes spill' "$W/ptxas.txt" | wc -l) with spills")
fi
if has test; then
  t0=$(date +%s)
  ctest --test-dir build --output-on-failure -j 8 > "$W/ctest.log" 2>&1; rc=$?
  summary+=("ctest rc=$rc ($(( $(date +%s) - t0 )) s): $(grep -E 'tests passed' "$W/ctest.log")")
  summary+=("  skipped: $(grep -c 'Skipped' "$W/ctest.log")")
fi
if has run; then
  for i in 1 2 3; do
    /usr/bin/env time -f "%e" -o "$W/wall_$i.txt" ./build/attnprof --variant naive --dtype bf16 --out "$W/wall" > "$W/wall_run_$i.log" 2>&1
  done
  summary+=("wall (s) of 'attnprof --variant naive --dtype bf16': $(cat "$W"/wall_*.txt | tr '\n' ' ')")
  ./build/attnprof --variant all --dtype bf16 --kernels --out "$W/traces" > "$W/all_8x16x1024x64.log" 2>&1
  summary+=("all 8x16x1024x64 rc=$?")
  ./build/attnprof --variant all --dtype bf16 --kernels --batch 4 --seq 4096 --head-dim 128 --out "$W/traces" > "$W/all_4x16x4096x128.log" 2>&1
  summary+=("all 4x16x4096x128 rc=$?")
fi
if has bench; then
  python3 scripts/bench_kernels.py --attnprof build/attnprof --markdown "$W/bench_kernels.md" > "$W/bench_kernels.log" 2>&1
  summary+=("bench_kernels rc=$?")
fi
if has crosscheck; then
  PYTHONUNBUFFERED=1 python3 scripts/crosscheck.py --attnprof build/attnprof --device cuda \
    --shapes 8x16x1024x64,4x16x4096x128 --report "$W/crosscheck.md" > "$W/crosscheck.log" 2>&1
  summary+=("crosscheck rc=$?: $(tail -1 "$W/crosscheck.log")")
fi
if has nvtx; then
  python3 scripts/nvtx_proof.py --attnprof build/attnprof \
    --variants naive,inplace,sdpa-math,sdpa-efficient,sdpa-flash,sdpa-cudnn,custom-softmax,custom-flash > "$W/nvtx_proof.log" 2>&1
  summary+=("nvtx_proof rc=$?")
fi
if has sweep; then
  ./build/attnprof sweep --seq 512,1024,2048,4096,8192,16384 --head-dim 64,128 \
    --variant naive,inplace,sdpa-math,sdpa-efficient,sdpa-flash,sdpa-cudnn,custom-flash \
    --timing-iters 10 --warmup-iters 1 --out "$W/sweep_out" > "$W/sweep.log" 2>&1
  summary+=("sweep rc=$?")
fi
# Traces are large; keep the summaries, tables, at-a-glance and plots.
find "$W" -name '*.json.gz' -delete
tar czf "$OUT/results.tgz" -C "$OUT" work && rm -rf "$W"
printf '%s\n' "${summary[@]}"
