#!/usr/bin/env bash
# Nsight Compute profiles of chosen kernels, for reading where an epilogue's time goes (device only).
# Builds `coda` with line info in build-profile, then for each "NAME REGEX COMMAND..." case profiles
# the first kernel whose demangled name matches REGEX (full section set, source counters) and
# writes $OUT/NAME.ncu-rep, NAME.details.txt and NAME.sass.csv (per-instruction samples).
#   bash scripts/profile_kernels.sh 'rope Rope coda bench ops' 'rms ResidualRmsNorm coda bench ops'
set -uo pipefail
out=${OUT:-device-out}; mkdir -p "$out"
{ cmake -S . -B build-profile -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-lineinfo -DCODA_BUILD_TESTS=OFF &&
  cmake --build build-profile --target coda_cli; } > "$out/profile_build.log" 2>&1 || { tail -40 "$out/profile_build.log"; exit 1; }
for case in "$@"; do
  read -r name regex cmd <<< "$case"
  timeout 240 ncu --clock-control none --set full --import-source yes --kernel-name-base demangled \
    --kernel-name "regex:$regex" --launch-count 1 --kill on -f -o "$out/$name" build-profile/$cmd \
    > "$out/$name.ncu.log" 2>&1 || echo "$name: ncu exit $? (see $name.ncu.log)"
  ncu --import "$out/$name.ncu-rep" --page details > "$out/$name.details.txt" 2>&1
  ncu --import "$out/$name.ncu-rep" --page source --csv --print-source sass > "$out/$name.sass.csv" 2>&1
  echo "$name: $(grep -E 'Duration|Compute \(SM\) Throughput' "$out/$name.details.txt" | head -2 | tr -s ' ' | tr '\n' ';')"
done
