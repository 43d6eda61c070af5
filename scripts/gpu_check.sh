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
./build/attnprof --variant all --dtype bf16 --kernels --out traces > "$OUT/all_8x16x1024x64.log" 2>&1; rc_all=$?
./build/attnprof --variant all --dtype bf16 --kernels --batch 4 --seq 4096 --head-dim 128 --out traces > "$OUT/all_4x16x4096x128.log" 2>&1
if [ "${SKIP_CROSSCHECK:-0}" != 1 ]; then
  PYTHONUNBUFFERED=1 python3 scripts/crosscheck.py --attnprof build/attnprof --device cuda \
    --shapes 8x16x1024x64,4x16x4096x128 --report "$OUT/crosscheck.md" > "$OUT/crosscheck.log" 2>&1; rc_cc=$?
fi
if [ "${SKIP_NVTX:-0}" != 1 ]; then
  python3 scripts/nvtx_proof.py --attnprof build/attnprof > "$OUT/nvtx_proof.log" 2>&1; rc_nvtx=$?
fi
tar czf "$OUT/traces.tgz" traces 2>/dev/null
echo "build rc=$rc_build ($((t1-t0)) s)  ctest rc=$rc_test ($((t2-t1)) s)  all rc=$rc_all  crosscheck rc=${rc_cc:-skipped}  nvtx rc=${rc_nvtx:-skipped}"
tail -3 "$OUT/ctest.log"
echo "wall (s): $(cat "$OUT"/wall_*.txt | tr '\n' ' ')"
grep -hE "^[a-z-]+ \| |forward CUDA time avg|unprofiled median|kernels per forward" "$OUT/all_8x16x1024x64.log"
grep -hE "PASS|FAIL|passed|mismatch" "$OUT/crosscheck.log" 2>/dev/null
cat "$OUT/nvtx_proof.log" 2>/dev/null | tail -8
