#!/usr/bin/env bash
# The README's test command: installs packages, builds, and runs every CTest suite.
#   scripts/test.sh [ctest args…]     e.g. scripts/test.sh -L unit
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)" --timeout 900 "$@"
