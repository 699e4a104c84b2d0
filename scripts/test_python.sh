#!/usr/bin/env bash
# The Python package's tests: a virtual environment (build/python-venv) with torch, pytest and
# transformers from Python's package index, the package installed from ./python with the libcoda of
# the test build (`cmake --workflow --preset test` first), then pytest. GPU tests skip without a
# Hopper GPU. Cost on a fresh machine: about 5.5 GB of wheels (torch brings CUDA's libraries), a
# minute to install. CODA_SOURCE_BUILD=1 builds libcoda from source instead (pip's own CMake build).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/python-venv
[ -x $venv/bin/python ] || python3 -m venv $venv
$venv/bin/python -m pip install -q --upgrade pip
$venv/bin/python -m pip install -q torch pytest transformers
if [ -n "${CODA_SOURCE_BUILD:-}" ]; then
  $venv/bin/python -m pip install -q ./python
else
  $venv/bin/python -m pip install -q ./python -C cmake.define.CODA_PREBUILT_LIBRARY="$PWD/build/test/src/libcoda.so"
fi
echo "python tests: $($venv/bin/python -c 'import sys, torch; print("Python", sys.version.split()[0], "torch", torch.__version__)')"
cd build  # import the installed package, not ./python/coda
../$venv/bin/python -m pytest -q -rs ../python/tests "$@"
