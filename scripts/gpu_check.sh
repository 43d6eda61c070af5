#!/usr/bin/env bash
# Build, test and profile on the GPU machine in one go (the device lease is short).
# Logs go to $OUT (or ./gpu_out); the short table printed last is what matters.
set -uo pipefail
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
SRC=${SRC:-$PWD}
cd "$SRC"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.txt" 2>&1
t0=$(date +%s)
bash scripts/setup.sh "$@" > "$OUT/setup.log" 2>&1; rc_build=$?
cp build.build.log "$OUT/" 2>/dev/null
t1=$(date +%s)
grep -E "Used [0-9]+ registers|spill" build.build.log > "$OUT/ptxas.txt" 2>/dev/null
ctest --test-dir build --output-on-failure -j 8 > "$OUT/ctest.log" 2>&1; rc_test=$?
t2=$(date +%s)
# End-to-end wall time of the README's main command (process start to files written).
for i in 1 2 3; do
  /usr/bin/env time -f "%e" -o "$OUT/wall_$i.txt" ./build/attnprof --variant naive --dtype bf16 --out "$OUT/wall" > "$OUT/wall_run_$i.log" 2>&1
done
./build/attnprof --variant all --dtype bf16 --out traces > "$OUT/all_8x16x1024x64.log" 2>&1; rc_all=$?
./build/attnprof --variant all --dtype bf16 --batch 4 --seq 4096 --head-dim 128 --out traces > "$OUT/all_4x16x4096x128.log" 2>&1
tar czf "$OUT/traces.tgz" traces 2>/dev/null
echo "build rc=$rc_build ($((t1-t0)) s)  ctest rc=$rc_test ($((t2-t1)) s)  all rc=$rc_all"
tail -3 "$OUT/ctest.log"
echo "wall (s): $(cat "$OUT"/wall_*.txt | tr '\n' ' ')"
grep -hE "^[a-z-]+ \| |forward CUDA time avg|kernels per forward" "$OUT/all_8x16x1024x64.log"
