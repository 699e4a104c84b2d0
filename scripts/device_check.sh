#!/usr/bin/env bash
# The GPU session in one command (for the lent H100/H200): build with every core, run the GPU
# tests, summarise the SASS of the kernels, run the benchmark. Logs go to $OUT (or ./device-out).
#   bash scripts/device_check.sh [gtest filter] [bench set]
set -uo pipefail
out=${OUT:-device-out}; mkdir -p "$out"
filter=${1:-*}; set_name=${2:-all}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv | tee "$out/gpu.txt"
gtest_dir=$( [ -d .devbin/googletest ] && echo "-DCODA_GTEST_SOURCE_DIR=$PWD/.devbin/googletest" )
# Only what runs here: the library, the GPU tests and the CLI (the CPU tests run in CI).
{ cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release $gtest_dir &&
  cmake --build build-device --target coda_gpu_tests coda_cli; } \
  > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
echo "build ok ($(grep -c 'spill stores' "$out/build.log") kernels reported; spilling: $(grep 'spill stores' "$out/build.log" | grep -vc ' 0 bytes spill stores'))"
# SASS: matrix and copy instructions present, no local memory in the GEMM kernels.
cuobjdump --dump-sass build-device/src/libcoda.so > "$out/sass.txt" 2>&1
awk '/Function :/{f=$3} /HGMMA/{h[f]++} /UTMALDG/{l[f]++} /UTMASTG/{s[f]++} /LDL|STL/{x[f]++}
     END{for (k in h) printf "%6d HGMMA %3d UTMALDG %3d UTMASTG %3d LDL/STL  %s\n", h[k], l[k], s[k], x[k], substr(k,1,90)}' \
  "$out/sass.txt" | sort -k8 > "$out/sass_summary.txt"
echo "kernels with HGMMA: $(wc -l < "$out/sass_summary.txt"); with local memory: $(awk '$7>0' "$out/sass_summary.txt" | wc -l)"
timeout 420 build-device/tests/coda_gpu_tests --gtest_filter="$filter" 2>&1 | tee "$out/gpu_tests.log" | grep -E "^\[  (FAILED|PASSED|SKIPPED) |tests ran|Failure|error" | head -60
[ "$set_name" = none ] || timeout 300 build-device/coda bench gemm --set "$set_name" --json "$out/bench_gemm.json" 2>&1 | tee "$out/bench.log"
