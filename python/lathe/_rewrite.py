"""lathe.rules (builtin, load, parse, list) and lathe.rewrite sessions."""
import ctypes
import types

from . import _capi as C
from ._capi import check, enc, lib, take_string
from ._graph import Graph


class Rules:
    """A rule set (written in Lathe's Lua rule DSL). len(r) is its rule count."""

    __slots__ = ("_h", "name")

    def __init__(self, handle, name):
        self._h, self.name = handle, name

    def __del__(self):
        if self._h and lib is not None:
            lib.lathe_rules_destroy(self._h)
            self._h = None

    def __len__(self):
        n = C.c_size()
        check(lib.lathe_rules_count(self._h, ctypes.byref(n)))
        return n.value

    def __repr__(self):
        return f"<lathe.Rules {self.name}: {len(self)} rules>"


def _builtin(name):
    """A built-in rule set (assets/rules/NAME.lua): simplify, algebraic, fusion, …"""
    h = C.c_handle()
    check(lib.lathe_rules_builtin(enc(name), ctypes.byref(h)))
    return Rules(h.value, name)


def _load(path):
    """A rule file: Lua that returns lathe.ruleset{…} or a table of rules."""
    h = C.c_handle()
    check(lib.lathe_rules_load(enc(str(path)), ctypes.byref(h)))
    return Rules(h.value, str(path))


def _parse(source, name="rules"):
    """Rules from Lua source text (the rule DSL): it must return a ruleset or a table of rules."""
    h = C.c_handle()
    check(lib.lathe_rules_parse(enc(source), enc(name), ctypes.byref(h)))
    return Rules(h.value, name)


def _list():
    """The names of the built-in rule sets."""
    return take_string(lib.lathe_rules_builtin_names).split()


rules = types.SimpleNamespace(builtin=_builtin, load=_load, parse=_parse, list=_list)


class Session:
    """A rewrite session (lathe.rewrite): step, back, seek, run, graph, diff, check."""

    __slots__ = ("_h", "_rules")

    def __init__(self, handle, rules_):
        self._h, self._rules = handle, rules_

    def __del__(self):
        if self._h and lib is not None:
            lib.lathe_rewrite_destroy(self._h)
            self._h = None

    def _pos(self):
        cur, last = C.i32(), C.i32()
        check(lib.lathe_rewrite_position(self._h, ctypes.byref(cur), ctypes.byref(last)))
        return cur.value, last.value

    def step(self, n=None):
        """One rewrite: its line ("#3 fold-add @%12: -2 +1"), or None at a fixpoint.
        With n: up to n rewrites, as a list of lines."""
        k = 1 if n is None else int(n)
        applied = C.i32()
        check(lib.lathe_rewrite_step(self._h, k, ctypes.byref(applied)))
        lines = self.history()[self.current() - applied.value:self.current()] if applied.value else []
        if n is None:
            return lines[0] if lines else None
        return lines

    def back(self, n=1):
        """Go back n steps."""
        check(lib.lathe_rewrite_back(self._h, int(n)))
        return self

    def seek(self, k):
        """Go to step k (0 = the original graph)."""
        check(lib.lathe_rewrite_seek(self._h, int(k)))
        return self

    def run(self):
        """Rewrite to a fixpoint (stops at breakpoints); returns the history entries added."""
        steps = C.i32()
        check(lib.lathe_rewrite_run(self._h, ctypes.byref(steps)))
        return steps.value

    def current(self):
        """The step shown (0 = the original graph)."""
        return self._pos()[0]

    def __len__(self):
        """Steps in the history."""
        return self._pos()[1]

    def graph(self, k=None):
        """The graph at the current step (or at step k)."""
        h = C.c_handle()
        check(lib.lathe_rewrite_graph(self._h, -1 if k is None else int(k), ctypes.byref(h)))
        return Graph(h.value)

    def diff(self, a=None, b=None):
        """Nodes added (+), removed (-) and changed (~) from step a (default: the previous
        one) to step b (default: the current one), one per line."""
        cur = self.current()
        a = max(0, cur - 1) if a is None else a
        b = cur if b is None else b
        return take_string(lib.lathe_rewrite_diff, self._h, int(a), int(b))

    def check(self):
        """Interprets step 0 and the current step on seeded random inputs: {"ok", "message"}."""
        ok = C.i32()
        p = ctypes.c_void_p()
        check(lib.lathe_rewrite_check(self._h, ctypes.byref(ok), ctypes.byref(p)))
        msg = ctypes.string_at(p.value).decode() if p.value else ""
        lib.lathe_string_free(p)
        return {"ok": bool(ok.value), "message": msg}

    def history(self):
        """The steps so far, one line each."""
        return take_string(lib.lathe_rewrite_history, self._h).splitlines()

    def stats(self):
        """Per rule: tried, matched, fired, time (a table)."""
        return take_string(lib.lathe_rewrite_stats, self._h)

    def breakpoint(self, rule, on=True):
        """run() stops before this rule fires."""
        check(lib.lathe_rewrite_breakpoint(self._h, enc(rule), 1 if on else 0))
        return self


def rewrite(g, rules_, check=False, max_steps=None, seed=None, batch=None):
    """A rewrite session over g with these rules: a Rules (lathe.rules.builtin(name),
    .load, .parse), a built-in set's name, or a list of them. check=True interprets every
    step before and after on seeded random inputs."""
    if not isinstance(g, Graph):
        raise C.LatheError(f"lathe.rewrite: expected a graph, got a {type(g).__name__}")
    sets = list(rules_) if isinstance(rules_, (list, tuple)) else [rules_]
    sets = [_builtin(r) if isinstance(r, str) else r for r in sets]
    for r in sets:
        if not isinstance(r, Rules):
            raise C.LatheError(f"lathe.rewrite: expected rules (lathe.rules.builtin(name)), got a {type(r).__name__}")
    opts = {"check": check, "max_steps": max_steps, "seed": seed, "batch": batch}
    opts = {k: v for k, v in opts.items() if v is not None}
    vals = (C.Value * max(len(opts), 1))()
    keys = []
    for i, (k, v) in enumerate(opts.items()):
        keys.append(enc(k))
        vals[i].key = keys[-1]
        if isinstance(v, bool):
            vals[i].kind, vals[i].u.i = C.BOOL, int(v)
        else:
            vals[i].kind, vals[i].u.i = C.INT, int(v)
    h = C.c_handle()
    _check = globals()["check"]
    hs = (C.c_handle * len(sets))(*[r._h for r in sets])
    _check(lib.lathe_rewrite_create(g._h, hs, len(sets), vals, len(opts), ctypes.byref(h)))
    return Session(h.value, sets)
