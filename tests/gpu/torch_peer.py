#!/usr/bin/env python3
"""PyTorch on the GPU, on the workloads of `lathe bench` (SPEC.md), as the cuda backend's peer.

    python3 tests/gpu/torch_peer.py [--only softmax,matmul] [--iters 50]

One JSON object per line, the same keys as `lathe bench --json` (name, backend, median_ms,
gflops, gbps) plus `peer_of`. Times are CUDA-event medians of single calls after a warm-up,
so launch overhead counts as it does for Lathe. Bytes = inputs read once + outputs written
once; FLOPs count 2 per multiply-add of matmuls and convolutions. f32 matmuls run with TF32
off (exact f32 FMA, as Lathe's generated code does). `copy` is the device-to-device copy
bandwidth (bytes read + written) that the memory-bound goals are measured against.
"""
import argparse, json, math, sys

import torch
import torch.nn.functional as F


def timed(fn, iters):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


def workloads(dev):
    g = torch.Generator(device=dev).manual_seed(0)
    rn = lambda *s: torch.randn(*s, device=dev, generator=g)
    W = []
    n = 16 * 1024 * 1024
    src, dst = rn(n), torch.empty(n, device=dev)
    W.append(("copy", lambda: dst.copy_(src), 0, 2 * 4 * n))
    a, b, c = rn(n), rn(n), rn(n)
    W.append(("eltwise", lambda: torch.exp(torch.relu(a * b + c) * 0.5), 0, 4 * 4 * n))
    x = rn(4096, 4096)
    W.append(("softmax", lambda: torch.softmax(x, -1), 0, 2 * 4 * x.numel()))
    w, bb = rn(4096), rn(4096)
    W.append(("layernorm", lambda: F.layer_norm(x, (4096,), w, bb), 0, 2 * 4 * x.numel() + 2 * 4 * 4096))
    A, B = rn(1024, 1024), rn(1024, 1024)
    W.append(("matmul", lambda: A @ B, 2.0 * 1024 ** 3, 3 * 4 * 1024 * 1024))
    xc, wc = rn(8, 64, 56, 56), rn(64, 64, 3, 3)
    W.append(("conv2d", lambda: F.conv2d(xc, wc, padding=1), 2.0 * 8 * 64 * 64 * 56 * 56 * 9,
              4 * (xc.numel() + wc.numel() + xc.numel())))
    xm = rn(256, 1024)
    w1, b1, w2, b2 = rn(1024, 4096) * 0.02, rn(4096), rn(4096, 1024) * 0.02, rn(1024)
    W.append(("mlp", lambda: F.gelu(xm @ w1 + b1) @ w2 + b2, 2.0 * 256 * 1024 * 4096 * 2, 0))
    T, D, H = 128, 768, 12
    xg = rn(1, T, D)
    p = {k: rn(*s) * 0.02 for k, s in dict(wa=(D, 3 * D), ba=(3 * D,), wp=(D, D), bp=(D,), wf=(D, 4 * D), bf=(4 * D,),
                                             wo=(4 * D, D), bo=(D,), l1w=(D,), l1b=(D,), l2w=(D,), l2b=(D,)).items()}

    def gpt2():
        h = F.layer_norm(xg, (D,), p["l1w"], p["l1b"])
        q, k, v = (h @ p["wa"] + p["ba"]).split(D, -1)
        q, k, v = (t.view(1, T, H, D // H).transpose(1, 2) for t in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(1, T, D)
        h2 = xg + att @ p["wp"] + p["bp"]
        f = F.gelu(F.layer_norm(h2, (D,), p["l2w"], p["l2b"]) @ p["wf"] + p["bf"], approximate="tanh")
        return h2 + f @ p["wo"] + p["bo"]
    lin = 2.0 * T * (D * 3 * D + D * D + 2 * D * 4 * D)
    W.append(("gpt2-block", gpt2, lin + 2.0 * 2 * T * T * D, 0))
    return W


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="")
    ap.add_argument("--iters", type=int, default=50)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_peer: no CUDA device", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    only = set(filter(None, args.only.split(",")))
    name = torch.cuda.get_device_name()
    for wl, fn, flops, nbytes in workloads("cuda"):
        if only and wl not in only and wl != "copy":
            continue
        with torch.no_grad():
            ms = timed(fn, args.iters)
        s = ms / 1000
        print(json.dumps(dict(name=wl, backend="torch-cuda", device=name, median_ms=ms, gflops=flops / s / 1e9,
                              gbps=nbytes / s / 1e9, peer_of="lathe-cuda", torch=torch.__version__)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
