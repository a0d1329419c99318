#!/usr/bin/env bash
# tests/gpu/bundle.sh — builds lathe and the GPU-relevant test binaries here (Release; no GUI,
# LLVM or ONNX) and gathers them with the shared libraries they need from Debian into
# .gpu/ (git-ignored through .git/info/exclude), for a GPU machine that has the CUDA driver
# but not Lathe's build dependencies (the `device` tool's machines). There:
#     tests/gpu/run.sh --prebuilt .gpu
# The system's libc/libstdc++ and CUDA's own libraries (libnvrtc, libcuda) are not bundled.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-gpu}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLATHE_WITH_GUI=OFF -DLATHE_WITH_LLVM=OFF \
  -DLATHE_WITH_ONNX=${ONNX:-OFF} >/dev/null   # ONNX=ON: whole models too
cmake --build "$BUILD" --target lathe cuda_tests backend_tests -j"$(nproc)"
rm -rf .gpu && mkdir -p .gpu/bin .gpu/lib
exclude=$(git rev-parse --git-common-dir)/info/exclude
grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >> "$exclude"
pwd > .gpu/source-dir   # the tests find samples/ and assets/ under the dir they were built from
cp "$BUILD/lathe" "$BUILD/tests/cuda/cuda_tests" "$BUILD/tests/backends/backend_tests" .gpu/bin/
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libstdc\+\+|libgcc_s|libpthread|libdl|librt|libnvrtc|libcuda)'
for b in .gpu/bin/*; do
  ldd "$b" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
    [[ $name =~ $skip ]] || cp -nL "$path" .gpu/lib/
  done
done
strip --strip-debug .gpu/bin/* 2>/dev/null || true
du -sh .gpu
