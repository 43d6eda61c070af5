#!/usr/bin/env bash
# Build (or take a prebuilt tree), test, profile and benchmark on the GPU
# machine, in stages, so one device lease does as much as possible. Logs collect
# in $OUT/work and come back as one tarball per call ($OUT/results_<stages>.tgz);
# a short summary is printed last.
#   STAGES="build test run bench" (default). All stages:
#     build       scripts/setup.sh (CMake options from the arguments): every figure
#                 and GPU test reported comes from a tree built here, in this lease
#     test        the whole ctest (GPU tests included; CTEST_ARGS, CTEST_JOBS, CTEST_TIMEOUT: a share
#                 of it, e.g. "-I 1,240"), then the operators from
#                 Python with the library built here: scripts/ops_check.py (CUDA and
#                 CPU: every bad input a RuntimeError, no crash) and
#                 scripts/backward_matrix.py (autograd backward of both flash operators)
#     counters    the counter pass: its GPU ctests (COUNTERS_NO_CTEST=1 leaves them to
#                 `test`), scripts/counters_crosscheck.py against ncu (COUNTERS_XC, pass:shape
#                 pairs), `--variant all --counters` at 8x16x1024x64 and 4x16x4096x128
#                 (COUNTERS_SHAPES; `none` skips), and the wall time the pass adds
#     run         wall time of the README's first command; `--variant all --kernels` at
#                 8x16x1024x64 and 4x16x4096x128 (at-a-glance, merged trace, timeline)
#     bench       scripts/bench_kernels.py, suites from BENCH_SUITES (forward,shapes,backward; fp8 too)
#     opfp8       scripts/bench_flash_sm90.py --fp8 --check: the e4m3 kernel against the bf16 one and
#                 cuDNN from Python, its errors against float64 first (issue 32's ratio)
#     crosscheck  scripts/crosscheck.py against torch.profiler, forward and backward
#     nvtx        scripts/nvtx_proof.py (ncu counts inside the attn_fwd ranges)
#     pyops       only the Python part of `test` (PYOPS=0 leaves it out of `test`)
#     hta         small runs whose folders come back for scripts/hta_check.py on the CPU machine
#     ring        (two or more GPUs) the ring and Ulysses ctests (NCCL included) and
#                 scripts/bench_ring.py, ring and Ulysses, on every GPU (RING_ARGS overrides)
#     signals     SIGINT while Kineto is prepared but not enabled: exit 130, no temps left
#     sweep       the sweep behind docs/sweep_h200.*
#   RECORD=1      also record each stage's results (test, run, bench, crosscheck, nvtx, pyops,
#                 ring, signals, sweep) as BENCHMARKS.md's records, into work/records/ of the
#                 tarball; on the CPU machine `python3 scripts/bench_records.py merge
#                 results_<stages>.tgz && python3 scripts/benchmarks_md.py` adds them to docs/bench/
#                 and rewrites the page. The commit measured: ATTNPROF_COMMIT, else git here (the
#                 device's copy of the tree may carry an older HEAD with the work as changes, which
#                 git calls <old>-dirty: pass ATTNPROF_COMMIT=$(git rev-parse --short=7 HEAD) from here).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-$PWD/gpu_out}
W="$OUT/work"; mkdir -p "$W"
STAGES=${STAGES:-build test run bench}
has() { [[ " $STAGES " == *" $1 "* ]]; }
summary=()
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$W/gpu.txt" 2>&1
git rev-parse --short HEAD > "$W/commit.txt" 2>/dev/null
REC=""
if [ -n "${RECORD:-}" ]; then
  export ATTNPROF_COMMIT=${ATTNPROF_COMMIT:-$(git rev-parse --short=7 HEAD 2>/dev/null)}
  if [ -z "$ATTNPROF_COMMIT" ]; then
    echo "gpu_check: RECORD=1 needs the commit measured: no git here, so set ATTNPROF_COMMIT=<commit>" >&2
    exit 2
  fi
  REC="$W/records"; mkdir -p "$REC"
fi
REC_FLAGS=(); [ -n "$REC" ] && REC_FLAGS=(--record "$REC")
# record KIND ARGS...: one bench_records.py entry (a failure to record is reported, not fatal).
record() {
  [ -n "$REC" ] || return 0
  local kind=$1; shift
  python3 scripts/bench_records.py "$kind" --dir "$REC" "$@" > /dev/null 2>> "$W/records.err" ||
    summary+=("record $kind failed: $(tail -1 "$W/records.err")")
}

