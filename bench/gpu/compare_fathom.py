#!/usr/bin/env python3
"""compare_fathom.py: fathom's kernel-model predictions for the kernels measured by
measure_kernels.py, and the ratio measured / predicted. Needs no GPU.

    python3 bench/gpu/compare_fathom.py --meas validation/measurements/h100_sxm/run1 \
        --build BUILD_DIR [--repo .] [--csv OUT.csv] [--md OUT.md]

BUILD_DIR holds libfathom_core.a (cmake -S . -B BUILD_DIR && cmake --build BUILD_DIR).
The H100 figures (h100_sxm compute, hbm3_h100_80gb memory) are read from
configs/hardware/hardware_library.yaml and passed to bench/gpu/fathom_predict.c,
which calls fth_kernel_gemm / fth_kernel_attention / fth_kernel_elementwise for the
roofline and the tiled model. Flash-attention backward is charged as fathom's
fth_block.c does: 2.5x the forward FLOPs and 2x its bytes at the attention rate.
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))

# fth_block.c per-element FLOPs (memory-bound anyway on the vector rate)
ELEM = {  # op: (flops per element, bytes per element for bf16)
    "copy": (0.0, 4.0), "add": (1.0, 6.0), "silu_mul": (8.0, 6.0), "rmsnorm": (5.0, 4.0),
    "layernorm": (5.0, 4.0), "softmax": (8.0, 4.0)}


def load_node(repo):
    import yaml
    with open(os.path.join(repo, "configs/hardware/hardware_library.yaml")) as f:
        y = yaml.safe_load(f)
    c = y["components"]["compute"]["h100_sxm"]
    m = y["components"]["memory"]["hbm3_h100_80gb"]
    return {"bf16": float(c["bf16_nominal"]), "fp8": float(c["fp8_nominal"]),
            "fp32": float(c["fp32_nominal"]), "eff": float(c["efficiency"]),
            "attn_eff": float(c.get("attention_efficiency", 0) or 0),
            "units": int(c.get("compute_units", 0) or 0),
            "tile_m": float(c.get("gemm_tile_m", 0) or 0),
            "tile_n": float(c.get("gemm_tile_n", 0) or 0),
            "stack_bw": float(m["bandwidth_per_stack_nominal"]), "stacks": int(m["num_stack"]),
            "mem_eff": float(m["efficiency"]),
            "fp8_eff": float(c.get("fp8_efficiency", 0) or 0),
            "k_overhead": float(c.get("gemm_k_overhead_bytes", 0) or 0),
            "expert_s": float(c.get("expert_gemm_overhead_sec", 0) or 0)}


def build_predictor(repo, build):
    exe = os.path.join(build, "fathom_predict_bench")
    src = os.path.join(HERE, "fathom_predict.c")
    lib = os.path.join(build, "libfathom_core.a")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        subprocess.check_call(["cc", "-O2", "-std=c11", "-I", os.path.join(repo, "src/core"), src,
                               lib, "-lm", "-o", exe])
    return exe


def predict(exe, node, queries):
    args = [exe] + [str(node[k]) for k in ("bf16", "fp8", "fp32", "eff", "attn_eff", "units",
                                             "tile_m", "tile_n", "stack_bw", "stacks",
                                             "mem_eff", "fp8_eff", "k_overhead", "expert_s")]
    out = subprocess.run(args, input="\n".join(queries) + "\n", capture_output=True, text=True,
                         check=True).stdout.split("\n")
    res = []
    for line in out:
        if line.strip():
            t, c, m, fl, by = (float(x) for x in line.split())
            res.append({"time_s": t, "compute_s": c, "memory_s": m})
    assert len(res) == len(queries), (len(res), len(queries))
    return res


def read(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [r for r in csv.DictReader(f) if r.get("status") == "ok"]


def gather(meas):
    """One record per measured kernel: family, keys, measured time, queries."""
    recs = []
    for fam, fn in (("gemm", "gemm.csv"), ("gemm_sweep", "gemm_sweep.csv")):
        for r in read(os.path.join(meas, fn)):
            dt = r["dtype_in"]
            eb = 2 if dt == "bf16" else 1
            q = "gemm %%s %s %s %s %s 1 %d" % (dt, r["m"], r["n"], r["k"], eb)
            recs.append({"family": fam, "variant": dt + "_" + r["variant"], "m": int(r["m"]),
                         "n": int(r["n"]), "k": int(r["k"]), "shape": r["shape_name"],
                         "measured_s": float(r["time_s"]), "q": q, "flops": float(r["flops"]),
                         "peak": 989.4e12 if dt == "bf16" else 1978.9e12})
    for r in read(os.path.join(meas, "grouped_gemm.csv")):
        dt = r["dtype"]
        eb = 2 if dt == "bf16" else 1
        q = "gemm %%s %s %s %s %s %s %d" % (dt, r["tokens_per_expert"], r["n"], r["k"],
                                           r["experts"], eb)
        recs.append({"family": "grouped", "variant": r["variant"], "shape": r["shape_name"],
                     "proj": r["proj"], "E": int(r["experts"]), "T": int(r["tokens_per_expert"]),
                     "n": int(r["n"]), "k": int(r["k"]), "measured_s": float(r["time_s"]),
                     "q": q, "flops": float(r["flops"]),
                     "peak": 989.4e12 if dt == "bf16" else 1978.9e12})
    for r in read(os.path.join(meas, "attention.csv")):
        q = "attn %%s bf16 %s %s %s %s %s %s %s 1 2" % (r["batch"], r["heads"], r["kv_heads"],
                                                        r["seq_len"], r["seq_len"], r["d_qk"],
                                                        r["d_v"])
        recs.append({"family": "attention", "variant": r["backend"] + "_" + r["mode"],
                     "mode": r["mode"], "s": int(r["seq_len"]), "h": int(r["heads"]),
                     "d": "%s/%s" % (r["d_qk"], r["d_v"]), "measured_s": float(r["time_s"]),
                     "q": q, "flops": float(r["flops_fa_convention"]), "peak": 989.4e12})
    for r in read(os.path.join(meas, "memory_bound.csv")):
        if r["timing_mode"] != "graph":
            continue
        fpe, bpe = ELEM[r["op"]]
        q = "elem %%s bf16 %s %g %g" % (r["elements"], fpe, bpe)
        recs.append({"family": "memory", "variant": r["op"] + "_" + r["impl"],
                     "size": int(r["size_bytes_per_tensor"]), "measured_s": float(r["time_s"]),
                     "q": q, "bytes": float(r["bytes_useful"]), "peak": 0})
    return recs


def attach_predictions(exe, node, recs, launch_s=0.0):
    for model in ("roofline", "tiled"):
        res = predict(exe, node, [r["q"] % model for r in recs])
        for r, p in zip(recs, res):
            t = p["time_s"]
            if r["family"] == "attention" and r["mode"] == "fwd_bwd":
                t = t + max(2.5 * p["compute_s"], 2.0 * p["memory_s"]) + launch_s
            t += launch_s
            r["pred_" + model + "_s"] = t
            r["ratio_" + model] = r["measured_s"] / t
            if model == "roofline":
                r["pred_bound"] = "compute" if p["compute_s"] >= p["memory_s"] else "memory"


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(p * (len(xs) - 1)))))]


def summ(xs):
    return "%.2f (%.2f-%.2f, n=%d)" % (statistics.median(xs), q(xs, 0.1), q(xs, 0.9), len(xs))


def table(recs, keyf, title, cols=("ratio_roofline", "ratio_tiled"), extra=None):
    g = defaultdict(list)
    for r in recs:
        k = keyf(r)
        if k is not None:
            g[k].append(r)
    lines = ["", "### " + title, "",
             "| key | " + " | ".join(c + " median (p10-p90, n)" for c in cols) +
             (" | " + extra[0] if extra else "") + " |",
             "|---" * (len(cols) + 1 + (1 if extra else 0)) + "|"]
    for k in sorted(g, key=lambda x: [(0, v) if isinstance(v, (int, float)) else (1, str(v))
                                      for v in (x if isinstance(x, tuple) else (x,))]):
        rs = g[k]
        row = "| " + " ".join(str(v) for v in (k if isinstance(k, tuple) else (k,))) + " | " + \
            " | ".join(summ([r[c] for r in rs]) for c in cols)
        if extra:
            row += " | " + extra[1](rs)
        lines.append(row + " |")
    return "\n".join(lines)


def frac(rs):
    xs = [r["flops"] / r["measured_s"] / r["peak"] for r in rs if r.get("peak")]
    return "%.2f" % statistics.median(xs) if xs else ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meas", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(HERE)))
    ap.add_argument("--csv")
    ap.add_argument("--md")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a node figure for a what-if (eff, attn_eff, mem_eff, tile_m, "
                         "tile_n, ...)")
    ap.add_argument("--launch-s", type=float, default=0.0,
                    help="fixed time added to every predicted kernel (workload kernel_launch_sec)")
    a = ap.parse_args()
    node = load_node(a.repo)
    for kv in a.set:
        k, v = kv.split("=", 1)
        if k not in node:
            ap.error("unknown node key %s" % k)
        node[k] = type(node[k])(float(v))
    exe = build_predictor(a.repo, a.build)
    recs = gather(a.meas)
    attach_predictions(exe, node, recs, a.launch_s)
    if a.csv:
        cols = ["family", "variant", "shape", "proj", "m", "n", "k", "E", "T", "s", "h", "d",
                "mode", "size", "measured_s", "pred_roofline_s", "pred_tiled_s", "ratio_roofline",
                "ratio_tiled", "pred_bound"]
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
            w.writeheader()
            for r in recs:
                w.writerow({c: ("%.6g" % r[c] if isinstance(r.get(c), float) else r.get(c, ""))
                            for c in cols})
    ex = ("achieved frac of dense peak (median)", frac)
    out = ["node: %s; launch_s added per kernel: %g" % (node, a.launch_s)]
    gem = [r for r in recs if r["family"] == "gemm"]
    out.append(table(gem, lambda r: (r["variant"], r["m"]), "GEMM by variant and M", extra=ex))
    out.append(table(gem, lambda r: (r["variant"], r["pred_bound"]),
                     "GEMM by variant and roofline-bound side", extra=ex))
    sw = [r for r in recs if r["family"] == "gemm_sweep"]
    out.append(table(sw, lambda r: (r["variant"], r["shape"], r["m"], r["n"]),
                     "GEMM sweeps (one kernel each)", extra=ex))
    gr = [r for r in recs if r["family"] == "grouped"]
    out.append(table(gr, lambda r: (r["variant"], r["T"]), "Grouped GEMM by variant and tokens/expert",
                     extra=ex))
    out.append(table(gr, lambda r: (r["variant"], r["shape"], r["T"]) if r["T"] in (8, 128) else None,
                     "Grouped GEMM by variant, expert shape, tokens/expert (8, 128)", extra=ex))
    out.append(table(gr, lambda r: (r["variant"], r["E"]) if r["T"] == 8 else None,
                     "Grouped GEMM at 8 tokens/expert by number of experts", extra=ex))
    at = [r for r in recs if r["family"] == "attention"]
    out.append(table(at, lambda r: (r["variant"], r["d"], r["s"]),
                     "Attention by backend/mode, head dim and sequence length", extra=ex))
    out.append(table(at, lambda r: (r["variant"], r["h"]), "Attention by backend/mode and heads",
                     extra=ex))
    mem = [r for r in recs if r["family"] == "memory"]
    out.append(table(mem, lambda r: (r["variant"], r["size"]), "Memory-bound by op and size",
                     extra=("achieved GB/s (median)", lambda rs: "%.0f" % statistics.median(
                         [x["bytes"] / x["measured_s"] / 1e9 for x in rs]))))
    text = "\n".join(out) + "\n"
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
