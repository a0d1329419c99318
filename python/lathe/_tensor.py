"""lathe.Tensor: a lazy tensor expression, and `call`, the one entry point that reaches
every composite of the Lua API by name (C API: lathe_call). Methods are not written out
here: `x.softmax(-1)` looks `softmax` up in Lathe's own table, so a composite added to
Lathe is a method here the same day. Positional arguments pass as in Lua (0-based axes);
keyword arguments become Lua's trailing options table (`x.gelu(approximate="tanh")`).
"""
import ctypes

import numpy as np

from . import _capi as C
from ._capi import check, enc, lib

# Lathe dtype name <-> NumPy dtype <-> DLPack (code, bits)
DTYPES = {
    "f32": (np.float32, 2, 32), "f64": (np.float64, 2, 64), "f16": (np.float16, 2, 16),
    "i64": (np.int64, 0, 64), "i32": (np.int32, 0, 32), "i16": (np.int16, 0, 16), "i8": (np.int8, 0, 8),
    "u8": (np.uint8, 1, 8), "u16": (np.uint16, 1, 16), "u32": (np.uint32, 1, 32), "u64": (np.uint64, 1, 64),
    "bool": (np.bool_, 6, 8),
}
_NP_TO_DL = {np.dtype(v[0]): (v[1], v[2]) for v in DTYPES.values()}


def np_dtype(name):
    if name not in DTYPES:
        raise C.LatheError(f"dtype {name} has no NumPy equivalent")
    return np.dtype(DTYPES[name][0])


def fill_dltensor(d, a, shape_buf):
    """Points the DLTensor d at the C-contiguous array a (no copy). shape_buf: c_int64 array."""
    code_bits = _NP_TO_DL.get(a.dtype)
    if code_bits is None:
        raise C.LatheError(f"NumPy dtype {a.dtype} is not supported by Lathe")
    d.data = a.ctypes.data
    d.device.device_type = 1
    d.ndim = a.ndim
    d.dtype.code, d.dtype.bits = code_bits
    d.dtype.lanes = 1
    for i, n in enumerate(a.shape):
        shape_buf[i] = n
    d.shape = shape_buf
    d.strides = None
    d.byte_offset = 0


_methods = None


def method_names():
    global _methods
    if _methods is None:
        from ._capi import take_string
        m, f = set(), set()
        for line in take_string(lib.lathe_call_names).splitlines():
            kind, _, name = line.partition(" ")
            (m if kind == "method" else f).add(name)
        _methods = (m, f)
    return _methods


class _Keep:
    """Keeps the ctypes objects a Value array points into alive for one call."""

    def __init__(self):
        self.refs = []


def lathe_dtype(x):
    """"f32" for np.float32, np.dtype("float32"), "float32" or "f32"."""
    if isinstance(x, str) and x in DTYPES or x == "bf16":
        return x
    try:
        dt = np.dtype(x)
    except TypeError:
        raise C.LatheError(f"unknown dtype {x!r} (f32, f64, f16, bf16, i64, i32, i16, i8, u8, bool)") from None
    for name, (npt, _, _) in DTYPES.items():
        if np.dtype(npt) == dt:
            return name
    raise C.LatheError(f"NumPy dtype {dt} has no Lathe equivalent")


