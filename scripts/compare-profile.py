#!/usr/bin/env python3
"""compare-profile.py — Lathe's per-kernel profile beside ONNX Runtime's per-node one, layer by layer.

    build/lathe run MODEL_DIR/model.onnx --input NAME=MODEL_DIR/npy/in_NAME.npy --iters 20 --profile-json lathe.json
    scripts/ort-profile MODEL_DIR --iters 20 --threads T --out ort.json
    scripts/compare-profile.py lathe.json ort.json [--stat median|min] [--top N] [--sort loss] [--json OUT]

(Run both at the same thread count: LATHE_POOL_THREADS=1 with --threads 1, or both at the
default 2.) Prints one row per Lathe kernel in launch order: the layer (its main ONNX node),
the output shape, GFLOP, Lathe µs, ORT µs (the ORT nodes matched to it), the ratio Lathe / ORT,
the loss (Lathe − ORT µs) and the running sum of the loss; then the layers that lose most.

Matching. Lathe's kernels list the ONNX nodes they were built from ("name:OpType"); ORT's
nodes carry ONNX names too, or after a fusion the name of the fused node's output tensor
(`X_output_0_nchwc`: node X). An ORT node joins the Lathe kernel holding its ONNX node (the
one with the same output shape when several do). ORT's layout nodes (ReorderInput /
ReorderOutput) join the layer they feed or drain. What is left matches by output shape and
op kind, in order; an ORT node that still matches nothing joins the next matched layer (Lathe
computes most such nodes, a Resize or a Pad, inside the kernel that consumes them). Consecutive
Lathe kernels that write the same ONNX node's value are one row. Transformers: ORT's
fusion steps in names (".../MatMul/MatMulAddFusion", "fused X", "X_new_reshape") count as
the node; its Gelu and the Reshape draining a Gemm join the contraction before them (Lathe
computes them in its epilogue); SkipLayerNormalization matches a layernorm kernel; a fused
attention kernel without ONNX names takes the nodes of its span; view nodes (Reshape, Split)
never match by shape alone, and the shape search stops at the next kernel matched by name.
Plain python3, no third-party modules.
"""
import argparse
import json
import re
import sys

HEAVY = ["Conv", "ConvTranspose", "MatMul", "Gemm", "LSTM", "GRU", "Attention", "MaxPool", "AveragePool",
         "GlobalAveragePool", "Resize", "Concat", "InstanceNormalization", "BatchNormalization",
         "LayerNormalization", "Softmax"]
KIND_OF_OP = {"Conv": "matmul", "FusedConv": "matmul", "ConvTranspose": "matmul", "MatMul": "matmul",
              "Gemm": "matmul", "FusedMatMul": "matmul", "MaxPool": "reduce", "AveragePool": "reduce",
              "GlobalAveragePool": "reduce", "ReduceMean": "reduce", "InstanceNormalization": "reduce",
              "LayerNormalization": "reduce", "Softmax": "reduce", "SkipLayerNormalization": "reduce",
              "SimplifiedLayerNormalization": "reduce", "SkipSimplifiedLayerNormalization": "reduce"}
