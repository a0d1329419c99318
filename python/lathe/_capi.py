"""ctypes declarations of Lathe's C API (include/lathe/lathe.h) and finding liblathe.so.

The library is looked up, in order: $LATHE_LIBRARY; the Python environment's own lib/
(`cmake --install build --prefix .venv`); a build tree beside this package's source
(python/ next to build/, for developers); the system's library path (`cmake --install`
into /usr/local, then ldconfig).
"""
import ctypes
import ctypes.util
import os
import sys
from pathlib import Path

API_VERSION = 1


class LatheError(RuntimeError):
    """An error reported by Lathe; the message is Lathe's own (as the `lathe` command prints it)."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


def _candidates():
    env = os.environ.get("LATHE_LIBRARY")
    if env:
        yield env
        return
    for prefix in dict.fromkeys([sys.prefix, sys.base_prefix]):
        for lib in ("lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu"):
            yield str(Path(prefix) / lib / "liblathe.so.0")
    here = Path(__file__).resolve().parent
    for build in ("build", "build-capi"):
        yield str(here.parent.parent / build / "liblathe.so.0")
    found = ctypes.util.find_library("lathe")
    if found:
        yield found
    yield "liblathe.so.0"


def _load():
    tried = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path + " (absent)")
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError(
        "lathe: cannot find liblathe.so; build it (scripts/build.sh), install it "
        "(cmake --install build [--prefix VENV]) or set LATHE_LIBRARY. Tried: " + "; ".join(tried))


lib = _load()

c_status = ctypes.c_int
c_handle = ctypes.c_void_p
c_str = ctypes.c_char_p
c_size = ctypes.c_size_t
i32, i64, u64 = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64
P = ctypes.POINTER


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", i32), ("device_id", i32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", i32), ("dtype", DLDataType),
                ("shape", P(i64)), ("strides", P(i64)), ("byte_offset", u64)]


class Arg(ctypes.Structure):
    _fields_ = [("name", c_str), ("tensor", DLTensor)]


class Value(ctypes.Structure):
    pass


class _List(ctypes.Structure):
    _fields_ = [("items", P(Value)), ("n", c_size)]


class _ValueUnion(ctypes.Union):
    _fields_ = [("tensor", c_handle), ("i", i64), ("f", ctypes.c_double), ("s", c_str), ("list", _List)]


Value._fields_ = [("kind", i32), ("key", c_str), ("u", _ValueUnion)]
NIL, TENSOR, INT, FLOAT, BOOL, STRING, LIST = range(7)


class TensorInfo(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint32), ("op", c_str), ("dtype", c_str), ("ndim", i32), ("name", c_str)]


class KernelInfo(ctypes.Structure):
    _fields_ = [("name", c_str), ("kind", c_str), ("nodes", i32)]


class KernelProfile(ctypes.Structure):
    _fields_ = [("name", c_str), ("kind", c_str), ("bound", c_str), ("nodes", i32), ("calls", i32),
                ("ms", ctypes.c_double), ("min_ms", ctypes.c_double), ("flops", ctypes.c_double),
                ("bytes", ctypes.c_double), ("gflops", ctypes.c_double), ("gbps", ctypes.c_double),
                ("roof", ctypes.c_double)]


_out_str = P(ctypes.c_void_p)  # char** out: taken as a raw pointer, freed with lathe_string_free

_PROTOS = {
    "lathe_api_version": (ctypes.c_int, []),
    "lathe_version": (c_str, []),
    "lathe_last_error": (c_str, []),
    "lathe_string_free": (None, [ctypes.c_void_p]),
    "lathe_help": (c_status, [c_str, _out_str]),
    "lathe_help_topics": (c_status, [_out_str]),
    "lathe_call": (c_status, [c_str, P(Value), c_size, P(c_handle), c_size, P(c_size)]),
    "lathe_call_names": (c_status, [_out_str]),
    "lathe_tensor_from_buffer": (c_status, [P(DLTensor), P(c_handle)]),
    "lathe_tensor_retain": (c_handle, [c_handle]),
    "lathe_tensor_destroy": (None, [c_handle]),
    "lathe_tensor_describe": (c_status, [c_handle, P(TensorInfo)]),
    "lathe_tensor_dim": (c_status, [c_handle, i32, P(i64), P(c_str)]),
    "lathe_tensor_text": (c_status, [c_handle, _out_str]),
    "lathe_graph_load": (c_status, [c_str, P(c_handle)]),
    "lathe_graph_parse": (c_status, [c_str, c_str, P(c_handle)]),
    "lathe_graph_save": (c_status, [c_handle, c_str]),
    "lathe_graph_create": (c_status, [P(c_str), P(c_handle), c_size, P(c_handle)]),
    "lathe_graph_destroy": (None, [c_handle]),
    "lathe_graph_size": (c_status, [c_handle, P(c_size)]),
    "lathe_graph_text": (c_status, [c_handle, _out_str]),
    "lathe_graph_summary": (c_status, [c_handle, _out_str]),
    "lathe_graph_dot": (c_status, [c_handle, _out_str]),
    "lathe_graph_num_inputs": (c_status, [c_handle, P(c_size)]),
    "lathe_graph_num_outputs": (c_status, [c_handle, P(c_size)]),
    "lathe_graph_input": (c_status, [c_handle, c_size, P(c_handle)]),
    "lathe_graph_output": (c_status, [c_handle, c_size, P(c_str), P(c_handle)]),
    "lathe_rules_builtin": (c_status, [c_str, P(c_handle)]),
    "lathe_rules_load": (c_status, [c_str, P(c_handle)]),
    "lathe_rules_parse": (c_status, [c_str, c_str, P(c_handle)]),
    "lathe_rules_builtin_names": (c_status, [_out_str]),
    "lathe_rules_count": (c_status, [c_handle, P(c_size)]),
    "lathe_rules_destroy": (None, [c_handle]),
    "lathe_rewrite_create": (c_status, [c_handle, P(c_handle), c_size, P(Value), c_size, P(c_handle)]),
    "lathe_rewrite_destroy": (None, [c_handle]),
    "lathe_rewrite_step": (c_status, [c_handle, i32, P(i32)]),
    "lathe_rewrite_back": (c_status, [c_handle, i32]),
    "lathe_rewrite_seek": (c_status, [c_handle, i32]),
    "lathe_rewrite_run": (c_status, [c_handle, P(i32)]),
    "lathe_rewrite_position": (c_status, [c_handle, P(i32), P(i32)]),
    "lathe_rewrite_graph": (c_status, [c_handle, i32, P(c_handle)]),
    "lathe_rewrite_diff": (c_status, [c_handle, i32, i32, _out_str]),
    "lathe_rewrite_check": (c_status, [c_handle, P(i32), _out_str]),
    "lathe_rewrite_history": (c_status, [c_handle, _out_str]),
    "lathe_rewrite_stats": (c_status, [c_handle, _out_str]),
    "lathe_rewrite_breakpoint": (c_status, [c_handle, c_str, i32]),
    "lathe_compile": (c_status, [c_handle, P(Value), c_size, P(c_handle)]),
    "lathe_program_destroy": (None, [c_handle]),
    "lathe_program_backend": (c_str, [c_handle]),
    "lathe_program_graph": (c_status, [c_handle, P(c_handle)]),
    "lathe_program_num_kernels": (c_status, [c_handle, P(i32)]),
    "lathe_program_kernel": (c_status, [c_handle, i32, P(KernelInfo)]),
    "lathe_program_loop": (c_status, [c_handle, i32, _out_str]),
    "lathe_program_source": (c_status, [c_handle, i32, _out_str]),
    "lathe_program_asm": (c_status, [c_handle, i32, _out_str]),
    "lathe_program_output_shape": (c_status, [c_handle, P(Arg), c_size, c_size, P(i64), i32, P(i32)]),
    "lathe_program_run": (c_status, [c_handle, P(Arg), c_size, P(Arg), c_size]),
    "lathe_program_profile": (c_status, [c_handle, P(Arg), c_size, i32, P(ctypes.c_double), P(i32)]),
    "lathe_program_profile_kernel": (c_status, [c_handle, i32, P(KernelProfile)]),
    "lathe_program_profile_text": (c_status, [c_handle, _out_str]),
    "lathe_program_trace": (c_status, [c_handle, c_str]),
}
for _name, (_res, _args) in _PROTOS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

if lib.lathe_api_version() != API_VERSION:
    raise ImportError(f"lathe: liblathe.so speaks C API version {lib.lathe_api_version()}, "
                      f"this package version {API_VERSION}")


def check(status):
    """Raises LatheError with Lathe's message when a call failed."""
    if status != 0:
        raise LatheError(lib.lathe_last_error().decode("utf-8", "replace"), status)


def take_string(fn, *args):
    """Calls fn(*args, char** out) and returns the string, freeing Lathe's copy."""
    p = ctypes.c_void_p()
    check(fn(*args, ctypes.byref(p)))
    try:
        return ctypes.string_at(p.value).decode("utf-8", "replace") if p.value else ""
    finally:
        lib.lathe_string_free(p)


def enc(s):
    return s.encode("utf-8") if isinstance(s, str) else s
