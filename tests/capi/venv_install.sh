#!/bin/sh
# venv_install.sh PYTHON BUILD SRC WORK — the README's Python set-up, offline: a venv that
# sees Debian's NumPy, the C API installed into it, `pip install ./python` (--no-index: no
# network), then the package used from outside the source tree.
set -eu
PY=$1 BUILD=$2 SRC=$3 WORK=$4
rm -rf "$WORK" && mkdir -p "$WORK"
"$PY" -m venv --system-site-packages "$WORK/venv"
cmake --install "$BUILD" --prefix "$WORK/venv" --component capi >/dev/null
cp -r "$SRC/python" "$WORK/python-src"      # pip builds in the tree it is given
rm -rf "$WORK/python-src/build" "$WORK/python-src"/*.egg-info
"$WORK/venv/bin/pip" install --no-index --no-cache-dir -q "$WORK/python-src"
cd "$WORK"
env -u LATHE_LIBRARY -u PYTHONPATH LATHE_CACHE_DIR="$WORK/cache" "$WORK/venv/bin/python" - <<'PYEOF'
import numpy as np, lathe, os, sys
assert lathe.__file__.startswith(sys.prefix), lathe.__file__
assert lathe._capi.lib._name.startswith(sys.prefix), lathe._capi.lib._name
x = lathe.input("x", ["B", 8]); w = lathe.input("w", [8, 3])
g = lathe.graph(y=(x @ w + 1.0).relu().softmax(-1))
s = lathe.rewrite(g, lathe.rules.builtin("simplify"), check=True); s.run()
p = lathe.compile(s.graph(), backend="llvm")
xa = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
wa = np.random.default_rng(1).standard_normal((8, 3)).astype(np.float32)
z = np.maximum(xa @ wa + 1, 0); e = np.exp(z - z.max(-1, keepdims=True))
np.testing.assert_allclose(p.run({"x": xa, "w": wa})["y"], e / e.sum(-1, keepdims=True), rtol=1e-5)
print("venv_install: ok", lathe.__version__, lathe._capi.lib._name)
PYEOF
