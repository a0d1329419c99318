# Runs from the build tree: CTest sets LATHE_LIBRARY to the freshly built liblathe.so and
# puts python/ first on sys.path (so an installed lathe package is not the one tested).
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LATHE_CACHE_DIR", str(Path(os.environ.get("TMPDIR", "/tmp")) / "lathe-pytest-cache"))
