"""lathe.Graph, lathe.graph(**outputs), lathe.load, lathe.parse."""
import ctypes
import shutil
import subprocess

from . import _capi as C
from ._capi import check, enc, lib, take_string
from ._tensor import Tensor


class Graph:
    """An immutable tensor graph with named outputs. len(g) is its node count."""

    __slots__ = ("_h",)

    def __init__(self, handle):
        self._h = handle

    def __del__(self):
        if self._h and lib is not None:
            lib.lathe_graph_destroy(self._h)
            self._h = None

    def __len__(self):
        n = C.c_size()
        check(lib.lathe_graph_size(self._h, ctypes.byref(n)))
        return n.value

    def text(self):
        """The graph as .lathe text."""
        return take_string(lib.lathe_graph_text, self._h)

    def save(self, path):
        """Writes .lathe text (atomically)."""
        check(lib.lathe_graph_save(self._h, enc(str(path))))

    def summary(self):
        return take_string(lib.lathe_graph_summary, self._h)

    def dot(self):
        """The graph in Graphviz DOT."""
        return take_string(lib.lathe_graph_dot, self._h)

    def __str__(self):
        return self.summary()

    def __repr__(self):
        return f"<lathe.Graph {len(self)} nodes, inputs {self.input_names}, outputs {self.output_names}>"

    @property
    def inputs(self):
        """Input tensors, in order."""
        n = C.c_size()
        check(lib.lathe_graph_num_inputs(self._h, ctypes.byref(n)))
        out = []
        for i in range(n.value):
            h = C.c_handle()
            check(lib.lathe_graph_input(self._h, i, ctypes.byref(h)))
            out.append(Tensor(h.value))
        return out

    @property
    def input_names(self):
        return [t.name for t in self.inputs]

    @property
    def outputs(self):
        """{name: tensor}, in output order."""
        n = C.c_size()
        check(lib.lathe_graph_num_outputs(self._h, ctypes.byref(n)))
        out = {}
        for i in range(n.value):
            h, name = C.c_handle(), C.c_str()
            check(lib.lathe_graph_output(self._h, i, ctypes.byref(name), ctypes.byref(h)))
            out[name.value.decode()] = Tensor(h.value)
        return out

    @property
    def output_names(self):
        return list(self.outputs)

    def output(self, name):
        o = self.outputs
        if name not in o:
            raise C.LatheError(f"the graph has no output '{name}'")
        return o[name]

    def input(self, name):
        for t in self.inputs:
            if t.name == name:
                return t
        raise C.LatheError(f"the graph has no input '{name}'")

    def _repr_svg_(self):
        """Jupyter: the graph drawn by Graphviz (None when `dot` is not installed)."""
        dot = shutil.which("dot")
        if not dot:
            return None
        r = subprocess.run([dot, "-Tsvg"], input=self.dot().encode(), capture_output=True, timeout=60)
        return r.stdout.decode() if r.returncode == 0 else None


def graph(*single, **outputs):
    """lathe.graph(y=y, z=z): a graph with these named outputs (in the order written);
    lathe.graph(t) names its one output "out"; lathe.graph({"y": y}) takes a dict."""
    if single:
        if len(single) != 1 or outputs:
            raise TypeError("lathe.graph(**outputs) | lathe.graph(tensor) | lathe.graph(dict)")
        outputs = dict(single[0]) if isinstance(single[0], dict) else {"out": single[0]}
    if not outputs:
        raise C.LatheError("lathe.graph: no outputs (write lathe.graph(y=y))")
    names = (C.c_str * len(outputs))(*[enc(k) for k in outputs])
    for k, t in outputs.items():
        if not isinstance(t, Tensor):
            raise C.LatheError(f"lathe.graph: output '{k}' is a {type(t).__name__}, expected a tensor")
    hs = (C.c_handle * len(outputs))(*[t._h for t in outputs.values()])
    h = C.c_handle()
    check(lib.lathe_graph_create(names, hs, len(outputs), ctypes.byref(h)))
    return Graph(h.value)


def load(path):
    """A graph from a file: .lathe (text IR), .lua (a script returning lathe.graph{…}), .onnx."""
    h = C.c_handle()
    check(lib.lathe_graph_load(enc(str(path)), ctypes.byref(h)))
    return Graph(h.value)


def parse(text, filename="<text>"):
    """A graph from .lathe text."""
    h = C.c_handle()
    check(lib.lathe_graph_parse(enc(text), enc(filename), ctypes.byref(h)))
    return Graph(h.value)
