#!/usr/bin/env python3
"""measure_layers.py: one Llama-style transformer layer, forward and forward+backward, on
one CUDA GPU: BF16 and FP8 (tensorwise and rowwise dynamic scaling, written out as the
recipes do it), eager and torch.compile, at the per-GPU shapes of real training layouts
(whole layer, and the shard one GPU holds under tensor parallelism, without the TP
collectives). Ground truth for fathom's per-layer compute (fth_block.c) and activation
memory (fth_footprint.c); bench/gpu/README.md and validation/measurements/README.md say how
it is compared.

    python3 bench/gpu/measure_layers.py --out DIR [--modes eager,compile] [--budget-s 540]

Writes DIR/layers.csv (one row per shape x precision x mode) and DIR/layers_env.json.

The layer (pre-norm, as Llama 3 / torchtitan / Megatron-Core run it):
    h = x + Wo( attn( rope(Wq n1(x)), rope(Wk n1(x)), Wv n1(x) ) )
    y = h + W2( silu(W1 n2(h)) * W3 n2(h) )
with n = RMSNorm, attention = SDPA causal with GQA (cuDNN backend, flash if cuDNN refuses),
Q/K/V and W1/W3 as fused GEMMs (one [q+2kv, h] and one [2 ffn, h] weight, as Megatron-Core
and Transformer Engine fuse them).

FP8 linear (both recipes): the forward GEMM x W^T runs on e4m3 x e4m3, the two backward
GEMMs (dX = dY W, dW = dY^T X) too (gradients in e4m3 as well: the GEMM rate is the same
as e5m2's, and rowwise torch._scaled_mm requires it), each operand quantised with a scale taken from its current
amax (dynamic / current scaling): tensorwise = one scale per tensor, the transposed copies
reuse it; rowwise = one scale per row of the operand as the GEMM consumes it, so X, W and
dY are each quantised twice, along each axis (torchao's Float8 rowwise recipe). Attention,
norms, RoPE and the SwiGLU product stay in BF16. Master weights are BF16 here (no
optimizer step is timed).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F

E4M3 = torch.float8_e4m3fn

# (name, hidden, heads, kv_heads, head_dim, ffn, micro_batch, seq): the per-GPU shard of
# the layer under the layout named (TP shards heads, KV heads and ffn; hidden stays).
SHAPES = [
    ("llama3_8b_tp1", 4096, 32, 8, 128, 14336, 1, 8192),
    ("llama3_8b_tp2", 4096, 16, 4, 128, 7168, 2, 8192),
    ("llama3_8b_tp8", 4096, 4, 1, 128, 1792, 4, 8192),
    ("llama3_70b_tp4", 8192, 16, 2, 128, 7168, 1, 8192),
    ("llama3_70b_tp8", 8192, 8, 1, 128, 3584, 2, 8192),
    ("llama3_405b_tp8", 16384, 16, 1, 128, 6656, 1, 8192),
    ("gpt3_175b_tp8", 12288, 12, 12, 128, 6144, 1, 2048),
    ("llama3_8b_tp1_s2k", 4096, 32, 8, 128, 14336, 4, 2048),
    ("llama3_8b_tp1_s32k", 4096, 32, 8, 128, 14336, 1, 32768),
]


def fp8_max(dtype):
    return torch.finfo(dtype).max


def quant_tensor(t, dtype):
    """Per-tensor current scaling: scale = fmax / amax; returns (q, inverse scale)."""
    amax = t.abs().amax().float().clamp(min=1e-12)
    scale = fp8_max(dtype) / amax
    q = (t.float() * scale).clamp(-fp8_max(dtype), fp8_max(dtype)).to(dtype)
    return q, scale.reciprocal()


def quant_rows(t, dtype, dim):
    """Per-row current scaling along `dim` (the reduction axis of the GEMM that consumes it):
    returns (q, inverse scales with `dim` kept as size 1)."""
    amax = t.abs().amax(dim=dim, keepdim=True).float().clamp(min=1e-12)
    scale = fp8_max(dtype) / amax
    q = (t.float() * scale).clamp(-fp8_max(dtype), fp8_max(dtype)).to(dtype)
    return q, scale.reciprocal()


def col_major(t):
    """The [K, N] operand torch._scaled_mm wants column-major: a transposed contiguous copy."""
    return t.t().contiguous().t()


class Fp8LinearTensorwise(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        xq, xs = quant_tensor(x, E4M3)
        wq, ws = quant_tensor(w, E4M3)
        ctx.save_for_backward(xq, xs, wq, ws)
        return torch._scaled_mm(xq, wq.t(), scale_a=xs, scale_b=ws, out_dtype=torch.bfloat16,
                                use_fast_accum=True)

    @staticmethod
    def backward(ctx, gy):
        xq, xs, wq, ws = ctx.saved_tensors
        gq, gs = quant_tensor(gy, E4M3)  # e4m3 grads: e5m2 x e4m3 runs at the same rate
        gx = torch._scaled_mm(gq, col_major(wq), scale_a=gs, scale_b=ws, out_dtype=torch.bfloat16)
        gw = torch._scaled_mm(gq.t().contiguous(), col_major(xq), scale_a=gs, scale_b=xs,
                              out_dtype=torch.bfloat16)
        return gx, gw


class Fp8LinearRowwise(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        xq, xs = quant_rows(x, E4M3, 1)          # [M, 1]
        wq, ws = quant_rows(w, E4M3, 1)          # [N, 1]
        ctx.save_for_backward(x, w)
        return torch._scaled_mm(xq, wq.t(), scale_a=xs, scale_b=ws.t(), out_dtype=torch.bfloat16,
                                use_fast_accum=True)

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        # dX[M, K] = dY[M, N] W[N, K]: dY scaled per row (over N), W per column (over N)
        gq, gs = quant_rows(gy, E4M3, 1)
        wq_c, ws_c = quant_rows(w, E4M3, 0)      # [1, K]
        gx = torch._scaled_mm(gq, col_major(wq_c), scale_a=gs, scale_b=ws_c,
                              out_dtype=torch.bfloat16, use_fast_accum=True)
        # dW[N, K] = dY^T[N, M] X[M, K]: both scaled over M
        gq_c, gs_c = quant_rows(gy, E4M3, 0)     # [1, N]
        xq_c, xs_c = quant_rows(x, E4M3, 0)      # [1, K]
        gw = torch._scaled_mm(gq_c.t().contiguous(), col_major(xq_c), scale_a=gs_c.t(),
                              scale_b=xs_c, out_dtype=torch.bfloat16, use_fast_accum=True)
        return gx, gw


def linear(x, w, prec):
    if prec == "bf16":
        return F.linear(x, w)
    shp = x.shape
    x2 = x.reshape(-1, shp[-1])
    fn = Fp8LinearTensorwise if prec == "fp8_tensorwise" else Fp8LinearRowwise
    return fn.apply(x2, w).reshape(*shp[:-1], w.shape[0])


def rope(t, cos, sin):
    half = t.shape[-1] // 2
    t1, t2 = t[..., :half], t[..., half:]
    return t * cos + torch.cat((-t2, t1), dim=-1) * sin


def make_layer(hidden, heads, kvh, hd, ffn, seq, dev):
    g = torch.Generator(device=dev).manual_seed(0)

    def p(*shape, std=0.02):
        return (torch.randn(*shape, device=dev, generator=g) * std).to(torch.bfloat16).requires_grad_()
    params = {
        "n1": torch.ones(hidden, device=dev, dtype=torch.bfloat16, requires_grad=True),
        "n2": torch.ones(hidden, device=dev, dtype=torch.bfloat16, requires_grad=True),
        "wqkv": p((heads + 2 * kvh) * hd, hidden),
        "wo": p(hidden, heads * hd),
        "w13": p(2 * ffn, hidden),
        "w2": p(hidden, ffn),
    }
    pos = torch.arange(seq, device=dev, dtype=torch.float32)
    inv = 1.0 / (500000.0 ** (torch.arange(0, hd, 2, device=dev, dtype=torch.float32) / hd))
    ang = torch.outer(pos, inv)
    ang = torch.cat((ang, ang), dim=-1)
    cos = ang.cos().to(torch.bfloat16)[None, None]
    sin = ang.sin().to(torch.bfloat16)[None, None]
    return params, cos, sin


def layer_fn(prec, heads, kvh, hd, ffn):
    def f(x, P, cos, sin):
        b, s, h = x.shape
        n = F.rms_norm(x, (h,), P["n1"], 1e-5)
        qkv = linear(n, P["wqkv"], prec)
        q, k, v = qkv.split([heads * hd, kvh * hd, kvh * hd], dim=-1)
        q = q.view(b, s, heads, hd).transpose(1, 2)
        k = k.view(b, s, kvh, hd).transpose(1, 2)
        v = v.view(b, s, kvh, hd).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=(kvh != heads))
        a = a.transpose(1, 2).reshape(b, s, heads * hd)
        hres = x + linear(a, P["wo"], prec)
        n2 = F.rms_norm(hres, (h,), P["n2"], 1e-5)
        up = linear(n2, P["w13"], prec)
        g1, g3 = up.chunk(2, dim=-1)
        return hres + linear(F.silu(g1) * g3, P["w2"], prec)
    return f


def time_it(fn, reps, warm):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    times.sort()
    return statistics.median(times), times[max(0, len(times) // 10)], times[min(len(times) - 1, (9 * len(times)) // 10)]


def kernel_class(name):
    n = name.lower()
    if n.startswith("triton_"):  # inductor names fused kernels after every op they absorb
        return "other"
    if any(k in n for k in ("flash", "fmha", "cudnn", "sdpa", "attention")):
        return "attn"
    if any(k in n for k in ("gemm", "xmma", "cutlass", "nvjet", "scaled_mm", "cublas", "wgmma", "sm90")):
        return "gemm"
    return "other"


def profile(fn, iters=3):
    """GPU time per fwd+bwd by kernel class, from torch.profiler's CUDA kernel events."""
    from torch.profiler import ProfilerActivity, profile as tprof
    fn()
    torch.cuda.synchronize()
    with tprof(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    tot = {"gemm": 0.0, "attn": 0.0, "other": 0.0}
    count = 0
    names = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            dur = getattr(e, "device_time", None)
            if dur is None:
                dur = e.cuda_time
            tot[kernel_class(e.name)] += dur / 1e6
            names[e.name] = names.get(e.name, 0.0) + dur / 1e6 / iters
            count += 1
    for n, d in sorted(names.items(), key=lambda kv: -kv[1])[:40]:
        print("    kernel %-6s %9.1f us  %s" % (kernel_class(n), d * 1e6, n[:110]), flush=True)
    return {"prof_gemm_s": tot["gemm"] / iters, "prof_attn_s": tot["attn"] / iters,
            "prof_other_s": tot["other"] / iters, "prof_kernels": count // iters}


def layer_flops(hidden, heads, kvh, hd, ffn, mb, seq):
    """Model FLOPs of the forward (GEMMs 2 m n k; causal attention counted as half the
    square, FlashAttention's convention): the numbers fathom's fth_block charges."""
    t = mb * seq
    gemm = 2 * t * hidden * ((heads + 2 * kvh) * hd + heads * hd + 3 * ffn)
    attn = 2 * mb * heads * seq * (seq + 1) / 2 * (hd + hd)
    return gemm, attn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--precs", default="bf16,fp8_tensorwise,fp8_rowwise")
    ap.add_argument("--shapes", default="")
    ap.add_argument("--budget-s", type=float, default=540)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--profile", action="store_true",
                    help="split one fwd+bwd into GEMM / attention / other kernel time (torch.profiler)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    t_start = time.time()
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    # cuDNN fused attention first (FA3-class on Hopper), flash next; never the math path
    torch.backends.cuda.enable_math_sdp(False)
    torch.backends.cuda.enable_mem_efficient_sdp(False)
    torch.backends.cuda.enable_cudnn_sdp(True)
    torch.backends.cuda.enable_flash_sdp(True)
    torch._dynamo.config.cache_size_limit = 256
    props = torch.cuda.get_device_properties(0)
    env = {"device": props.name, "sms": props.multi_processor_count,
           "memory_bytes": props.total_memory, "torch": torch.__version__,
           "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
           "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}
    try:
        import triton
        env["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        pass
    shapes = [s for s in SHAPES if not a.shapes or s[0] in a.shapes.split(",")]
    cols = ["shape", "hidden", "heads", "kv_heads", "head_dim", "ffn", "micro_batch", "seq", "precision", "mode",
            "status", "fwd_s", "fwd_p10_s", "fwd_p90_s", "fwd_bwd_s", "fwd_bwd_p10_s", "fwd_bwd_p90_s",
            "gemm_flops_fwd", "attn_flops_fwd", "saved_activation_bytes", "peak_extra_bytes",
            "prof_gemm_s", "prof_attn_s", "prof_other_s", "prof_kernels", "note"]
    rows = []
    out_csv = os.path.join(a.out, "layers.csv")

    def flush():
        with open(out_csv, "w") as f:
            f.write(",".join(cols) + "\n")
            for r in rows:
                f.write(",".join(str(r.get(c, "")) for c in cols) + "\n")

    for mode in a.modes.split(","):
        for (name, h, nh, kvh, hd, ffn, mb, seq) in shapes:
            for prec in a.precs.split(","):
                if time.time() - t_start > a.budget_s:
                    print("budget reached; stopping", flush=True)
                    flush()
                    json.dump(env, open(os.path.join(a.out, "layers_env.json"), "w"), indent=1)
                    return
                row = {"shape": name, "hidden": h, "heads": nh, "kv_heads": kvh, "head_dim": hd, "ffn": ffn,
                       "micro_batch": mb, "seq": seq, "precision": prec, "mode": mode}
                gf, af = layer_flops(h, nh, kvh, hd, ffn, mb, seq)
                row["gemm_flops_fwd"], row["attn_flops_fwd"] = int(gf), int(af)
                t0 = time.time()
                try:
                    torch.cuda.empty_cache()
                    P, cos, sin = make_layer(h, nh, kvh, hd, ffn, seq, dev)
                    x = (torch.randn(mb, seq, h, device=dev) * 0.5).to(torch.bfloat16).requires_grad_()
                    gy = torch.randn(mb, seq, h, device=dev).to(torch.bfloat16)
                    f = layer_fn(prec, nh, kvh, hd, ffn)
                    if mode == "compile":
                        f = torch.compile(f)

                    def fwd():
                        with torch.no_grad():
                            f(x, P, cos, sin)

                    def fwd_bwd():
                        y = f(x, P, cos, sin)
                        y.backward(gy)
                    fwd_bwd()
                    fwd()
                    torch.cuda.synchronize()
                    row["fwd_s"], row["fwd_p10_s"], row["fwd_p90_s"] = time_it(fwd, a.reps, 2)
                    row["fwd_bwd_s"], row["fwd_bwd_p10_s"], row["fwd_bwd_p90_s"] = time_it(fwd_bwd, a.reps, 2)
                    # memory the forward keeps for the backward, and its transient peak
                    for t in P.values():
                        t.grad = None
                    x.grad = None
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    base = torch.cuda.memory_allocated()
                    y = f(x, P, cos, sin)
                    torch.cuda.synchronize()
                    row["saved_activation_bytes"] = torch.cuda.memory_allocated() - base - y.numel() * y.element_size()
                    row["peak_extra_bytes"] = torch.cuda.max_memory_allocated() - base
                    del y
                    if a.profile:
                        row.update(profile(fwd_bwd))
                    row["status"] = "ok"
                except Exception as e:  # noqa: BLE001
                    row["status"] = "unavailable"
                    row["note"] = ("%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))[:160] \
                        .replace(",", ";")
                    traceback.print_exc(limit=2)
                print("%-18s %-15s %-8s %-11s fwd %s fwd+bwd %s (%.1f s)" % (
                    name, prec, mode, row.get("status"), row.get("fwd_s"), row.get("fwd_bwd_s"), time.time() - t0),
                    flush=True)
                rows.append(row)
                flush()
                P = x = gy = f = None
    env["finished_utc"] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    json.dump(env, open(os.path.join(a.out, "layers_env.json"), "w"), indent=1)
    flush()


if __name__ == "__main__":
    sys.exit(main())
