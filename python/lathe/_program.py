"""lathe.compile → Program (kernels, loop IR, source, assembly, run, profile) and lathe.run.

Program.run(feeds) is the zero-copy path: the kernels read the feeds' NumPy buffers in
place and write straight into freshly allocated result arrays (C API: lathe_program_run
with DLPack descriptors). The descriptors are allocated once per program and output shapes
are cached per input shapes, so a call costs a few microseconds beyond the kernels.
"""
import ctypes
import threading

import numpy as np

from . import _capi as C
from ._capi import check, enc, lib, take_string
from ._graph import Graph
from ._tensor import _NP_TO_DL, fill_dltensor, np_dtype

_addressof, _cchar = ctypes.addressof, ctypes.c_char
# run()'s entry points take descriptor addresses (ints) rather than ctypes arrays
_run = ctypes.CFUNCTYPE(C.c_status, C.c_handle, ctypes.c_void_p, C.c_size, ctypes.c_void_p, C.c_size)(
    ("lathe_program_run", lib))
_shape = ctypes.CFUNCTYPE(C.c_status, C.c_handle, ctypes.c_void_p, C.c_size, C.c_size, ctypes.POINTER(C.i64), C.i32,
                          ctypes.POINTER(C.i32))(("lathe_program_output_shape", lib))


class ProfileReport(list):
    """Per-kernel rows (dicts: name, kind, ms, min_ms, flops, bytes, gflops, gbps, roof,
    bound, nodes, calls); .text is the table, .total_ms the median whole-program time."""

    text = ""
    total_ms = 0.0

    def __str__(self):
        return self.text


