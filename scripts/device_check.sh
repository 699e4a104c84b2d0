#!/usr/bin/env bash
# The GPU session in commands (for a lent H100/H200), each phase under a time limit, logs in $OUT (or
# ./device-out):
#   bash scripts/device_check.sh build   configure (ptxas report on), build the library and the coda
#                                        command (timed), then everything else (timed); the slowest
#                                        translation units; a SASS summary of libcoda's kernels
#   bash scripts/device_check.sh library the library from other processes (its exports, dlopen, Python
#                                        with torch), the command's and the install's tests
#   bash scripts/device_check.sh gpu     the GPU tests (ctest -L gpu)
#   bash scripts/device_check.sh bench   coda bench gemm --set transformer and coda bench ops
# GoogleTest's sources are taken from .devbin/googletest when the machine has no libgtest-dev.
set -uo pipefail
out=${OUT:-device-out}; mkdir -p "$out"
build=build/device
phase=${1:-build}

case "$phase" in
build)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv | tee "$out/gpu.txt"
  gtest_dir=$( [ -d .devbin/googletest ] && echo "-DCODA_GTEST_SOURCE_DIR=$PWD/.devbin/googletest" )
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCODA_PTXAS_REPORT=ON $gtest_dir > "$out/configure.log" 2>&1 \
    || { tail -30 "$out/configure.log"; exit 1; }
  grep "coda:" "$out/configure.log"
  start=$(date +%s)
  ninja -C "$build" coda_cli > "$out/build_command.log" 2>&1 || { grep -E "error|FAILED" "$out/build_command.log" | head -30; exit 1; }
  echo "library + coda command: $(( $(date +%s) - start )) s on $(nproc) cores"
  start=$(date +%s)
  ninja -C "$build" > "$out/build_rest.log" 2>&1 || { grep -E "error|FAILED" "$out/build_rest.log" | head -30; exit 1; }
  echo "the rest (tests, examples): $(( $(date +%s) - start )) s"
  cp "$build/.ninja_log" "$out/ninja_log.txt"
  echo "slowest translation units:"
  awk -F'\t' 'NR > 1 { printf "%7.1f s  %s\n", ($2 - $1) / 1000, $4 }' "$build/.ninja_log" | sort -rn | head -8
  cat "$out"/build_*.log | grep -E "spill stores" | grep -vc " 0 bytes spill stores" | sed 's/^/kernels with spill stores: /'
  cuobjdump --dump-sass "$build/src/libcoda.so" > "$out/sass.txt" 2>&1
  awk '/Function :/{f=$3} /HGMMA/{h[f]++} /UTMALDG/{l[f]++} /UTMASTG/{s[f]++} /LDL|STL/{x[f]++}
       END{for (k in h) printf "%6d HGMMA %3d UTMALDG %3d UTMASTG %3d LDL/STL  %s\n", h[k], l[k], s[k], x[k], substr(k,1,90)}' \
    "$out/sass.txt" | sort -k8 > "$out/sass_summary.txt"
  echo "kernels with HGMMA: $(wc -l < "$out/sass_summary.txt"); with local memory: $(awk '$7>0' "$out/sass_summary.txt" | wc -l)"
  ;;
gpu)
  timeout 500 ctest --test-dir "$build" -L gpu --output-on-failure > "$out/gpu_tests.log" 2>&1
  grep -E "tests passed|Failed|\*\*\*|Not Run|Skipped" "$out/gpu_tests.log" | tail -15
  ;;
library)
  timeout 200 ctest --test-dir "$build" -R "^(Library|Install|Cli|Examples|Demo)\." --output-on-failure > "$out/library_tests.log" 2>&1
  grep -E "tests passed|Failed|\*\*\*" "$out/library_tests.log" | tail -10
  PYTHONUNBUFFERED=1 timeout 120 python3 tests/python/c_abi_check.py "$PWD/$build/src/libcoda.so" --require-gpu 2>&1 \
    | tee "$out/python_torch.log" | tail -6
  ;;
bench)
  timeout 280 "$build/coda" bench gemm --set transformer --json "$out/bench_gemm.json" 2>&1 | tail -20
  timeout 280 "$build/coda" bench ops --json "$out/bench_ops.json" 2>&1 | tail -14
  ;;
*)
  echo "usage: bash scripts/device_check.sh build|library|gpu|bench" >&2
  exit 2
  ;;
esac
