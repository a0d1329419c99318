# Building graphs from Python and checking them against NumPy, on every CPU backend.
import numpy as np
import pytest

import lathe

BACKENDS = ["interp", "c", "llvm"]
rng = np.random.default_rng(7)


def softmax(z, axis=-1):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("batch", [1, 13, 64])
def test_mlp_matches_numpy(backend, batch):
    x = lathe.input("x", ["B", 37])
    w = lathe.input("w", [37, 11])
    g = lathe.graph(y=(x.matmul(w) + 1.0).relu().softmax(-1))
    xa = rng.standard_normal((batch, 37)).astype(np.float32)
    wa = rng.standard_normal((37, 11)).astype(np.float32)
    out = lathe.compile(g, backend=backend).run({"x": xa, "w": wa})
    assert set(out) == {"y"}
    assert out["y"].shape == (batch, 11) and out["y"].dtype == np.float32
    np.testing.assert_allclose(out["y"], softmax(np.maximum(xa @ wa + 1, 0)), rtol=1e-4, atol=1e-6)


def test_operators_and_methods_match_numpy():
    a = lathe.input("a", [5, 7])
    b = lathe.input("b", [7])
    outs = {
        "arith": (a + 1.0) * 2.0 - b / 3.0,
        "rsub": 1.0 - a,
        "pow": a ** 2,
        "neg": -a,
        "matmul": a @ lathe.tensor(np.eye(7, dtype=np.float32)),
        "where": lathe.where(a > 0.0, a, 0.0),
        "sum": a.sum(1, True),
        "mean": a.mean(0),
        "amax": a.amax(-1),
        "perm": a.permute(1, 0),
        "reshape": a.reshape([7, 5]),
        "slice": a[1:4, ::2],
        "select": a[2],
        "cat": lathe.cat([a, a], 0),
        "gelu": a.gelu("tanh"),
        "tanh": a.tanh(),
        "cmp": (a > b).float(),
    }
    g = lathe.graph(**outs)
    assert list(g.outputs) == list(outs)  # the order written
    aa = rng.standard_normal((5, 7)).astype(np.float32)
    bb = rng.standard_normal(7).astype(np.float32)
    r = lathe.compile(g, backend="llvm").run({"a": aa, "b": bb})
    gelu = 0.5 * aa * (1 + np.tanh(np.sqrt(2 / np.pi) * (aa + 0.044715 * aa ** 3)))
    want = {
        "arith": (aa + 1) * 2 - bb / 3, "rsub": 1 - aa, "pow": aa ** 2, "neg": -aa, "matmul": aa,
        "where": np.where(aa > 0, aa, 0), "sum": aa.sum(1, keepdims=True), "mean": aa.mean(0),
        "amax": aa.max(-1), "perm": aa.T, "reshape": aa.reshape(7, 5), "slice": aa[1:4, ::2],
        "select": aa[2], "cat": np.concatenate([aa, aa]), "gelu": gelu, "tanh": np.tanh(aa),
        "cmp": (aa > bb).astype(np.float32),
    }
    for k, v in want.items():
        np.testing.assert_allclose(r[k], v, rtol=1e-5, atol=1e-5, err_msg=k)


def test_one_generic_entry_point_reaches_every_composite():
    methods, functions = lathe.method_names()
    for name in ("matmul", "softmax", "conv2d", "layer_norm", "gelu", "reshape", "scaled_dot_product_attention"):
        assert name in methods or name in functions, name
    x = lathe.input("x", [2, 3, 8, 8])
    w = lathe.input("w", [4, 3, 3, 3])
    # a keyword naming a positional parameter of the Lua signature goes in its place
    # (x:conv2d(weight [, bias [, stride [, padding …), others into the options table
    y = lathe.call("conv2d", x, w, padding=1)
    assert y.shape == (2, 4, 8, 8) and y.dtype == "f32"
    assert x.conv2d(w, stride=2).shape == (2, 4, 3, 3)
    assert x.sum(axis=1, keepdim=True).shape == (2, 1, 8, 8)
    with pytest.raises(lathe.LatheError, match="given twice"):
        x.conv2d(w, weight=w)
    parts = x.split(1, 1)
    assert isinstance(parts, list) and len(parts) == 3 and parts[0].shape == (2, 1, 8, 8)


