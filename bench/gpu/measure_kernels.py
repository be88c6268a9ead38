#!/usr/bin/env python3
"""measure_kernels.py: kernel timings on one NVIDIA GPU for calibrating fathom's
kernel model (src/core/fth_kernel.c): dense GEMM (BF16, FP8), grouped/batched
expert GEMMs, fused attention (SDPA flash / cuDNN), memory-bound kernels.

    python3 bench/gpu/measure_kernels.py --out DIR
        [--sections gemm,grouped,attn,mem,msweep,sustained]
                                         [--budget-s 470] [--quick]

Writes DIR/gemm.csv, grouped_gemm.csv, attention.csv, memory_bound.csv,
gemm_sweep.csv (fine M sweep and N sweep), sustained.csv (back-to-back 8192^3
GEMMs: throughput and SM clock from a cool start to the power-capped state),
env.json (device, versions, clocks, correctness checks), smi_samples.csv
(nvidia-smi sampled every 250 ms), smi_q.txt (nvidia-smi -q snapshots) and
log.txt. One row per measurement; a kernel the installed PyTorch cannot run is
recorded with status 'unavailable' and the error text, never dropped.

Method (also in validation/measurements/README.md): CUDA events; warm-up; each
measurement is the median of >= 10 repetitions, each repetition timing `inner`
back-to-back calls (inner chosen so a repetition lasts ~1 ms) and dividing by
inner. Small kernels are captured in a CUDA graph and the graph replayed
(timing_mode 'graph': GPU time without Python launch gaps); attention and the
per-expert 'loop_eager' variant run eagerly (timing_mode 'eager': includes any
launch gaps). Inputs are random normal (never zeros). When one set of operands
is smaller than ~256 MB, several independent sets are allocated and used in
turn (l2_rotation_sets) so that repeated calls do not run out of the 50 MB L2.
"""
import argparse
import csv
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback

import torch
import torch.nn.functional as F

try:
    import triton
    import triton.language as tl
except Exception:  # pragma: no cover
    triton = None

PEAK = {  # dense datasheet peaks, H100 SXM5 (configs/hardware/hardware_library.yaml)
    "bf16": 989.4e12,
    "fp8": 1978.9e12,
    "hbm_bytes_per_s": 3.35e12,
}
L2_DEFEAT_BYTES = 256 << 20

LOG = None


def log(*a):
    s = " ".join(str(x) for x in a)
    print(s, flush=True)
    if LOG:
        LOG.write(s + "\n")
        LOG.flush()


class Csv:
    def __init__(self, path, cols):
        self.cols = cols
        self.f = open(path, "w", newline="")
        self.w = csv.DictWriter(self.f, fieldnames=cols, extrasaction="ignore")
        self.w.writeheader()
        self.f.flush()

    def row(self, d):
        r = {c: d.get(c, "") for c in self.cols}
        for c, v in r.items():
            if isinstance(v, float):
                r[c] = "%.6g" % v
        self.w.writerow(r)
        self.f.flush()

    def close(self):
        self.f.close()


TIMING_COLS = ["time_s", "time_p10_s", "time_p90_s", "reps", "inner", "timing_mode",
               "l2_rotation_sets"]


# ----------------------------------------------------------------------------- timing
def _ev():
    return torch.cuda.Event(enable_timing=True)


