#!/usr/bin/env bash
# Installs the Debian 12 packages Lathe builds and tests with (DESIGN.md's table).
# Safe to run again; skips apt when everything is already present.
set -euo pipefail
PKGS=(cmake ninja-build g++ pkg-config
  libimgui-dev libstb-dev libglfw3-dev libgl-dev libgl1-mesa-dri
  libgraphviz-dev graphviz liblua5.4-dev
  llvm-19-dev libzstd-dev
  nlohmann-json3-dev libfmt-dev libcli11-dev libedit-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libonnx-dev libprotobuf-dev protobuf-compiler libopenblas-dev libonnx-testdata
  fonts-dejavu-core xvfb xauth tmux clang-14 libclang-rt-14-dev
  libdlpack-dev python3-numpy python3-pytest python3-venv
  libopenmpi-dev openmpi-bin)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