if has build; then
  t0=$(date +%s)
  bash scripts/setup.sh "$@" > "$W/setup.log" 2>&1; rc=$?
  cp build.build.log "$W/" 2>/dev/null
  grep -E "ptxas info|spill" build.build.log > "$W/ptxas.txt" 2>/dev/null
  summary+=("build rc=$rc ($(( $(date +%s) - t0 )) s), spilling kernels: $(grep -c 'bytes spill stores' "$W/ptxas.txt" | tr -d '\n') reports, $(grep -E '[1-9][0-9]* bytes spill' "$W/ptxas.txt" | wc -l) with spills")
  # Name each kernel that spills (the report line follows its "Function properties for").
  while read -r l; do summary+=("  spills: $l"); done < <(awk '/Function properties for/ {f=$NF}
    /bytes spill/ && /[1-9][0-9]* bytes spill/ {print f": "$0}' "$W/ptxas.txt" | sort -u | head -8 |
    { command -v c++filt >/dev/null && c++filt || cat; } | cut -c1-300)
fi
if has test; then
  t0=$(date +%s)
  # CTEST_ARGS (e.g. "-I 1,240" then "-I 241" in the next call on the warm machine; "-I 241,0" runs all) splits the
  # whole ctest, about 10 minutes on 16 cores, over two calls; CTEST_TIMEOUT caps one call's share.
  read -r -a ctest_args <<< "${CTEST_ARGS:-}"
  ctest_cmd=(ctest --test-dir build --output-on-failure -j "${CTEST_JOBS:-12}" ${ctest_args[@]+"${ctest_args[@]}"})
  timeout "${CTEST_TIMEOUT:-420}" "${ctest_cmd[@]}" > "$W/ctest.log" 2>&1; rc=$?
  summary+=("ctest rc=$rc ($(( $(date +%s) - t0 )) s): $(grep -E 'tests passed' "$W/ctest.log")")
  record ctest ${CTEST_ARGS:+--name "ctest on the GPU machine, share $CTEST_ARGS"} --log "$W/ctest.log" --command "${ctest_cmd[*]}"
  summary+=("  skipped: $(grep -c '(Skipped)' "$W/ctest.log"); failed: $(grep -E '\(Failed\)|\(Timeout\)' "$W/ctest.log" | tr '\n' ' ')")
fi
if has run; then
  for i in 1 2 3; do
    /usr/bin/env time -f "%e" -o "$W/wall_$i.txt" ./build/attnprof --variant naive --dtype bf16 --out "$W/wall" > "$W/wall_run_$i.log" 2>&1
  done
  summary+=("wall (s) of 'attnprof --variant naive --dtype bf16': $(cat "$W"/wall_*.txt | tr '\n' ' ')")
  record wall --times "$(cat "$W"/wall_*.txt | paste -sd, -)" --command "build/attnprof --variant naive --dtype bf16"
  # Each problem in its own --out, so each at-a-glance table is recorded with its own command.
  all_run() {
    local name=$1; shift
    ./build/attnprof --variant all --dtype bf16 "$@" --out "$W/traces/$name" > "$W/all_$name.log" 2>&1
    summary+=("all $name rc=$?")
    record glance --from "$W/traces/$name" --command "build/attnprof --variant all --dtype bf16 $*"
  }
  all_run 8x16x1024x64 --kernels
  all_run 4x16x4096x128 --kernels --batch 4 --seq 4096 --head-dim 128
  all_run bwd_8x16x1024x64 --pass bwd
  all_run llama3_8b_decode --shape llama3-8b-decode
fi
if has bench; then
  PYTHONUNBUFFERED=1 timeout 560 python3 scripts/bench_kernels.py --attnprof build/attnprof --suite "${BENCH_SUITES:-forward,shapes,backward}" \
    --markdown "$W/bench_kernels.md" --json "$W/bench_kernels.json" ${REC_FLAGS[@]+"${REC_FLAGS[@]}"} > "$W/bench_kernels.log" 2>&1
  summary+=("bench_kernels (${BENCH_SUITES:-forward,shapes,backward}) rc=$?")