class Program:
    """A compiled graph (lathe.compile). Kernel indices are 0-based."""

    def __init__(self, handle, graph):
        self._h = handle
        self.graph = graph
        self.backend = lib.lathe_program_backend(handle).decode()
        ins = graph.inputs
        self._in_names = [t.name for t in ins]
        self._in_dtypes = [np_dtype(t.dtype) for t in ins]
        self._in_ranks = [t.ndim for t in ins]
        outs = graph.outputs
        self._out_names = list(outs)
        self._out_dtypes = [np_dtype(t.dtype) for t in outs.values()]
        self._out_ranks = [t.ndim for t in outs.values()]
        self._in_args = (C.Arg * max(len(ins), 1))()
        self._in_shapes = [(C.i64 * max(r, 1))() for r in self._in_ranks]
        self._name_bytes = [enc(n) for n in self._in_names]
        for i, nb in enumerate(self._name_bytes):
            self._in_args[i].name = nb
        self._out_args = (C.Arg * max(len(outs), 1))()
        self._out_shapes = [(C.i64 * max(r, 1))() for r in self._out_ranks]
        self._out_name_bytes = [enc(n) for n in self._out_names]
        for i, nb in enumerate(self._out_name_bytes):
            self._out_args[i].name = nb
        self._shape_cache = {}
        self._lock = threading.Lock()
        self._fast_setup()

    def __del__(self):
        if getattr(self, "_h", None) and lib is not None:
            lib.lathe_program_destroy(self._h)
            self._h = None

    def __repr__(self):
        return f"<lathe.Program {self.backend}, {len(self.kernels())} kernels>"

    # ------------------------------------------------------------ inspection
    def kernels(self):
        """The fused kernels: [{name, kind, nodes}]."""
        n = C.i32()
        check(lib.lathe_program_num_kernels(self._h, ctypes.byref(n)))
        out = []
        for k in range(n.value):
            info = C.KernelInfo()
            check(lib.lathe_program_kernel(self._h, k, ctypes.byref(info)))
            out.append({"name": info.name.decode(), "kind": info.kind.decode(), "nodes": info.nodes})
        return out

    def loop(self, k):
        """Loop IR of kernel k (0-based), with its schedule."""
        return take_string(lib.lathe_program_loop, self._h, int(k))

    def source(self, k):
        """Generated source of kernel k: C, LLVM IR or CUDA C."""
        return take_string(lib.lathe_program_source, self._h, int(k))

    def asm(self, k):
        """Assembly of kernel k: llvm (the JIT's), c (the compiler's -S), cuda (PTX)."""
        return take_string(lib.lathe_program_asm, self._h, int(k))

    # ------------------------------------------------------------ running
    def _bind(self, feeds):
        """Fills the input descriptors from feeds; returns (arrays kept alive, shape key)."""
        if len(feeds) != len(self._in_names) or any(k not in feeds for k in self._in_names):
            for k in feeds:
                if k not in self._in_names:
                    raise C.LatheError(f"the graph has no input '{k}' (inputs: {', '.join(self._in_names) or 'none'})")
            missing = [k for k in self._in_names if k not in feeds]
            if missing:
                raise C.LatheError(f"missing input '{missing[0]}'")
        arrays = []
        key = []
        args = self._in_args
        for i, name in enumerate(self._in_names):
            a = feeds[name]
            if type(a) is not np.ndarray:
                a = np.ascontiguousarray(a, dtype=self._in_dtypes[i])
            elif not a.flags.c_contiguous:
                a = np.ascontiguousarray(a)
            if a.ndim > len(self._in_shapes[i]):
                self._in_shapes[i] = (C.i64 * a.ndim)()
            fill_dltensor(args[i].tensor, a, self._in_shapes[i])
            arrays.append(a)
            key.append(a.shape)
        return arrays, tuple(key)

    def _output_shapes(self, key, in_addr):
        shapes = self._shape_cache.get(key)
        if shapes is None:
            shapes = []
            buf = (C.i64 * 64)()
            nd = C.i32()
            for o in range(len(self._out_names)):
                check(_shape(self._h, in_addr, len(self._in_names), o, buf, 64,
                                                     ctypes.byref(nd)))
                shapes.append(tuple(buf[i] for i in range(nd.value)))
            if len(self._shape_cache) > 64:
                self._shape_cache.clear()
            self._shape_cache[key] = shapes
        return shapes

    def _fast_setup(self):
        """Descriptor memory for run(): one int64 buffer holding the lathe_arg records (7
        words each: name, data, device, ndim|dtype, shape, strides, byte_offset) and their
        shape arrays, written with NumPy stores instead of ctypes field assignments."""
        nin, nout = len(self._in_names), len(self._out_names)
        ranks = self._in_ranks + self._out_ranks
        buf = np.zeros(7 * (nin + nout) + sum(ranks) + 1, np.int64)
        base = buf.ctypes.data
        self._names_c = [ctypes.c_char_p(n) for n in self._name_bytes + self._out_name_bytes]
        off = 7 * (nin + nout)
        self._shape_off = []
        dts = self._in_dtypes + self._out_dtypes
        for i in range(nin + nout):
            w = 7 * i
            buf[w] = ctypes.cast(self._names_c[i], ctypes.c_void_p).value
            buf[w + 2] = 1  # kDLCPU, device 0
            code, bits = _NP_TO_DL[dts[i]]
            buf[w + 3] = ranks[i] | (code << 32) | (bits << 40) | (1 << 48)
            buf[w + 4] = base + 8 * off
            self._shape_off.append(off)
            off += ranks[i]
        self._buf = buf
        self._in_addr = base
        self._out_addr = base + 8 * 7 * nin

    def run(self, feeds):
        """Runs on {input name: array}; returns {output name: array} (fresh NumPy arrays
        the kernels wrote into directly; C-contiguous inputs of the graph's dtype are read
        in place, others are converted first: lists, strided views, and arrays of a dtype
        NumPy casts "same_kind" (float64 feeds for an f32 input); float to int is an error)."""
        with self._lock:  # the descriptor buffer is shared by the program's callers
            return self._run(feeds)

    def _run(self, feeds):
        buf = self._buf
        names = self._in_names
        if len(feeds) != len(names):
            return self._run_checked(feeds)
        key = []
        keep = []
        so = self._shape_off
        for i, name in enumerate(names):
            a = feeds.get(name)
            if (type(a) is not np.ndarray or a.dtype != self._in_dtypes[i] or a.ndim != self._in_ranks[i]
                    or not a.flags.c_contiguous):
                return self._run_checked(feeds)
            try:  # from_buffer is ~3x cheaper than a.ctypes.data; it refuses read-only arrays
                buf[7 * i + 1] = _addressof(_cchar.from_buffer(a))
            except (TypeError, ValueError):
                buf[7 * i + 1] = a.ctypes.data
            sh = a.shape
            k = so[i]
            for d in sh:
                buf[k] = d
                k += 1
            key.append(sh)
            keep.append(a)
        key = tuple(key)
        shapes = self._shape_cache.get(key)
        if shapes is None:
            shapes = self._output_shapes(key, self._in_addr)
        results = {}
        nin = len(names)
        for o, name in enumerate(self._out_names):
            r = np.empty(shapes[o], dtype=self._out_dtypes[o])
            try:
                buf[7 * (nin + o) + 1] = _addressof(_cchar.from_buffer(r))
            except ValueError:  # zero-size
                buf[7 * (nin + o) + 1] = r.ctypes.data
            k = so[nin + o]
            for d in shapes[o]:
                buf[k] = d
                k += 1
            results[name] = r
        check(_run(self._h, self._in_addr, nin, self._out_addr, len(self._out_names)))
        return results

    def _run_checked(self, feeds):
        """run() for feeds that need conversion (lists, other dtypes, strided arrays) or
        checking (missing or unknown names): converted copies, then the fast path."""
        for k in feeds:
            if k not in self._in_names:
                raise C.LatheError(f"the graph has no input '{k}' (inputs: {', '.join(self._in_names) or 'none'})")
        conv = {}
        for i, name in enumerate(self._in_names):
            if name not in feeds:
                raise C.LatheError(f"missing input '{name}' (expected {self._in_dtypes[i]} of rank {self._in_ranks[i]})")
            a = feeds[name]
            if type(a) is not np.ndarray:
                a = np.asarray(a, dtype=self._in_dtypes[i])
            elif a.dtype != self._in_dtypes[i] and np.can_cast(a.dtype, self._in_dtypes[i], "same_kind"):
                a = a.astype(self._in_dtypes[i])  # float64 → f32 and the like; float → int is an error
            if a.dtype != self._in_dtypes[i] or a.ndim != self._in_ranks[i]:
                # let Lathe report it, with its message
                arrays, _ = self._bind(feeds)
                check(lib.lathe_program_run(self._h, self._in_args, len(arrays), None, 0))
                raise C.LatheError(f"input '{name}' does not match the graph")  # not reached
            conv[name] = np.ascontiguousarray(a)
        return self._run(conv)

    def run_into(self, feeds, results):
        """Runs writing into caller-owned arrays {output name: array} (C-contiguous, of the
        dtype and shape the program computes); outputs not named are computed and dropped."""
        with self._lock:
            return self._run_into(feeds, results)

    def _run_into(self, feeds, results):
        arrays, _ = self._bind(feeds)
        outs = (C.Arg * max(len(results), 1))()
        keep = []
        for i, (name, r) in enumerate(results.items()):
            if not isinstance(r, np.ndarray) or not r.flags.c_contiguous or not r.flags.writeable:
                raise C.LatheError(f"output '{name}': pass a writeable C-contiguous NumPy array")
            nb = enc(name)
            shape = (C.i64 * max(r.ndim, 1))()
            keep += [nb, shape]
            outs[i].name = nb
            fill_dltensor(outs[i].tensor, r, shape)
        check(lib.lathe_program_run(self._h, self._in_args, len(arrays), outs, len(results)))
        return results

    def profile(self, iters=20, inputs=None):
        """Per-kernel timings over `iters` runs (inputs not given: seeded random data)."""
        inputs = inputs or {}
        args = (C.Arg * max(len(inputs), 1))()
        keep = []
        for i, (name, a) in enumerate(inputs.items()):
            a = np.ascontiguousarray(a)
            nb = enc(name)
            shape = (C.i64 * max(a.ndim, 1))()
            keep += [a, nb, shape]
            args[i].name = nb
            fill_dltensor(args[i].tensor, a, shape)
        total, rows = ctypes.c_double(), C.i32()
        check(lib.lathe_program_profile(self._h, args, len(inputs), int(iters), ctypes.byref(total), ctypes.byref(rows)))
        rep = ProfileReport()
        for k in range(rows.value):
            r = C.KernelProfile()
            check(lib.lathe_program_profile_kernel(self._h, k, ctypes.byref(r)))
            rep.append({"name": r.name.decode(), "kind": r.kind.decode(), "bound": r.bound.decode(), "nodes": r.nodes,
                        "calls": r.calls, "ms": r.ms, "time": r.ms, "min_ms": r.min_ms, "flops": r.flops,
                        "bytes": r.bytes, "gflops": r.gflops, "gbps": r.gbps, "roof": r.roof})
        rep.text = take_string(lib.lathe_program_profile_text, self._h)
        rep.total_ms = total.value
        return rep

    def trace(self, path):
        """Writes a Chrome trace-event JSON of the last profile (profiling first if none)."""
        try:
            check(lib.lathe_program_trace(self._h, enc(str(path))))
        except C.LatheError:
            self.profile(iters=5)
            check(lib.lathe_program_trace(self._h, enc(str(path))))
        return str(path)