def _set_value(v, x, keep):
    if isinstance(x, (np.dtype, type)) and not isinstance(x, Tensor):
        x = lathe_dtype(x)
    if isinstance(x, Tensor):
        v.kind, v.u.tensor = C.TENSOR, x._h
    elif x is None:
        v.kind = C.NIL
    elif isinstance(x, (bool, np.bool_)):
        v.kind, v.u.i = C.BOOL, int(bool(x))
    elif isinstance(x, (int, np.integer)):
        v.kind, v.u.i = C.INT, int(x)
    elif isinstance(x, (float, np.floating)):
        v.kind, v.u.f = C.FLOAT, float(x)
    elif isinstance(x, str):
        s = enc(x)
        keep.refs.append(s)
        v.kind, v.u.s = C.STRING, s
    elif isinstance(x, (list, tuple)):
        items = (C.Value * max(len(x), 1))()
        keep.refs.append(items)
        for i, y in enumerate(x):
            _set_value(items[i], y, keep)
        v.kind = C.LIST
        v.u.list.items = items
        v.u.list.n = len(x)
    elif isinstance(x, np.ndarray):
        t = tensor(x)
        keep.refs.append(t)
        v.kind, v.u.tensor = C.TENSOR, t._h
    else:
        raise TypeError(f"lathe: cannot pass a {type(x).__name__} to Lathe")


def call(name, *args, **kwargs):
    """Calls a Lathe composite or lathe.* function by its Lua name; returns a Tensor (or a
    list of them for split/chunk). 'lathe.NAME' picks the module function over the method."""
    n = len(args) + len(kwargs)
    vals = (C.Value * max(n, 1))()
    keep = _Keep()
    for i, a in enumerate(args):
        _set_value(vals[i], a, keep)
    for j, (k, a) in enumerate(kwargs.items()):
        kb = enc(k)
        keep.refs.append(kb)
        vals[len(args) + j].key = kb
        _set_value(vals[len(args) + j], a, keep)
    cap = 16
    res = (C.c_handle * cap)()
    count = C.c_size()
    check(lib.lathe_call(enc(name), vals, n, res, cap, ctypes.byref(count)))
    if count.value > cap:  # more results than room: call again with room for all
        for i in range(cap):
            lib.lathe_tensor_destroy(res[i])
        cap = count.value
        res = (C.c_handle * cap)()
        check(lib.lathe_call(enc(name), vals, n, res, cap, ctypes.byref(count)))
    outs = [Tensor(res[i]) for i in range(count.value)]
    if name.split(".")[-1] in ("split", "chunk", "unbind"):
        return outs
    if len(outs) == 1:
        return outs[0]
    return outs


def tensor(array, dtype=None):
    """A constant tensor holding a copy of a NumPy array (or anything np.asarray takes)."""
    a = np.ascontiguousarray(array, dtype=np_dtype(lathe_dtype(dtype)) if dtype else None)
    if a.dtype == np.float64 and dtype is None and not isinstance(array, np.ndarray):
        a = a.astype(np.float32)  # Python floats become f32, as lathe.tensor{…} in Lua
    if a.dtype == np.int64 and dtype is None and not isinstance(array, np.ndarray):
        pass
    d = C.DLTensor()
    shape = (C.i64 * max(a.ndim, 1))()
    fill_dltensor(d, a, shape)
    h = C.c_handle()
    check(lib.lathe_tensor_from_buffer(ctypes.byref(d), ctypes.byref(h)))
    return Tensor(h.value)


def _help(topic):
    try:
        return C.take_string(lib.lathe_help, enc(topic))
    except C.LatheError:
        return None