fi
if has opfp8; then
  PYTHONUNBUFFERED=1 timeout 300 python3 scripts/bench_flash_sm90.py --fp8 --check ${REC_FLAGS[@]+"${REC_FLAGS[@]}"} \
    > "$W/op_fp8.log" 2>&1
  summary+=("bench_flash_sm90 --fp8 rc=$?: $(grep -c ' ok$' "$W/op_fp8.log") checks ok, $(grep -c 'FAIL' "$W/op_fp8.log") failed")
  while read -r l; do summary+=("  $l"); done < <(grep -E '^\| [0-9]' "$W/op_fp8.log" | head -8)
fi
if has crosscheck; then
  PYTHONUNBUFFERED=1 timeout 400 python3 scripts/crosscheck.py --attnprof build/attnprof --device cuda --pass fwd,bwd \
    --shapes 8x16x1024x64,4x16x4096x128 --report "$W/crosscheck.md" ${REC_FLAGS[@]+"${REC_FLAGS[@]}"} > "$W/crosscheck.log" 2>&1
  summary+=("crosscheck rc=$?: $(tail -1 "$W/crosscheck.log")")
fi
if has nvtx; then
  nvtx_cmd=(python3 scripts/nvtx_proof.py --attnprof build/attnprof --passes fwd,bwd,fwd+bwd
    --variants ${NVTX_VARIANTS:-naive,inplace,sdpa-math,sdpa-efficient,sdpa-flash,sdpa-cudnn,custom-softmax,custom-flash,custom-flash-sm90})
  timeout 400 "${nvtx_cmd[@]}" > "$W/nvtx_proof.log" 2>&1; rc=$?
  summary+=("nvtx_proof rc=$rc")
  record check --name "NVTX ranges: ncu kernel counts inside attn_fwd and attn_bwd" --command "${nvtx_cmd[*]}" \
    --result "exit $rc: $(grep -c ' ok (filter' "$W/nvtx_proof.log") scopes ok, $(grep -c 'MISMATCH' "$W/nvtx_proof.log") mismatched, $(grep -c 'skipped:' "$W/nvtx_proof.log") skipped"
fi
if has sweep; then
  sweep_cmd=(./build/attnprof sweep --seq 512,1024,2048,4096,8192,16384 --head-dim 64,128
    --variant naive,inplace,sdpa-math,sdpa-efficient,sdpa-flash,sdpa-cudnn,custom-flash,custom-flash-sm90
    --timing-iters 10 --warmup-iters 1)
  t0=$(date +%s)
  timeout 500 "${sweep_cmd[@]}" --out "$W/sweep_out" > "$W/sweep.log" 2>&1
  summary+=("sweep rc=$?")
  record sweep --from "$W/sweep_out" --seconds $(( $(date +%s) - t0 )) --command "${sweep_cmd[*]}"
