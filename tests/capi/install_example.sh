#!/bin/sh
# install_example.sh BUILD SRC WORK — installs the C API into WORK/prefix, builds
# samples/c/run_graph.c against the installed files only (pkg-config) and runs it: the
# built-in graph (checked against plain C), a .lathe and a .lua sample.
set -eu
BUILD=$1 SRC=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK"
cmake --install "$BUILD" --prefix "$WORK/prefix" --component capi >/dev/null
PC=$(find "$WORK/prefix" -name lathe.pc)
export PKG_CONFIG_PATH=$(dirname "$PC")
LIBDIR=$(pkg-config --variable=libdir lathe)
test -f "$(pkg-config --variable=includedir lathe)/lathe/lathe.h"
# the soname, and nothing but lathe_* exported
readelf -d "$LIBDIR/liblathe.so" | grep -q 'SONAME.*liblathe\.so\.0'
if nm -D --defined-only "$LIBDIR/liblathe.so" | awk '{print $3}' | grep -v '^lathe_' | grep -q .; then
  echo "liblathe.so exports symbols other than lathe_*:"; nm -D --defined-only "$LIBDIR/liblathe.so" | grep -v ' lathe_' | head; exit 1
fi
cp "$SRC/samples/c/run_graph.c" "$WORK/"
cd "$WORK"
cc -std=c99 -Wall -Wextra -Werror run_graph.c $(pkg-config --cflags --libs lathe) -lm -Wl,-rpath,"$LIBDIR" -o run_graph
# the binary must use the installed library, not the build tree's
ldd ./run_graph | grep liblathe | grep -q "$LIBDIR"
export LATHE_CACHE_DIR="$WORK/cache"
./run_graph
./run_graph "$SRC/samples/01-mlp.lathe" c
./run_graph "$SRC/samples/03-softmax.lua" llvm
echo "install_example: ok"