# ORT's transformer fusions that keep no ONNX name: an activation fused out of a chain (BERT's
# Erf GELU) is an epilogue of the contraction before it; Lathe computes it in that kernel.
EPILOGUE_OPS = {"Gelu", "FastGelu", "BiasGelu", "QuickGelu"}
# Lathe's fused attention (one kernel: scores, mask, softmax, P·V) takes ORT's nodes of the
# same span: the output matches by shape, the rest (scores, mask, softmax) join it as the next.
ATTENTION_KINDS = {"matmul", "reduce", None}
# views: never matched to a kernel by shape alone (an ORT Reshape before a Gemm has the shape of
# Lathe's layernorm after it); they join the next layer like any node left over
VIEW_OPS = {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Split", "Identity"}


def split_source(s):
    """'/e1/e1.0/Conv:Conv' -> ('/e1/e1.0/Conv', 'Conv'); a name without ':' -> (s, '')."""
    i = s.rfind(":")
    return (s[:i], s[i + 1:]) if i > 0 else (s, "")


def onnx_candidates(ort_name):
    """ONNX node names an ORT node name may stand for, most likely first."""
    out = [ort_name]
    n = ort_name
    if n.startswith("fused "):  # ORT's FusedGemm / FusedConv: "fused NAME"
        n = n[len("fused "):]
        out.append(n)
    m = re.sub(r"_token_\d+$", "", n)  # QDQ fusions: "/conv1/Conv_token_1"
    if m != n:
        n = m
        out.append(n)
    # ORT's graph fusions append a step: "/l.0/qkv/MatMul/MatMulAddFusion", ".../MatMulScaleFusion/"
    m = n.rstrip("/")
    while "/" in m and m[m.rindex("/") + 1:].endswith("Fusion"):
        m = m[: m.rindex("/")]
    if m != n:
        n = m
        out.append(n)
    if n.endswith("_new_reshape"):  # ORT's reshape fusion renames the node it rewrites
        n = n[: -len("_new_reshape")]
        out.append(n)
    for suffix in ("_nchwc", "_fused", "_token"):
        if suffix in n:
            n = n[: n.index(suffix)]
            out.append(n)
    for suffix in ("_output_0", "_Y"):
        if n.endswith(suffix):
            out.append(n[: -len(suffix)])
    return out


def layer_label(k):
    if k["kind"] != "matmul" and k.get("sources"):  # the node it writes
        name, op = split_source(k["sources"][-1])
        return f"{name} ({op})" if op else name
    best = None
    for s in k.get("sources", []):
        name, op = split_source(s)
        rank = HEAVY.index(op) if op in HEAVY else len(HEAVY)
        # the last of equal rank: a kernel shared by repeated blocks lists the first block's
        # nodes too (hash-consed constants and scales), its own come last
        if best is None or rank <= best[0]:
            best = (rank, name, op)
    if best is None:
        return k["name"]
    return f"{best[1]} ({best[2]})" if best[2] else best[1]


def squeeze(shape):
    """The dims other than 1, sorted: ORT's QDQ kernels run NHWC where Lathe writes NCHW."""
    return sorted(d for d in (shape or []) if d != 1)


def join(lathe, ort, stat):
    kernels = lathe["kernels"]
    key = "median_us" if stat == "median" else "min_us"
    produced, holding = {}, {}  # ONNX node -> kernels whose root it is / kernels holding one of its nodes
    for i, k in enumerate(kernels):
        srcs = [split_source(s)[0] for s in k.get("sources", [])]
        for s in srcs:
            holding.setdefault(s, []).append(i)
        if srcs:
            produced.setdefault(srcs[-1], []).append(i)
    nodes = ort["nodes"]
    where = [None] * len(nodes)  # row index per ORT node
    for j, n in enumerate(nodes):
        shape = squeeze(n["outputs"][0]) if n["outputs"] else None
        for c in onnx_candidates(n["name"]):
            cands = produced.get(c) or holding.get(c)
            if cands:
                # the producer runs before the kernels that recompute it; a padding kernel
                # that writes the node's input ahead of it (a QDQ stem) has another shape
                same = ([i for i in cands if squeeze(kernels[i].get("shape")) == shape] or
                        [i for i in holding.get(c, []) if squeeze(kernels[i].get("shape")) == shape])
                where[j] = (same or cands)[0]
                break
    # an epilogue ORT split off (GELU) or the reshape draining a Gemm joins the node before it
    for j, n in enumerate(nodes):
        if where[j] is None and j > 0 and (n["op"] in EPILOGUE_OPS or n["name"].startswith("gemm_output_reshape")):
            where[j] = where[j - 1]
    # layout nodes join their neighbours
    for j, n in enumerate(nodes):
        if where[j] is not None or not n["op"].startswith("Reorder"):
            continue
        step = -1 if n["op"] == "ReorderOutput" else 1
        t = j + step  # over other layout nodes only
        while 0 <= t < len(nodes) and where[t] is None and nodes[t]["op"].startswith("Reorder"):
            t += step
        if 0 <= t < len(nodes):
            where[j] = where[t]
    # the rest: output shape and op kind, in order, among the kernels nothing matched, up to
    # the next kernel matched by name (a search past it drifts a layer on: GPT-2's fused
    # attentions keep no ONNX names after the first); an ORT node may also join the fused
    # attention kernel just matched (scores, softmax and P·V are all in it)
    named = list(where)
    used = set(w for w in where if w is not None)
    last = -1
    for j, n in enumerate(nodes):
        if where[j] is not None:
            last = where[j]
            continue
        if n["op"] in VIEW_OPS:
            continue
        shape = n["outputs"][0] if n["outputs"] else None
        kind = KIND_OF_OP.get(n["op"])
        limit = min([w for w in named[j + 1:] if w is not None and w > last] or [len(kernels)])
        for i in range(max(last, 0), limit):
            k = kernels[i]
            fused_attention = k["kind"] == "attention"
            if (i in used and not (i == last and fused_attention)) or (i == last and not fused_attention):
                continue
            if squeeze(k.get("shape")) != squeeze(shape):
                continue
            if fused_attention:
                if kind not in ATTENTION_KINDS:
                    continue
            elif kind and k["kind"] != kind:
                continue
            where[j] = i
            used.add(i)
            last = i
            break
    # a layer Lathe computes in several kernels in a row (a transposed conv and its scatter)
    # is one row: consecutive kernels with the same root source
    group, roots = [], []
    for i, k in enumerate(kernels):
        root = split_source(k["sources"][-1])[0] if k.get("sources") else None
        if i > 0 and root is not None and root == roots[-1]:
            group.append(group[-1])
        else:
            group.append(len(roots))
            roots.append(root)
    rows = [{"lathe": [], "ort": []} for _ in roots]
    for i, k in enumerate(kernels):
        rows[group[i]]["lathe"].append(k)
    extra = []
    for j, n in enumerate(nodes):
        if where[j] is None:
            extra.append((j, n))
        else:
            rows[group[where[j]]]["ort"].append(n)
    # an ORT node that matched nothing joins the next layer: Lathe computes most such nodes
    # (a Resize, a Pad, a layout change) inside the kernel that consumes them
    out = rows
    for j, n in extra:
        nxt = next((group[where[t]] for t in range(j + 1, len(nodes)) if where[t] is not None), None)
        if nxt is None:  # after the last matched layer: the first Lathe row after it that ORT left empty
            prev = next((group[where[t]] for t in range(j - 1, -1, -1) if where[t] is not None), -1)
            nxt = next((g for g in range(prev + 1, len(rows)) if rows[g]["lathe"] and not rows[g]["ort"]), None)
        if nxt is None:
            out.append({"lathe": [], "ort": [n]})
        else:
            rows[nxt]["ort"].append(n)
            rows[nxt]["ort"].sort(key=lambda m: m["order"])
    for r in out:
        ks = r["lathe"]
        r["lathe_us"] = sum(k[key] for k in ks)
        r["ort_us"] = sum(n[key] for n in r["ort"])
        r["gflop"] = sum(k["flops"] for k in ks) / 1e9
        r["shape"] = ks[-1]["shape"] if ks else (r["ort"][0]["outputs"][0] if r["ort"][0]["outputs"] else [])
        if ks:
            heavy = max(ks, key=lambda k: k["flops"])
            r["layer"] = "+".join(k["name"].split("_")[0] for k in ks) + " " + layer_label(heavy)
        else:
            r["layer"] = "(ORT only) " + r["ort"][0]["name"]
        r["kernels"] = [k["name"] for k in ks]
        r["ort_ops"] = "+".join(n["op"] for n in r["ort"])
        r["loss_us"] = r["lathe_us"] - r["ort_us"]
    return out


def fmt_shape(s):
    return "x".join(str(d) for d in s) if s else "-"


def print_table(rows, lathe, ort, stat, top, out=sys.stdout):
    w = max([5] + [min(len(r["layer"]), 56) for r in rows])
    ws = max([5] + [len(fmt_shape(r["shape"])) for r in rows])
    head = f"{'layer':<{w}}  {'shape':<{ws}}  {'GFLOP':>6}  {'Lathe us':>9}  {'ORT us':>9}  {'ratio':>6}  {'loss us':>9}  {'cum loss':>9}  ORT ops"
    print(head, file=out)
    print("-" * len(head), file=out)
    cum = 0.0
    for r in rows:
        cum += r["loss_us"]
        ratio = f"{r['lathe_us'] / r['ort_us']:.2f}" if r["ort_us"] > 0 and r["lathe_us"] > 0 else "-"
        print(f"{r['layer'][:56]:<{w}}  {fmt_shape(r['shape']):<{ws}}  {r['gflop']:6.3f}  {r['lathe_us']:9.0f}  "
              f"{r['ort_us']:9.0f}  {ratio:>6}  {r['loss_us']:9.0f}  {cum:9.0f}  {r['ort_ops']}", file=out)
    lt = sum(r["lathe_us"] for r in rows)
    ot = sum(r["ort_us"] for r in rows)
    print("-" * len(head), file=out)
    print(f"sum of {stat}s: Lathe {lt / 1000:.2f} ms, ORT {ot / 1000:.2f} ms (ratio {lt / max(ot, 1e-9):.2f}); "
          f"whole runs: Lathe {lathe.get('total_ms', 0):.2f} ms, ORT {ort.get('median_ms', 0):.2f} ms "
          f"(ORT threads {ort.get('threads')}, {ort.get('iters')} runs)", file=out)
    if top:
        print(f"\nthe {top} layers that lose most (Lathe - ORT, {stat} us):", file=out)
        for r in sorted(rows, key=lambda r: -r["loss_us"])[:top]:
            if r["loss_us"] <= 0:
                break
            print(f"  {r['loss_us']:8.0f}  {r['layer'][:56]:<{w}}  {fmt_shape(r['shape'])}  "
                  f"({r['lathe_us']:.0f} vs {r['ort_us']:.0f})", file=out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("lathe", help="lathe run ... --profile-json FILE")
    ap.add_argument("ort", help="scripts/ort-profile ... --out FILE")
    ap.add_argument("--stat", choices=["median", "min"], default="median",
                    help="per-kernel statistic to compare (min is steadier on a loaded machine)")
    ap.add_argument("--top", type=int, default=10, help="list the N layers that lose most (0: none)")
    ap.add_argument("--sort", choices=["order", "loss"], default="order", help="row order of the table")
    ap.add_argument("--json", help="also write the joined rows as JSON")
    ap.add_argument("--strict", action="store_true",
                    help="exit 1 when an ORT node joins no Lathe kernel or a Lathe contraction gets no ORT node")
    a = ap.parse_args()
    try:
        with open(a.lathe) as f:
            lathe = json.load(f)
        with open(a.ort) as f:
            ort = json.load(f)
        if "kernels" not in lathe or "nodes" not in ort:
            raise ValueError("expected `lathe run --profile-json` output first and `scripts/ort-profile` output second")
    except (OSError, ValueError) as e:
        print(f"compare-profile: {e}", file=sys.stderr)
        return 1
    rows = join(lathe, ort, a.stat)
    shown = sorted(rows, key=lambda r: -r["loss_us"]) if a.sort == "loss" else rows
    print_table(shown, lathe, ort, a.stat, a.top)
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{k: r[k] for k in ("layer", "kernels", "shape", "gflop", "lathe_us", "ort_us", "loss_us", "ort_ops")}
                       for r in rows], f, indent=1)
    if a.strict:
        bad = [r["layer"] for r in rows if not r["lathe"] or (not r["ort"] and any(k["kind"] == "matmul" for k in r["lathe"]))]
        if bad:
            print("compare-profile: unmatched: " + ", ".join(bad), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