def compile(g, backend=None, cache=None, flags=None, schedule=None):
    """Compiles g to kernels: backend "llvm" (the default when built), "c", "cuda" or
    "interp"; cache=False skips the on-disk kernel cache; flags: extra C compiler flags;
    schedule=False keeps plain loops."""
    if not isinstance(g, Graph):
        raise C.LatheError(f"lathe.compile: expected a graph, got a {type(g).__name__}")
    opts = [(k, v) for k, v in (("backend", backend), ("cache", cache), ("flags", flags), ("schedule", schedule))
            if v is not None]
    vals = (C.Value * max(len(opts), 1))()
    keep = []
    for i, (k, v) in enumerate(opts):
        kb = enc(k)
        keep.append(kb)
        vals[i].key = kb
        if isinstance(v, bool):
            vals[i].kind, vals[i].u.i = C.BOOL, int(v)
        else:
            sb = enc(str(v))
            keep.append(sb)
            vals[i].kind, vals[i].u.s = C.STRING, sb
    h = C.c_handle()
    check(lib.lathe_compile(g._h, vals, len(opts), ctypes.byref(h)))
    return Program(h.value, g)


def run(g, feeds, backend="interp"):
    """Runs g once on {name: array}; returns {output name: array}. The backend defaults to
    the reference interpreter, as lathe.run in Lua."""
    return compile(g, backend=backend).run(feeds)