fi
# attnprof's operators from Python with the library built HERE: a library
# built on another machine hides what this one's compiler and runtime do (a
# static libstdc++ from /opt/gcc crashed Python on the first error message
# with a number in it). Each case runs in a child process, so a crash names it.
python_ops() {
  { g++ --version | head -1; python3 -c 'import torch; print("torch", torch.__version__, torch.__file__)'
    ldd build/libattnprof_core.so | grep -E "torch|c10|stdc|gcc_s"; } > "$W/ops_env.txt" 2>&1
  python3 scripts/ops_check.py --lib build/libattnprof_core.so --device cuda > "$W/ops_check_cuda.log" 2>&1
  summary+=("ops_check cuda rc=$?: $(tail -1 "$W/ops_check_cuda.log")")
  record check --name "attnprof's operators from Python, bad inputs" --result "$(tail -1 "$W/ops_check_cuda.log")" \
    --command "python3 scripts/ops_check.py --lib build/libattnprof_core.so --device cuda"
  python3 scripts/ops_check.py --lib build/libattnprof_core.so --device cpu > "$W/ops_check_cpu.log" 2>&1
  summary+=("ops_check cpu rc=$?: $(tail -1 "$W/ops_check_cpu.log")")
  grep -E "^(FAIL|CRASH)" "$W/ops_check_cuda.log" | head -5 | sed 's/^/  /' > "$W/ops_failures.txt"
  while read -r l; do summary+=("$l"); done < "$W/ops_failures.txt"
  PYTHONUNBUFFERED=1 timeout 300 python3 scripts/backward_matrix.py --lib build/libattnprof_core.so \
    ${BACKWARD_MATRIX_ARGS:-} > "$W/backward_matrix.log" 2>&1
  summary+=("backward_matrix rc=$?: $(tail -1 "$W/backward_matrix.log")")
  record check --name "autograd backward of the flash operators from Python" --result "$(tail -1 "$W/backward_matrix.log")" \
    --command "python3 scripts/backward_matrix.py --lib build/libattnprof_core.so ${BACKWARD_MATRIX_ARGS:-}"
  while read -r l; do summary+=("  $l"); done < <(grep -E "^(FAIL|CRASH)" "$W/backward_matrix.log" | head -5)
}
# PYOPS=0: the test stage without its Python part (a lease split over calls runs pyops in another).
if has pyops || { has test && [ "${PYOPS:-1}" != 0 ]; }; then python_ops; fi
if has counters; then
  # COUNTERS_NO_CTEST=1 when the test stage ran them already.
  if [ -z "${COUNTERS_NO_CTEST:-}" ]; then
    timeout 300 ctest --test-dir build -R 'CounterPassGpu|CountersCli|DeviceCeilings|Session\.(Occupancy|Stop)' \
      --output-on-failure -V > "$W/counters_ctest.log" 2>&1
    summary+=("counters ctest rc=$?: $(grep -E 'tests passed' "$W/counters_ctest.log")")
    record ctest --name "counter pass GPU tests" --log "$W/counters_ctest.log" \
      --command "ctest --test-dir build -R 'CounterPassGpu|CountersCli|DeviceCeilings|Session\.(Occupancy|Stop)'"
    while read -r l; do summary+=("  $l"); done < <(grep -E "Skipped|Failure|Expected|Which is|\(Failed\)" "$W/counters_ctest.log" | head -8)
  fi
  # pass:shape pairs; the small forward is where a few MB counted wrong show most.
  for xc in ${COUNTERS_XC:-fwd:4x16x4096x128 bwd:4x16x4096x128 fwd:8x16x1024x64}; do
    pass=${xc%%:*} xshape=${xc#*:}
    xc_cmd=(python3 scripts/counters_crosscheck.py --attnprof build/attnprof --pass $pass --shape $xshape ${COUNTERS_XC_ARGS:-})
    PYTHONUNBUFFERED=1 timeout 300 "${xc_cmd[@]}" --report "$W/counters_crosscheck_${pass}_$xshape.md" > "$W/counters_crosscheck_${pass}_$xshape.log" 2>&1
    rc=$?
    summary+=("counters_crosscheck $pass $xshape rc=$rc")
    record check --name "counter pass against ncu, $pass $xshape (DRAM bytes, tensor-pipe %, duration within 5%)" --command "${xc_cmd[*]}" \
      --result "exit $rc: $(grep -c '| agree |' "$W/counters_crosscheck_${pass}_$xshape.log") variants agree, $(grep -c 'DISAGREE\|ERROR' "$W/counters_crosscheck_${pass}_$xshape.log") disagree"
    while read -r l; do summary+=("  $l"); done < <(grep -E '^\| [a-z]' "$W/counters_crosscheck_${pass}_$xshape.log" | head -8)
  done
  # What the pass adds to a whole run: the same run without and with it
  # (the ceilings calibrated, and cached, first). COUNTERS_SHAPES=none skips it.
  [ "${COUNTERS_SHAPES:-}" = none ] || ./build/attnprof --variant naive --counters --quiet --out "$W/counters_out/calibration" > /dev/null 2>&1
  IFS=';' read -r -a shapes <<< "${COUNTERS_SHAPES:---batch 8 --seq 1024 --head-dim 64;--batch 4 --seq 4096 --head-dim 128}"
  [ "${COUNTERS_SHAPES:-}" = none ] && shapes=()
  for shape in "${shapes[@]}"; do
    tag=$(echo "$shape" | tr -d ' -')
    ms=()
    for c in "" "--counters"; do
      t0=$(date +%s%N)
      # Each run in its own folder: the at-a-glance tables and roofline pictures come back (docs/counters_h200.*).
      ./build/attnprof --variant all $shape $c --out "$W/counters_out/${tag}${c:+_counters}" > "$W/all_${tag}${c:+_counters}.log" 2>&1
      rc=$?
      ms+=($(( ($(date +%s%N) - t0) / 1000000 )))
      summary+=("all $shape $c: rc=$rc, ${ms[-1]} ms")
    done
    record check --name "time --counters adds to --variant all $shape" --command "build/attnprof --variant all $shape --counters" \
      --result "$(( (ms[1] - ms[0]) / 1000 )) s ($(( ms[0] / 1000 )) s without, $(( ms[1] / 1000 )) s with; ceilings cached)"
  done
fi
if has hta; then
  # HTA cannot be installed here (no network): small GPU runs whose folders come
  # back in the tarball (work/hta_traces), checked on the CPU machine with
  #   .venv-hta/bin/python scripts/hta_check.py --from <fetched>/hta_traces
  ./build/attnprof --device cuda --variant naive,sdpa-flash,custom-flash --batch 2 --heads 4 --seq 256 \
    --head-dim 64 --timing-iters 0 --out "$W/hta_traces" > "$W/hta_traces.log" 2>&1
  summary+=("hta traces rc=$? ($(find "$W/hta_traces" -name '*.pt.trace.json.gz' | wc -l) traces kept)")
fi
if has ring; then
  timeout 200 ctest --test-dir build -R 'Ring|Ulysses' --output-on-failure > "$W/ring_ctest.log" 2>&1
  summary+=("ring ctest rc=$?: $(grep -E 'tests passed' "$W/ring_ctest.log"); skipped: $(grep -c '(Skipped)' "$W/ring_ctest.log")")
  record ctest --name "ring tests on two GPUs" --log "$W/ring_ctest.log" --command "ctest --test-dir build -R Ring" \
    --gpus "$(nvidia-smi -L 2>/dev/null | wc -l)"
  # Ring and Ulysses on every GPU of the host; on 4 or 8, issue 33's problems (32 heads, causal, up to 262144).
  ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
  if [ "$ngpu" -ge 4 ]; then ring_default="--nproc $ngpu --heads 32 --seqs 65536,131072,262144 --masks causal --run-timeout-s 150"
  else ring_default="--nproc 2"; fi
  PYTHONUNBUFFERED=1 timeout 330 python3 scripts/bench_ring.py --attnprof build/attnprof --out "$W/ring_out" \
    --schemes ring,ulysses ${RING_ARGS:-$ring_default} \
    --budget-s 240 --log-dir "$W/ring_logs" ${REC_FLAGS[@]+"${REC_FLAGS[@]}"} > "$W/bench_ring.log" 2>&1
  summary+=("bench_ring rc=$?")
  while read -r l; do summary+=("  $l"); done < <(grep -E '^\|' "$W/bench_ring.log" | head -12)
fi
if has signals; then
  # The issue-11 teardown repro on the GPU: a SIGINT while Kineto is prepared
  # but not enabled (10000 warm-up steps of about 1 ms) must exit 130 with one line, no temps.
  ./build/attnprof --device cuda --variant naive --warmup 10000 --active 1 --out "$W/sig" > /dev/null 2> "$W/sig.err" &
  pid=$!; sleep 4; kill -INT $pid; wait $pid; rc=$?
  summary+=("SIGINT during Kineto warm-up: rc=$rc (want 130), stderr: $(tr '\n' '|' < "$W/sig.err" | tail -c 300), temps left: $(find "$W/sig" -name '.*.tmp.*' | wc -l)")
  record check --name "SIGINT during the Kineto warm-up" \
    --command "build/attnprof --device cuda --variant naive --warmup 10000 --active 1, SIGINT after 4 s" \
    --result "exit $rc, $(wc -l < "$W/sig.err") stderr line(s), $(find "$W/sig" -name '.*.tmp.*' | wc -l) temp files left"
fi
# Traces are large; keep the summaries, tables, at-a-glance, merged traces of the default shape and plots.
find "$W" -name '*.json.gz' ! -path '*/compare/*' ! -path '*/hta_traces/*' -delete
tag=$(echo "$STAGES" | tr ' ' '_')
tar czf "$OUT/results_$tag.tgz" -C "$OUT" work && rm -rf "$W"
printf '%s\n' "${summary[@]}"