class Tensor:
    """A lazy tensor expression (a node of a Lathe graph). Methods are Lathe's composites
    (`lathe help lua` lists them): x.matmul(w), x.softmax(-1), x.reshape([2, -1]), …;
    operators + - * / // % ** @ unary -, comparisons < <= > >= == != and & | ^ ~ on bools."""

    __slots__ = ("_h",)
    __array_priority__ = 1000  # ndarray + Tensor defers to Tensor.__radd__

    def __init__(self, handle):
        self._h = handle

    def __del__(self):
        if self._h and lib is not None:
            lib.lathe_tensor_destroy(self._h)
            self._h = None

    def _info(self):
        info = C.TensorInfo()
        check(lib.lathe_tensor_describe(self._h, ctypes.byref(info)))
        return info

    @property
    def shape(self):
        """Dims: ints, or strings for symbolic dims ("B")."""
        out = []
        for i in range(self._info().ndim):
            v, e = C.i64(), C.c_str()
            check(lib.lathe_tensor_dim(self._h, i, ctypes.byref(v), ctypes.byref(e)))
            out.append(v.value if v.value >= 0 else e.value.decode())
        return tuple(out)

    @property
    def dtype(self):
        return self._info().dtype.decode()

    @property
    def ndim(self):
        return self._info().ndim

    rank = ndim

    @property
    def op(self):
        return self._info().op.decode()

    @property
    def id(self):
        return self._info().id

    @property
    def name(self):
        return self._info().name.decode() or None

    def __repr__(self):
        return C.take_string(lib.lathe_tensor_text, self._h)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        methods, functions = method_names()
        if name not in methods:
            raise AttributeError(f"lathe.Tensor has no method '{name}' (`lathe help lua` lists them)")

        def method(*args, **kwargs):
            return call(name, self, *args, **kwargs)

        method.__name__ = name
        method.__doc__ = _help("Tensor:" + name)
        return method

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | method_names()[0])

    # operators (Lua's metamethods)
    def __add__(self, o): return call("add", self, o)
    def __radd__(self, o): return call("add", o, self)
    def __sub__(self, o): return call("sub", self, o)
    def __rsub__(self, o): return call("sub", o, self)
    def __mul__(self, o): return call("mul", self, o)
    def __rmul__(self, o): return call("mul", o, self)
    def __truediv__(self, o): return call("div", self, o)
    def __rtruediv__(self, o): return call("div", o, self)
    def __floordiv__(self, o): return call("floor_divide", self, o)
    def __rfloordiv__(self, o): return call("floor_divide", o, self)
    def __mod__(self, o): return call("remainder", self, o)
    def __rmod__(self, o): return call("remainder", o, self)
    def __pow__(self, o): return call("pow", self, o)
    def __rpow__(self, o): return call("pow", o, self)
    def __matmul__(self, o): return call("matmul", self, o)
    def __rmatmul__(self, o): return call("matmul", tensor(o) if isinstance(o, np.ndarray) else o, self)
    def __neg__(self): return call("neg", self)
    def __pos__(self): return self
    def __abs__(self): return call("abs", self)
    def __lt__(self, o): return call("lt", self, o)
    def __le__(self, o): return call("le", self, o)
    def __gt__(self, o): return call("gt", self, o)
    def __ge__(self, o): return call("ge", self, o)
    def __eq__(self, o): return call("eq", self, o)  # elementwise, as NumPy and PyTorch
    def __ne__(self, o): return call("ne", self, o)
    def __and__(self, o): return call("logical_and", self, o)
    def __or__(self, o): return call("logical_or", self, o)
    def __xor__(self, o): return call("logical_xor", self, o)
    def __invert__(self): return call("logical_not", self)
    __hash__ = object.__hash__

    def __bool__(self):
        raise TypeError("a lathe.Tensor is lazy: it has no truth value (compile and run the graph)")

    def __getitem__(self, idx):
        """x[i], x[a:b:s], x[..., i] and tuples of them (select / slice)."""
        if not isinstance(idx, tuple):
            idx = (idx,)
        if any(i is Ellipsis for i in idx):
            k = idx.index(Ellipsis)
            fill = self.ndim - (len(idx) - 1)
            idx = idx[:k] + (slice(None),) * fill + idx[k + 1:]
        t, axis = self, 0
        for i in idx:
            if isinstance(i, slice):
                if i != slice(None):
                    t = call("slice", t, axis, i.start, i.stop, i.step)
                axis += 1
            elif isinstance(i, (int, np.integer)):
                t = call("select", t, axis, int(i))
            elif i is None:
                t = call("unsqueeze", t, axis)
                axis += 1
            else:
                raise TypeError(f"lathe.Tensor index: {type(i).__name__} is not supported (ints, slices, ..., None)")
        return t