def test_tensor_properties_and_errors():
    x = lathe.input("x", ["B", 4])
    assert x.shape == ("B", 4) and x.ndim == 2 and x.name == "x" and x.op == "Input"
    assert "Tensor f32[B, 4]" in repr(x)
    with pytest.raises(lathe.LatheError, match="inner dims differ"):
        x.matmul(lathe.input("w", [3, 3]))
    with pytest.raises(AttributeError, match="no method 'frobnicate'"):
        x.frobnicate()
    with pytest.raises(TypeError):
        bool(x > 0.0)
    with pytest.raises(lathe.LatheError, match="cannot open"):
        lathe.load("/nonexistent/model.lathe")
    g = lathe.graph(y=x * 2.0)
    p = lathe.compile(g, backend="c")
    with pytest.raises(lathe.LatheError, match="missing input 'x'"):
        p.run({})
    with pytest.raises(lathe.LatheError, match="no input 'q'"):
        p.run({"x": np.ones((2, 4), np.float32), "q": np.ones(1)})
    with pytest.raises(lathe.LatheError, match="dim 1 is 5, expected f32\\[B, 4\\]"):
        p.run({"x": np.ones((2, 5), np.float32)})
    i = lathe.compile(lathe.graph(y=lathe.input("n", [2], np.int32) + 1), backend="c")
    with pytest.raises(lathe.LatheError, match="dtype f64, expected i32"):
        i.run({"n": np.ones(2)})  # float → int is not cast
    assert i.run({"n": np.ones(2, np.int64)})["y"].tolist() == [2, 2]
    with pytest.raises(lathe.LatheError, match="unknown option 'bogus'|no backend|unknown backend"):
        lathe.compile(g, backend="bogus")


def test_feeds_are_converted_when_not_arrays_and_strided_views_work():
    x = lathe.input("x", [2, 3], "float32")
    assert x.dtype == "f32" and lathe.input("q", [1], np.float64).dtype == "f64"
    p = lathe.compile(lathe.graph(y=x + 1.0), backend="llvm")
    np.testing.assert_allclose(p.run({"x": np.full((2, 3), 0.5)})["y"], np.full((2, 3), 1.5))  # float64 feed
    np.testing.assert_array_equal(p.run({"x": [[1, 2, 3], [4, 5, 6]]})["y"], [[2, 3, 4], [5, 6, 7]])
    big = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(p.run({"x": big[:2, 1:]})["y"], big[:2, 1:] + 1)


def test_graph_api(tmp_path):
    x = lathe.input("x", [3])
    g = lathe.graph(y=x.exp(), z=x + x)
    assert len(g) > 2
    assert g.input_names == ["x"] and g.output_names == ["y", "z"]
    text = g.text()
    assert lathe.parse(text).text() == text
    path = tmp_path / "g.lathe"
    g.save(path)
    assert lathe.load(path).text() == text
    assert "digraph" in g.dot()
    svg = g._repr_svg_()
    assert svg is None or "<svg" in svg
    assert lathe.graph(x.exp()).output_names == ["out"]


def test_samples_load_in_every_format(repo_root=None):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    lua = lathe.load(root / "samples" / "01-mlp.lua")
    txt = lathe.load(root / "samples" / "01-mlp.lathe")
    assert len(lua) == len(txt) and lua.output_names == txt.output_names
    onnx = sorted((root / "samples" / "onnx").glob("*.onnx"))
    if onnx:
        assert len(lathe.load(onnx[0])) > 0


def test_docstrings_come_from_lathe_help():
    assert "compile to kernels" in lathe.compile.__doc__
    assert lathe.help("lathe.compile").startswith("lathe.compile(g")
    x = lathe.input("x", [2])
    assert "x:softmax" in x.softmax.__doc__ or "softmax" in x.softmax.__doc__
    assert lathe.rewrite.__doc__ and "rewrite session" in lathe.rewrite.__doc__


def test_outputs_that_alias_pass_through_or_are_constants():
    x = lathe.input("x", [3])
    e = x.exp()
    g = lathe.graph(a=x, b=e, c=e, d=lathe.tensor(np.arange(3, dtype=np.float32)))
    xa = np.array([0.5, -1.0, 2.0], np.float32)
    for backend in BACKENDS:
        r = lathe.compile(g, backend=backend).run({"x": xa})
        np.testing.assert_array_equal(r["a"], xa)
        np.testing.assert_allclose(r["b"], np.exp(xa), rtol=1e-6)
        np.testing.assert_allclose(r["c"], np.exp(xa), rtol=1e-6)
        np.testing.assert_array_equal(r["d"], [0, 1, 2])


@pytest.mark.parametrize("sample", ["01-mlp.lathe", "03-softmax.lua", "07-mlp-train-step.lathe"])
def test_samples_on_llvm_match_the_interpreter(sample):
    from pathlib import Path

    g = lathe.load(Path(__file__).resolve().parents[2] / "samples" / sample)
    feeds = {}
    for t in g.inputs:
        shape = [d if isinstance(d, int) else 3 for d in t.shape]
        feeds[t.name] = (rng.standard_normal(shape) * 0.5).astype(np.dtype(lathe._tensor.np_dtype(t.dtype)))
    want = lathe.run(g, feeds)
    got = lathe.compile(g, backend="llvm").run(feeds)
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=2e-4, atol=2e-5, err_msg=k)
