"""The `lathe` Python package: pure Python over liblathe.so (ctypes), nothing to compile.

    python3 -m venv --system-site-packages .venv      # NumPy from Debian's python3-numpy
    cmake --install build --prefix .venv              # liblathe.so, header, rules into the venv
    .venv/bin/pip install ./python                    # offline: setuptools from the venv

(A setup.py rather than pyproject.toml so that pip builds it with the venv's own
setuptools instead of fetching build requirements from an index.)
"""
from setuptools import setup

setup(
    name="lathe",
    version="0.1.0",
    description="Lathe deep-learning compiler: build, rewrite, compile and run tensor graphs on NumPy arrays",
    packages=["lathe"],
    python_requires=">=3.9",
    install_requires=["numpy"],
)
