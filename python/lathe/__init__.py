"""Lathe from Python: build, load, rewrite, compile and run tensor graphs on NumPy arrays.

    import numpy as np, lathe
    x = lathe.input("x", ["B", 784]); w = lathe.input("w", [784, 10])
    g = lathe.graph(y=(x.matmul(w) + 1.0).relu().softmax(-1))
    s = lathe.rewrite(g, lathe.rules.builtin("simplify"), check=True); s.run()
    p = lathe.compile(s.graph(), backend="llvm")
    out = p.run({"x": np.ones((4, 784), np.float32), "w": np.ones((784, 10), np.float32)})

Names follow the Lua API (`lathe help lua`); differences: keyword arguments instead of
option tables, 0-based kernel indices, dicts of NumPy arrays for feeds and results, and
errors raised as lathe.LatheError carrying Lathe's message. Every Lua composite is a
Tensor method or a lathe.* function here through one generic call (lathe.call), over the
C API in liblathe.so (include/lathe/lathe.h).
"""
from . import _capi
from ._capi import LatheError
from ._graph import Graph, graph, load, parse
from ._program import Program, ProfileReport, compile, run
from ._rewrite import Rules, Session, rewrite, rules
from ._tensor import Tensor, call, lathe_dtype, method_names, tensor

__version__ = _capi.lib.lathe_version().decode()
__all__ = ["LatheError", "Graph", "Tensor", "Program", "ProfileReport", "Rules", "Session", "call", "compile",
           "graph", "help", "input", "load", "parse", "rewrite", "rules", "run", "tensor"]


def input(name, dims, dtype="f32"):
    """A named graph input; dims are ints or symbolic names ("B")."""
    return call("lathe.input", name, list(dims), lathe_dtype(dtype))


def help(topic):
    """Lathe's help text for a topic ("lathe.compile", "matmul", "Session:step"), as `lathe help`."""
    return _capi.take_string(_capi.lib.lathe_help, _capi.enc(topic))


def __getattr__(name):
    """lathe.where, lathe.arange, lathe.cat, lathe.exp, … : Lathe's module functions, by name."""
    if not name.startswith("_"):
        methods, functions = method_names()
        if name in functions or name in methods:
            def fn(*args, **kwargs):
                return call(name if name not in functions else "lathe." + name, *args, **kwargs)

            fn.__name__ = name
            fn.__doc__ = _help_or_none("lathe." + name) or _help_or_none("Tensor:" + name)
            return fn
    raise AttributeError(f"module 'lathe' has no attribute '{name}'")


def __dir__():
    methods, functions = method_names()
    return sorted(set(globals()) | functions)


def _help_or_none(topic):
    try:
        return help(topic)
    except LatheError:
        return None


def _python_doc(fn, topic, note):
    text = _help_or_none(topic)
    if text:
        fn.__doc__ = f"{text}\n\n(Python) {note}\n\n{fn.__doc__ or ''}".rstrip()


# Docstrings come from the same help table as `lathe help` (Lua registration), followed by
# what differs in Python.
_python_doc(input, "lathe.input", "lathe.input(name, dims, dtype='f32')")
_python_doc(graph, "lathe.graph", "lathe.graph(y=y, z=z): outputs keep the order written")
_python_doc(load, "lathe.load", "lathe.load(path)")
_python_doc(parse, "lathe.parse", "lathe.parse(text, filename='<text>')")
_python_doc(compile, "lathe.compile", "lathe.compile(g, backend=None, cache=None, flags=None, schedule=None)")
_python_doc(run, "lathe.run", "lathe.run(g, feeds, backend='interp') with feeds a dict of NumPy arrays")
_python_doc(rewrite, "lathe.rewrite", "lathe.rewrite(g, rules, check=False, max_steps=None, seed=None, batch=None)")
_python_doc(rules.builtin, "lathe.rules.builtin", "lathe.rules.builtin(name)")
_python_doc(rules.load, "lathe.rules.load", "lathe.rules.load(path)")
for _m in ("step", "back", "seek", "run", "graph", "diff", "history", "stats", "breakpoint", "current"):
    _python_doc(getattr(Session, _m), "Session:" + _m, f"Session.{_m}")
for _m in ("kernels", "loop", "source", "asm", "run", "profile", "trace"):
    _python_doc(getattr(Program, _m), "Program:" + _m, f"Program.{_m}: kernel indices are 0-based")
for _m in ("text", "save", "summary"):
    _python_doc(getattr(Graph, _m), "Graph:" + _m, f"Graph.{_m}")
del _m