def bench(fns, use_graph=True, reps=12, target_ms=1.0, max_inner=2000, max_nodes=6000,
          nodes_per_call=1):
    """Time calls of fns (list of zero-arg callables, used in turn). Returns a dict
    with time_s (median per call), p10/p90, reps, inner, timing_mode."""
    n = len(fns)
    torch.cuda.synchronize()
    for f in fns:  # warm-up: module load, autotuning, handle creation
        f()
    fns[0]()
    torch.cuda.synchronize()
    s, e = _ev(), _ev()
    s.record()
    for i in range(max(3, n)):
        fns[i % n]()
    e.record()
    e.synchronize()
    est_ms = s.elapsed_time(e) / max(3, n)
    inner = int(max(1, min(max_inner, math.ceil(target_ms / max(est_ms, 1e-4)))))
    inner = int(max(1, min(inner, max_nodes // max(1, nodes_per_call))))
    if n > 1:  # use every operand set (L2 rotation)
        inner = max(inner, n)

    def loop():
        for i in range(inner):
            fns[i % n]()

    run, mode, g = loop, "eager", None
    if use_graph:
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for f in fns:
                    f()
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                loop()
            run, mode = g.replay, "graph"
        except Exception as ex:  # fall back to eager timing
            g = None
            try:
                torch.cuda.synchronize()
            except Exception:
                pass
            mode = "eager(graph failed: %s)" % str(ex).splitlines()[0][:80]
            run = loop
    run()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s.record()
        run()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) / 1e3 / inner)
    del g
    ts.sort()
    q = lambda p: ts[min(len(ts) - 1, max(0, int(round(p * (len(ts) - 1)))))]
    return {"time_s": statistics.median(ts), "time_p10_s": q(0.1), "time_p90_s": q(0.9),
            "reps": reps, "inner": inner, "timing_mode": mode}


def nsets_for(bytes_per_set, cap=64):
    return int(max(1, min(cap, math.ceil(L2_DEFEAT_BYTES / max(1, bytes_per_set)))))


def err_text(ex):
    return (type(ex).__name__ + ": " + str(ex).replace("\n", " ").replace(",", ";"))[:300]


def rel_err(out, ref):
    out = out.float()
    ref = ref.float()
    return float((out - ref).norm() / ref.norm().clamp_min(1e-30))


class Deadline:
    def __init__(self, t_end):
        self.t_end = t_end

    def over(self):
        return time.time() > self.t_end


# ----------------------------------------------------------------------------- GEMM
GEMM_NK = [  # (N, K, name): y[M,N] = x[M,K] W[N,K]^T, weight shapes of real layers
    (4096, 4096, "llama3_8b_o_proj"),
    (6144, 4096, "llama3_8b_qkv"),
    (14336, 4096, "llama3_8b_gate_or_up"),
    (4096, 14336, "llama3_8b_down"),
    (28672, 4096, "llama3_8b_gate_up_fused"),
    (8192, 8192, "llama3_70b_o_proj_tp1"),
    (1280, 8192, "llama3_70b_qkv_tp8"),
    (8192, 1024, "llama3_70b_o_proj_tp8"),
    (3584, 8192, "llama3_70b_gate_or_up_tp8"),
    (8192, 3584, "llama3_70b_down_tp8"),
    (4608, 12288, "gpt3_175b_qkv_tp8"),
    (12288, 1536, "gpt3_175b_o_proj_tp8"),
    (6144, 12288, "gpt3_175b_fc1_tp8"),
    (12288, 6144, "gpt3_175b_fc2_tp8"),
    (1024, 1024, "small_1024"),
    (5000, 3000, "odd_unaligned"),
]
GEMM_M = [128, 512, 2048, 8192, 256, 1024, 4096, 16384, 1000, 3000]
ROWWISE_NAMES = {"llama3_8b_o_proj", "llama3_8b_gate_or_up", "llama3_70b_o_proj_tp1",
                 "gpt3_175b_fc1_tp8"}


def section_gemm(out, dl, quick, checks):
    cols = ["kernel", "variant", "dtype_in", "dtype_out", "m", "n", "k", "shape_name"] + \
        TIMING_COLS + ["flops", "bytes", "tflops_per_s", "gbytes_per_s", "frac_of_dense_peak",
                       "status", "note"]
    w = Csv(os.path.join(out, "gemm.csv"), cols)
    dev = "cuda"
    f8 = getattr(torch, "float8_e4m3fn", None)
    one = torch.ones((), device=dev, dtype=torch.float32)
    # correctness checks first (fresh random data, fp32 reference on upcast inputs)
    try:
        a = torch.randn(512, 4096, device=dev, dtype=torch.bfloat16)
        b = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
        checks["gemm_bf16_rel_err"] = rel_err(a @ b.t(), a.float() @ b.float().t())
        if f8 is not None:
            a8, b8 = a.to(f8), b.to(f8)
            o = torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            checks["gemm_fp8_tensorwise_rel_err_vs_fp32_of_fp8_inputs"] = rel_err(
                o, a8.float() @ b8.float().t())
            sa = torch.ones(512, 1, device=dev, dtype=torch.float32)
            sb = torch.ones(1, 4096, device=dev, dtype=torch.float32)
            o = torch._scaled_mm(a8, b8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
            checks["gemm_fp8_rowwise_rel_err_vs_fp32_of_fp8_inputs"] = rel_err(
                o, a8.float() @ b8.float().t())
    except Exception as ex:
        checks["gemm_check_error"] = err_text(ex)
    nk = GEMM_NK if not quick else GEMM_NK[:2]
    ms = GEMM_M if not quick else [128, 4096]
    variants = [("bf16", "cublas"), ("fp8", "tensorwise"), ("fp8", "tensorwise_fast_accum"),
                ("fp8", "rowwise_fast_accum")]
    for M in ms:
        for (N, K, name) in nk:
            for (dt, var) in variants:
                if var.startswith("rowwise") and name not in ROWWISE_NAMES:
                    continue
                if dl.over():
                    w.close()
                    log("gemm: section deadline reached")
                    return
                eb = 2 if dt == "bf16" else 1
                flops = 2.0 * M * N * K
                nbytes = (M * K + N * K) * eb + M * N * 2
                row = {"kernel": "gemm", "variant": var, "dtype_in": dt, "dtype_out": "bf16",
                       "m": M, "n": N, "k": K, "shape_name": name, "flops": flops,
                       "bytes": nbytes}
                try:
                    ns = nsets_for(nbytes)
                    fns = []
                    for _ in range(ns):
                        a = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
                        b = torch.randn(N, K, device=dev, dtype=torch.bfloat16)
                        if dt == "bf16":
                            fns.append(lambda a=a, b=b: torch.mm(a, b.t()))
                        else:
                            if f8 is None:
                                raise RuntimeError("no torch.float8_e4m3fn")
                            a8, b8 = a.to(f8), b.to(f8)
                            del a, b
                            fast = "fast_accum" in var
                            if var.startswith("rowwise"):
                                sa = torch.rand(M, 1, device=dev, dtype=torch.float32) + 0.5
                                sb = torch.rand(1, N, device=dev, dtype=torch.float32) + 0.5
                            else:
                                sa, sb = one, one
                            fns.append(lambda a8=a8, b8=b8, sa=sa, sb=sb, fast=fast:
                                       torch._scaled_mm(a8, b8.t(), scale_a=sa, scale_b=sb,
                                                        out_dtype=torch.bfloat16,
                                                        use_fast_accum=fast))
                    r = bench(fns)
                    r["l2_rotation_sets"] = ns
                    row.update(r)
                    row["tflops_per_s"] = flops / r["time_s"] / 1e12
                    row["gbytes_per_s"] = nbytes / r["time_s"] / 1e9
                    row["frac_of_dense_peak"] = flops / r["time_s"] / PEAK[dt]
                    row["status"] = "ok"
                except Exception as ex:
                    row["status"] = "unavailable"
                    row["note"] = err_text(ex)
                    try:
                        torch.cuda.synchronize()
                    except Exception:
                        pass
                fns = None
                w.row(row)
        log("gemm: M=%d done (%.0f s left in section)" % (M, dl.t_end - time.time()))
        torch.cuda.empty_cache()
    w.close()


# ----------------------------------------------------------------------------- grouped GEMM
EXPERT_SHAPES = [  # (name, hidden d, expert ffn f)
    ("qwen3_30b_a3b", 2048, 768),
    ("deepseek_v3", 7168, 2048),
    ("mid_4096x1536", 4096, 1536),
]
EXPERTS = [8, 32, 64, 4, 16]
TOKENS = [8, 128, 32, 512, 2048]


def _grouped_weight(E, N, K, dev):
    """Expert weights stored [E, N, K] (nn.Linear layout); the GEMM uses W^T."""
    return torch.randn(E, N, K, device=dev, dtype=torch.bfloat16)


def section_grouped(out, dl, quick, checks):
    cols = ["shape_name", "proj", "experts", "tokens_per_expert", "m_total", "n", "k", "dtype",
            "variant"] + TIMING_COLS + ["flops", "bytes", "tflops_per_s", "gbytes_per_s",
                                        "frac_of_dense_peak", "status", "note"]
    w = Csv(os.path.join(out, "grouped_gemm.csv"), cols)
    dev = "cuda"
    f8 = getattr(torch, "float8_e4m3fn", None)
    has_gmm = hasattr(torch, "_grouped_mm")
    has_sgmm = hasattr(torch, "_scaled_grouped_mm")
    checks["torch_has__grouped_mm"] = has_gmm
    checks["torch_has__scaled_grouped_mm"] = has_sgmm
    # correctness: grouped vs per-expert loop
    try:
        E, T, N, K = 4, 64, 256, 512
        a = torch.randn(E * T, K, device=dev, dtype=torch.bfloat16)
        wt = _grouped_weight(E, N, K, dev)
        offs = torch.arange(T, E * T + 1, T, device=dev, dtype=torch.int32)
        ref = torch.cat([a[e * T:(e + 1) * T].float() @ wt[e].float().t() for e in range(E)])
        if has_gmm:
            checks["grouped_mm_bf16_rel_err"] = rel_err(
                torch._grouped_mm(a, wt.transpose(-2, -1), offs=offs, out_dtype=torch.bfloat16),
                ref)
        checks["bmm_bf16_rel_err"] = rel_err(
            torch.bmm(a.view(E, T, K), wt.transpose(1, 2)).reshape(E * T, N), ref)
    except Exception as ex:
        checks["grouped_check_error"] = err_text(ex)
    shapes = EXPERT_SHAPES if not quick else EXPERT_SHAPES[:1]
    exps = EXPERTS if not quick else [8]
    toks = TOKENS if not quick else [8, 128]
    sgmm_mode = {}
    for T in toks:
        for E in exps:
            for (sname, d, f) in shapes:
                for proj in ("up", "down"):
                    K, N = (d, f) if proj == "up" else (f, d)
                    if dl.over():
                        w.close()
                        log("grouped: section deadline reached")
                        return
                    Mt = E * T
                    flops = 2.0 * Mt * N * K
                    for variant in ("grouped_mm", "bmm", "loop_graph", "loop_eager",
                                    "scaled_grouped_mm_fp8_rowwise"):
                        dt = "fp8" if "fp8" in variant else "bf16"
                        eb = 1 if dt == "fp8" else 2
                        nbytes = (Mt * K + E * N * K) * eb + Mt * N * 2
                        row = {"shape_name": sname, "proj": proj, "experts": E,
                               "tokens_per_expert": T, "m_total": Mt, "n": N, "k": K,
                               "dtype": dt, "variant": variant, "flops": flops,
                               "bytes": nbytes}
                        try:
                            ns = nsets_for(nbytes, cap=16)
                            fns = []
                            for _ in range(ns):
                                a = torch.randn(Mt, K, device=dev, dtype=torch.bfloat16)
                                wt = _grouped_weight(E, N, K, dev)
                                offs = torch.arange(T, Mt + 1, T, device=dev, dtype=torch.int32)
                                if variant == "grouped_mm":
                                    if not has_gmm:
                                        raise RuntimeError("torch._grouped_mm missing")
                                    fns.append(lambda a=a, wt=wt, offs=offs: torch._grouped_mm(
                                        a, wt.transpose(-2, -1), offs=offs,
                                        out_dtype=torch.bfloat16))
                                elif variant == "bmm":
                                    a3 = a.view(E, T, K)
                                    fns.append(lambda a3=a3, wt=wt: torch.bmm(
                                        a3, wt.transpose(1, 2)))
                                elif variant.startswith("loop"):
                                    fns.append(lambda a=a, wt=wt: [
                                        torch.mm(a[e * T:(e + 1) * T], wt[e].t())
                                        for e in range(E)])
                                else:
                                    if not has_sgmm or f8 is None:
                                        raise RuntimeError("torch._scaled_grouped_mm missing")
                                    a8, w8 = a.to(f8), wt.to(f8)
                                    del a, wt
                                    sa = torch.rand(Mt, device=dev, dtype=torch.float32) + 0.5
                                    sb = torch.rand(E, N, device=dev, dtype=torch.float32) + 0.5

                                    def call(a8=a8, w8=w8, sa=sa, sb=sb, offs=offs):
                                        return torch._scaled_grouped_mm(
                                            a8, w8.transpose(-2, -1), sa, sb, offs=offs,
                                            out_dtype=torch.bfloat16, use_fast_accum=True)
                                    fns.append(call)
                            if variant == "loop_eager":
                                r = bench(fns, use_graph=False, nodes_per_call=E)
                            else:
                                r = bench(fns, nodes_per_call=E if variant == "loop_graph" else 1)
                            r["l2_rotation_sets"] = ns
                            row.update(r)
                            row["tflops_per_s"] = flops / r["time_s"] / 1e12
                            row["gbytes_per_s"] = nbytes / r["time_s"] / 1e9
                            row["frac_of_dense_peak"] = flops / r["time_s"] / PEAK[dt]
                            row["status"] = "ok"
                        except Exception as ex:
                            row["status"] = "unavailable"
                            row["note"] = err_text(ex)
                            try:
                                torch.cuda.synchronize()
                            except Exception:
                                pass
                        fns = None
                        w.row(row)
            log("grouped: T=%d E=%d done (%.0f s left in section)" % (T, E, dl.t_end - time.time()))
        torch.cuda.empty_cache()
    w.close()


# ----------------------------------------------------------------------------- attention
def section_attn(out, dl, quick, checks):
    cols = ["backend", "mode", "batch", "heads", "kv_heads", "seq_len", "d_qk", "d_v", "causal",
            "gqa_mode"] + TIMING_COLS + ["flops_fa_convention", "bytes", "tflops_per_s",
                                         "frac_of_bf16_dense_peak", "status", "note"]
    w = Csv(os.path.join(out, "attention.csv"), cols)
    dev = "cuda"
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except Exception as ex:
        checks["attn_error"] = err_text(ex)
        w.close()
        return
    backends = [("flash", SDPBackend.FLASH_ATTENTION)]
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        backends.append(("cudnn", SDPBackend.CUDNN_ATTENTION))
    tokens = 32768
    seqs = [1024, 8192, 32768, 512, 2048, 4096, 16384] if not quick else [1024, 8192]
    cfgs = []  # (heads, kv_heads, d_qk, d_v)
    for d in (128, 64):
        for h in (32, 64, 8):
            cfgs.append((h, 8, d, d))
    cfgs += [(16, 16, 192, 128), (64, 64, 192, 128)]  # MLA-like (DeepSeek-V3 training form)
    if quick:
        cfgs = cfgs[:1] + cfgs[-1:]
    # correctness (small): flash and cudnn vs math on fp32
    try:
        q = torch.randn(2, 8, 256, 64, device=dev, dtype=torch.bfloat16)
        k = torch.randn(2, 8, 256, 64, device=dev, dtype=torch.bfloat16)
        v = torch.randn(2, 8, 256, 64, device=dev, dtype=torch.bfloat16)
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
        for bname, be in backends:
            try:
                with sdpa_kernel([be]):
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                checks["attn_%s_rel_err" % bname] = rel_err(o, ref)
            except Exception as ex:
                checks["attn_%s_check_error" % bname] = err_text(ex)
    except Exception as ex:
        checks["attn_check_error"] = err_text(ex)
    for s in seqs:
        for (h, hkv, dqk, dv) in cfgs:
            b = max(1, tokens // s)
            for bname, be in backends:
                for mode in ("fwd", "fwd_bwd"):
                    if dl.over():
                        w.close()
                        log("attn: section deadline reached")
                        return
                    fwd = 2.0 * b * h * s * s * (dqk + dv) / 2.0  # causal: half of the square
                    flops = fwd if mode == "fwd" else 3.5 * fwd
                    nbytes = 2 * b * s * (h * dqk + hkv * (dqk + dv) + h * dv)
                    if mode == "fwd_bwd":  # + dO read, dQ dK dV written, O read again
                        nbytes += 2 * b * s * (h * dv + h * dqk + hkv * (dqk + dv) + h * dv)
                    row = {"backend": bname, "mode": mode, "batch": b, "heads": h,
                           "kv_heads": hkv, "seq_len": s, "d_qk": dqk, "d_v": dv, "causal": 1,
                           "flops_fa_convention": flops, "bytes": nbytes}
                    try:
                        need_grad = mode == "fwd_bwd"
                        q = torch.randn(b, s, h, dqk, device=dev, dtype=torch.bfloat16
                                        ).transpose(1, 2).detach()
                        k = torch.randn(b, s, hkv, dqk, device=dev, dtype=torch.bfloat16
                                        ).transpose(1, 2).detach()
                        v = torch.randn(b, s, hkv, dv, device=dev, dtype=torch.bfloat16
                                        ).transpose(1, 2).detach()
                        gqa = "mha" if h == hkv else "native"
                        kw = {"is_causal": True}
                        if h != hkv:
                            kw["enable_gqa"] = True
                            try:
                                with sdpa_kernel([be]):
                                    F.scaled_dot_product_attention(q[:, :, :128], k[:, :, :128],
                                                                   v[:, :, :128], **kw)
                                torch.cuda.synchronize()
                            except Exception:
                                kw.pop("enable_gqa")
                                rep = h // hkv
                                k = k.repeat_interleave(rep, dim=1)
                                v = v.repeat_interleave(rep, dim=1)
                                gqa = "expanded_kv"
                        row["gqa_mode"] = gqa
                        if need_grad:
                            q.requires_grad_(True)
                            k.requires_grad_(True)
                            v.requires_grad_(True)
                            go = torch.randn(b, h, s, dv, device=dev, dtype=torch.bfloat16)

                            def fn(q=q, k=k, v=v, go=go, kw=kw, be=be):
                                with sdpa_kernel([be]):
                                    o = F.scaled_dot_product_attention(q, k, v, **kw)
                                return torch.autograd.grad(o, (q, k, v), go)
                        else:
                            def fn(q=q, k=k, v=v, kw=kw, be=be):
                                with sdpa_kernel([be]):
                                    with torch.no_grad():
                                        return F.scaled_dot_product_attention(q, k, v, **kw)
                        r = bench([fn], use_graph=False, reps=10, target_ms=2.0, max_inner=50)
                        r["l2_rotation_sets"] = 1
                        row.update(r)
                        row["tflops_per_s"] = flops / r["time_s"] / 1e12
                        row["frac_of_bf16_dense_peak"] = flops / r["time_s"] / PEAK["bf16"]
                        row["status"] = "ok"
                    except Exception as ex:
                        row["status"] = "unavailable"
                        row["note"] = err_text(ex)
                        try:
                            torch.cuda.synchronize()
                        except Exception:
                            pass
                    q = k = v = go = fn = None
                    w.row(row)
        log("attn: s=%d done (%.0f s left in section)" % (s, dl.t_end - time.time()))
        torch.cuda.empty_cache()
    w.close()


# ----------------------------------------------------------------------------- memory-bound
if triton is not None:
    @triton.jit
    def _silu_mul_kernel(a_ptr, b_ptr, o_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        a = tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        o = a * tl.sigmoid(a) * b
        tl.store(o_ptr + offs, o.to(o_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def _rmsnorm_kernel(x_ptr, w_ptr, o_ptr, D: tl.constexpr, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < D
        x = tl.load(x_ptr + row * D + cols, mask=mask, other=0.0).to(tl.float32)
        ms = tl.sum(x * x, axis=0) / D
        r = 1.0 / tl.sqrt(ms + eps)
        wv = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(o_ptr + row * D + cols, (x * r * wv).to(o_ptr.dtype.element_ty), mask=mask)


def triton_silu_mul(a, b, o):
    n = a.numel()
    BLOCK = 4096
    _silu_mul_kernel[(triton.cdiv(n, BLOCK),)](a, b, o, n, BLOCK=BLOCK, num_warps=8)
    return o


def triton_rmsnorm(x, wt, o):
    rows, D = x.shape
    _rmsnorm_kernel[(rows,)](x, wt, o, D, 1e-6, BLOCK=triton.next_power_of_2(D), num_warps=8)
    return o


def section_mem(out, dl, quick, checks):
    cols = ["op", "impl", "dtype", "size_bytes_per_tensor", "elements", "row_len"] + \
        TIMING_COLS + ["bytes_useful", "gbytes_per_s", "frac_of_hbm_peak", "status", "note"]
    w = Csv(os.path.join(out, "memory_bound.csv"), cols)
    dev = "cuda"
    D = 4096
    dt = torch.bfloat16
    # correctness of the Triton kernels
    try:
        a = torch.randn(64, D, device=dev, dtype=dt)
        b = torch.randn(64, D, device=dev, dtype=dt)
        if triton is not None:
            checks["triton_silu_mul_rel_err"] = rel_err(
                triton_silu_mul(a, b, torch.full_like(a, float("nan"))),
                F.silu(a.float()) * b.float())
            wt = torch.randn(D, device=dev, dtype=dt)
            ref = a.float() * torch.rsqrt(a.float().pow(2).mean(-1, keepdim=True) + 1e-6) * wt.float()
            checks["triton_rmsnorm_rel_err"] = rel_err(
                triton_rmsnorm(a, wt, torch.full_like(a, float("nan"))), ref)
        if hasattr(F, "rms_norm"):
            wt = torch.randn(D, device=dev, dtype=dt)
            ref = a.float() * torch.rsqrt(a.float().pow(2).mean(-1, keepdim=True) + 1e-6) * wt.float()
            checks["torch_rms_norm_rel_err"] = rel_err(F.rms_norm(a, (D,), wt, 1e-6), ref)
    except Exception as ex:
        checks["mem_check_error"] = err_text(ex)
    sizes = [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30, 4 << 30]
    if quick:
        sizes = [1 << 20, 256 << 20]
    # op: (n input tensors, useful bytes multiplier of size, builder)
    ops = ["copy", "add", "silu_mul", "silu_mul", "rmsnorm", "rmsnorm", "layernorm", "softmax"]
    impls = ["torch", "torch", "torch_eager_unfused", "triton_fused", "torch_F.rms_norm",
             "triton", "torch", "torch"]
    for size in [4096] + sizes:
        for op, impl in zip(ops, impls):
            if size == 4096 and op not in ("copy", "add"):
                continue
            if dl.over():
                w.close()
                log("mem: section deadline reached")
                return
            n = size // 2
            rows = max(1, n // D)
            row = {"op": op, "impl": impl, "dtype": "bf16", "size_bytes_per_tensor": size,
                   "elements": n, "row_len": D if op in ("rmsnorm", "layernorm", "softmax") else ""}
            mult = {"copy": 2, "add": 3, "silu_mul": 3, "rmsnorm": 2, "layernorm": 2,
                    "softmax": 2}[op]
            nbytes = mult * size
            row["bytes_useful"] = nbytes
            try:
                if impl.startswith("triton") and triton is None:
                    raise RuntimeError("triton not importable")
                if op == "rmsnorm" and impl.startswith("torch") and not hasattr(F, "rms_norm"):
                    raise RuntimeError("F.rms_norm missing")
                ns = nsets_for(nbytes, cap=64)
                fns = []
                for _ in range(ns):
                    if op in ("copy", "add", "silu_mul"):
                        x = torch.randn(n, device=dev, dtype=dt)
                    else:
                        x = torch.randn(rows, D, device=dev, dtype=dt)
                    if op == "copy":
                        y = torch.empty_like(x)
                        fns.append(lambda x=x, y=y: y.copy_(x))
                    elif op == "add":
                        x2 = torch.randn_like(x)
                        y = torch.empty_like(x)
                        fns.append(lambda x=x, x2=x2, y=y: torch.add(x, x2, out=y))
                    elif op == "silu_mul":
                        x2 = torch.randn_like(x)
                        if impl.startswith("triton"):
                            y = torch.empty_like(x)
                            fns.append(lambda x=x, x2=x2, y=y: triton_silu_mul(x, x2, y))
                        else:
                            fns.append(lambda x=x, x2=x2: F.silu(x) * x2)
                    elif op == "rmsnorm":
                        wt = torch.randn(D, device=dev, dtype=dt)
                        if impl.startswith("triton"):
                            y = torch.empty_like(x)
                            fns.append(lambda x=x, wt=wt, y=y: triton_rmsnorm(x, wt, y))
                        else:
                            fns.append(lambda x=x, wt=wt: F.rms_norm(x, (D,), wt, 1e-6))
                    elif op == "layernorm":
                        wt = torch.randn(D, device=dev, dtype=dt)
                        bs = torch.randn(D, device=dev, dtype=dt)
                        fns.append(lambda x=x, wt=wt, bs=bs: F.layer_norm(x, (D,), wt, bs, 1e-5))
                    elif op == "softmax":
                        fns.append(lambda x=x: torch.softmax(x, dim=-1))
                x = x2 = y = None
                r = bench(fns, target_ms=1.0)
                r["l2_rotation_sets"] = ns
                row.update(r)
                row["gbytes_per_s"] = nbytes / r["time_s"] / 1e9
                row["frac_of_hbm_peak"] = nbytes / r["time_s"] / PEAK["hbm_bytes_per_s"]
                row["status"] = "ok"
                if size == 4096:
                    # the same tiny op timed eagerly: launch overhead as Python sees it
                    r2 = bench(fns[:1], use_graph=False, target_ms=1.0)
                    row2 = dict(row)
                    row2.update(r2)
                    row2["l2_rotation_sets"] = 1
                    row2["gbytes_per_s"] = nbytes / r2["time_s"] / 1e9
                    row2["frac_of_hbm_peak"] = nbytes / r2["time_s"] / PEAK["hbm_bytes_per_s"]
                    row2["note"] = "eager launch-bound reference"
                    w.row(row2)
            except Exception as ex:
                row["status"] = "unavailable"
                row["note"] = err_text(ex)
                try:
                    torch.cuda.synchronize()
                except Exception:
                    pass
            fns = None
            w.row(row)
        log("mem: size=%d done (%.0f s left in section)" % (size, dl.t_end - time.time()))
        torch.cuda.empty_cache()
    w.close()


# ----------------------------------------------------------------------------- M/N sweeps
SWEEP_M = [64, 96, 128, 160, 192, 256, 320, 384, 448, 512, 576, 640, 768, 896, 1024, 1152,
           1280, 1408, 1536, 1792, 2048, 2560, 3072, 4096]
SWEEP_NK = [(4096, 4096, "llama3_8b_o_proj"), (14336, 4096, "llama3_8b_gate_or_up"),
            (8192, 8192, "llama3_70b_o_proj_tp1")]
SWEEP_N = [1024, 1536, 2048, 2304, 2560, 2816, 3072, 3328, 3584, 4096, 4352, 4608, 5120, 6144]


def section_msweep(out, dl, quick, checks):
    """Fine M sweep (tile/wave quantisation at small M) and N sweep at M=8192, K=4096."""
    cols = ["sweep", "variant", "dtype_in", "dtype_out", "m", "n", "k", "shape_name"] + \
        TIMING_COLS + ["flops", "bytes", "tflops_per_s", "gbytes_per_s", "frac_of_dense_peak",
                       "status", "note"]
    w = Csv(os.path.join(out, "gemm_sweep.csv"), cols)
    dev = "cuda"
    f8 = getattr(torch, "float8_e4m3fn", None)
    one = torch.ones((), device=dev, dtype=torch.float32)
    cases = [("m_sweep", M, N, K, name) for (N, K, name) in SWEEP_NK for M in SWEEP_M]
    cases += [("n_sweep", 8192, N, 4096, "n_sweep_m8192_k4096") for N in SWEEP_N]
    if quick:
        cases = cases[:4]
    for (sweep, M, N, K, name) in cases:
        for dt, var in (("bf16", "cublas"), ("fp8", "tensorwise_fast_accum")):
            if dl.over():
                w.close()
                log("msweep: section deadline reached")
                return
            eb = 2 if dt == "bf16" else 1
            flops = 2.0 * M * N * K
            nbytes = (M * K + N * K) * eb + M * N * 2
            row = {"sweep": sweep, "variant": var, "dtype_in": dt, "dtype_out": "bf16", "m": M,
                   "n": N, "k": K, "shape_name": name, "flops": flops, "bytes": nbytes}
            try:
                ns = nsets_for(nbytes)
                fns = []
                for _ in range(ns):
                    a = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
                    b = torch.randn(N, K, device=dev, dtype=torch.bfloat16)
                    if dt == "bf16":
                        fns.append(lambda a=a, b=b: torch.mm(a, b.t()))
                    else:
                        a8, b8 = a.to(f8), b.to(f8)
                        fns.append(lambda a8=a8, b8=b8: torch._scaled_mm(
                            a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                            use_fast_accum=True))
                    a = b = None
                r = bench(fns)
                r["l2_rotation_sets"] = ns
                row.update(r)
                row["tflops_per_s"] = flops / r["time_s"] / 1e12
                row["gbytes_per_s"] = nbytes / r["time_s"] / 1e9
                row["frac_of_dense_peak"] = flops / r["time_s"] / PEAK[dt]
                row["status"] = "ok"
            except Exception as ex:
                row["status"] = "unavailable"
                row["note"] = err_text(ex)
            fns = None
            w.row(row)
    log("msweep: done")
    w.close()


# ----------------------------------------------------------------------------- sustained
def _nvml():
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)

        def read():
            return (pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                    pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
                    pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU))
        read()
        return read
    except Exception:
        return lambda: ("", "", "")


def section_sustained(out, dl, quick, checks):
    """8192^3 GEMMs back to back for a few seconds: throughput and SM clock per window,
    from a cool start (after 10 s idle) to the power-capped steady state."""
    cols = ["dtype_in", "m", "n", "k", "window", "t_s", "calls", "tflops_per_s", "sm_clock_mhz",
            "power_w", "temp_c"]
    w = Csv(os.path.join(out, "sustained.csv"), cols)
    dev = "cuda"
    read = _nvml()
    f8 = getattr(torch, "float8_e4m3fn", None)
    one = torch.ones((), device=dev, dtype=torch.float32)
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    a8, b8 = a.to(f8), b.to(f8)
    fl = 2.0 * 8192 ** 3
    for dt in ("bf16", "fp8"):
        if dl.over():
            break
        f = (lambda: torch.mm(a, b.t())) if dt == "bf16" else (lambda: torch._scaled_mm(
            a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True))
        f()
        torch.cuda.synchronize()
        time.sleep(10.0 if not quick else 1.0)  # let the card cool to its idle clocks
        t0 = time.time()
        s, e = _ev(), _ev()
        for win in range(32 if not quick else 4):
            calls = 160 if dt == "bf16" else 320  # ~0.25 s per window
            s.record()
            for _ in range(calls):
                f()
            e.record()
            e.synchronize()
            ms = s.elapsed_time(e)
            clk, pw, tc = read()
            w.row({"dtype_in": dt, "m": 8192, "n": 8192, "k": 8192, "window": win,
                   "t_s": time.time() - t0, "calls": calls,
                   "tflops_per_s": fl * calls / (ms / 1e3) / 1e12, "sm_clock_mhz": clk,
                   "power_w": pw, "temp_c": tc})
    log("sustained: done")
    w.close()


# ----------------------------------------------------------------------------- environment
def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout
    except Exception as ex:
        return "error: %s" % ex


def smi_query():
    fields = ("name,driver_version,pstate,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,"
              "power.draw,power.limit,temperature.gpu,clocks_event_reasons.active")
    out = sh("nvidia-smi --query-gpu=%s --format=csv" % fields)
    if "error" in out.lower() or "not a valid field" in out.lower() or not out.strip():
        out = sh("nvidia-smi --query-gpu=%s --format=csv" % fields.replace(
            ",clocks_event_reasons.active", ""))
    return out.strip()


def main():
    global LOG
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--sections", default="gemm,grouped,attn,mem,msweep,sustained")
    ap.add_argument("--budget-s", type=float, default=470.0,
                    help="wall-clock budget for all sections (each stops at its share)")
    ap.add_argument("--quick", action="store_true", help="a few configurations per section")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    LOG = open(os.path.join(args.out, "log.txt"), "w")
    t0 = time.time()
    if not torch.cuda.is_available():
        log("no CUDA device")
        return 1
    env = {"date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "torch": torch.__version__, "cuda_runtime": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(), "python": sys.version.split()[0],
           "triton": getattr(triton, "__version__", None), "platform": platform.platform(),
           "device_name": torch.cuda.get_device_name(0)}
    p = torch.cuda.get_device_properties(0)
    env["sm_count"] = p.multi_processor_count
    env["total_mem_bytes"] = p.total_memory
    env["l2_bytes"] = getattr(p, "L2_cache_size", None)
    env["cc"] = "%d.%d" % (p.major, p.minor)
    env["nvcc"] = sh("nvcc --version | tail -2").strip()
    env["smi_start"] = smi_query()
    with open(os.path.join(args.out, "smi_q.txt"), "w") as fq:
        fq.write("=== start ===\n" + sh("nvidia-smi -q -d CLOCK,POWER,PERFORMANCE,TEMPERATURE"))
    sampler = None
    try:
        sampler = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,"
             "temperature.gpu,utilization.gpu,pstate", "--format=csv", "-lms", "250"],
            stdout=open(os.path.join(args.out, "smi_samples.csv"), "w"),
            stderr=subprocess.DEVNULL)
    except Exception as ex:
        env["sampler_error"] = err_text(ex)
    log("env:", json.dumps(env))
    # clock warm-up: ~3 s of large bf16 GEMMs (and a reference rate)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    tw = time.time()
    while time.time() - tw < 3.0:
        for _ in range(10):
            a @ b
        torch.cuda.synchronize()
    r = bench([lambda: a @ b], use_graph=False)
    env["warmup_bf16_8192cubed_tflops"] = 2 * 8192 ** 3 / r["time_s"] / 1e12
    env["smi_after_warmup"] = smi_query()
    log("warm-up 8192^3 bf16: %.1f TFLOP/s" % env["warmup_bf16_8192cubed_tflops"])
    del a, b
    checks = {}
    env["checks"] = checks
    secs = [s.strip() for s in args.sections.split(",") if s.strip()]
    share = {"gemm": 0.20, "grouped": 0.20, "attn": 0.25, "mem": 0.10, "msweep": 0.10,
             "sustained": 0.15}
    tot = sum(share[s] for s in secs)
    budget_left = args.budget_s - (time.time() - t0)
    t_end = time.time()
    env["sections"] = {}
    fnmap = {"gemm": section_gemm, "grouped": section_grouped, "attn": section_attn,
             "mem": section_mem, "msweep": section_msweep, "sustained": section_sustained}
    for s in secs:
        t_end += budget_left * share[s] / tot
        ts = time.time()
        log("== section %s (until +%.0f s)" % (s, t_end - t0))
        try:
            fnmap[s](args.out, Deadline(t_end), args.quick, checks)
        except Exception:
            log("section %s failed:\n%s" % (s, traceback.format_exc()))
            env["sections"][s + "_error"] = traceback.format_exc()[-2000:]
        env["sections"][s] = {"start_unix": ts, "end_unix": time.time(),
                              "smi_end": smi_query()}
        with open(os.path.join(args.out, "smi_q.txt"), "a") as fq:
            fq.write("=== after %s ===\n" % s + sh(
                "nvidia-smi -q -d CLOCK,POWER,PERFORMANCE,TEMPERATURE"))
        with open(os.path.join(args.out, "env.json"), "w") as fe:
            json.dump(env, fe, indent=1)
    if sampler is not None:
        sampler.terminate()
        try:
            sampler.wait(5)
        except Exception:
            pass
    env["total_wall_s"] = time.time() - t0
    with open(os.path.join(args.out, "env.json"), "w") as fe:
        json.dump(env, fe, indent=1)
    log("checks:", json.dumps(checks))
    log("done in %.0f s" % env["total_wall_s"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
