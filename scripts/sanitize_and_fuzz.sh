#!/usr/bin/env bash
# The report layer (everything that reads or writes files without LibTorch)
# under AddressSanitizer + UndefinedBehaviorSanitizer: builds it report-only with
# clang, runs its GoogleTest suites and replays every fuzz corpus through ctest,
# then runs each libFuzzer target for a bounded time. Fails on any test failure,
# sanitizer report, fuzzer crash, leak or hang.
# Usage: scripts/sanitize_and_fuzz.sh
#   FUZZ_SECONDS=60 (per fuzzer)   BUILD_DIR=build-asan   JOBS=$(nproc)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build-asan}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
JOBS=${JOBS:-$(nproc)}
say() { printf '[sanitize] %s\n' "$*" >&2; }
start=$SECONDS

# --- clang with its sanitizer and libFuzzer runtimes (Debian: libclang-rt-N-dev),
# and the libraries the report layer uses; only what is missing, as setup.sh does.
fuzzer_links() {
  printf 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }\n' |
    clang++ -x c++ -fsanitize=fuzzer,address,undefined -o /dev/null - >/dev/null 2>&1
}
need=()
command -v clang++ >/dev/null || need+=(clang)
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
for pkg in nlohmann-json3-dev zlib1g-dev libgtest-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ((${#need[@]})) || ! fuzzer_links; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null 2>&1 || true
    apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 || true
    major=$(clang++ -dumpversion 2>/dev/null | cut -d. -f1)
    fuzzer_links || apt-get install -y -qq "libclang-rt-$major-dev" >/dev/null 2>&1 || true
    say "installed ${need[*]} ${major:+libclang-rt-$major-dev (if it was missing)}"
  fi
  fuzzer_links || { say "clang++ cannot link -fsanitize=fuzzer,address,undefined (install clang and libclang-rt-N-dev)"; exit 1; }
fi

# --- configure and build (report-only: no LibTorch; fmt's headers come from the torch wheel).
san="-fsanitize=address,undefined -fno-sanitize-recover=all"
gen=()
[ -f "$BUILD_DIR/Makefile" ] || gen=(-G Ninja)
say "configuring $BUILD_DIR (clang, $san, report-only, fuzzers)"
cmake -S . -B "$BUILD_DIR" "${gen[@]}" -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_FLAGS="-O1 -g -fno-omit-frame-pointer $san" \
  -DCMAKE_EXE_LINKER_FLAGS="$san" \
  -DATTNPROF_REPORT_ONLY=ON -DATTNPROF_FUZZ=ON >"$BUILD_DIR.configure.log" 2>&1 \
  || { cat "$BUILD_DIR.configure.log" >&2; exit 1; }
say "building (log: $BUILD_DIR.build.log)"
cmake --build "$BUILD_DIR" -j "$JOBS" >"$BUILD_DIR.build.log" 2>&1 \
  || { tail -50 "$BUILD_DIR.build.log" >&2; exit 1; }

# --- tests: the report suites and one replay of each fuzz corpus.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
say "ctest (report tests + corpus replays)"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"

# --- fuzzing: each target for FUZZ_SECONDS on a scratch copy of its corpus (new
# inputs go to the scratch dir; the seeds in tests/fuzz/corpus stay as committed).
failed=0
for fuzzer in "$BUILD_DIR"/tests/fuzz/fuzz_*; do
  [ -x "$fuzzer" ] || continue
  name=${fuzzer##*/fuzz_}
  work=$BUILD_DIR/fuzz-work/$name
  rm -rf "$work" && mkdir -p "$work/corpus" "$work/artifacts"
  log=$work/fuzz.log
  seeds=$(find "tests/fuzz/corpus/$name" -type f | wc -l)
  rc=0
  "$fuzzer" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "$work/corpus" "tests/fuzz/corpus/$name" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  grown=$(find "$work/corpus" -type f | wc -l)
  crashes=$(find "$work/artifacts" -type f | wc -l)
  if [ "$rc" != 0 ] || [ "$crashes" != 0 ]; then
    failed=1
    printf 'fuzz %-16s FAILED (exit %s): %s execs, %s crash/leak/timeout inputs in %s\n' \
      "$name" "$rc" "${execs:-?}" "$crashes" "$work/artifacts" 
    grep -m1 -A30 'ERROR: \|runtime error\|==ERROR\|deadly signal' "$log" >&2 || tail -40 "$log" >&2
  else
    printf 'fuzz %-16s ok: %s execs in %ss, 0 crashes, coverage %s, corpus %s seeds + %s new\n' \
      "$name" "${execs:-?}" "$FUZZ_SECONDS" "${cov:-?}" "$seeds" "$grown"
  fi
done
say "done in $((SECONDS - start))s"
exit "$failed"
