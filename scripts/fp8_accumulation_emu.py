#!/usr/bin/env python3
"""CPU emulation of Hopper's FP8 wgmma accumulation in S = Q·Kᵀ, to see what it adds to the
attention output's error against plain FP8 (exact fp32 scores, P in e4m3), on the outlier-heavy
inputs of tests/fp8_test_inputs.h.

Model (DeepSeek-V3, section 3.3.2: about 14 bits kept on the H800): each k32 step adds its 32
products to the accumulator after aligning all 33 terms to the largest one's exponent and keeping
--bits fraction bits (truncated); --promote N adds a fresh accumulator to an fp32 total every N
dims (the promotion DeepSeek-V3 uses). An emulation, not the hardware: it says how large the
effect can be and how pooled ratios spread, the GPU tests say what the kernel does.

  python3 scripts/fp8_accumulation_emu.py [--head-dim 256] [--rows 3] [--draws 200] [--pool 1,4,16,64]
Prints, per head dim, the median and the spread of error(emulated) / error(plain FP8), single draws
and pooled.
"""
import argparse
import math
import statistics

import torch

E4M3 = torch.float8_e4m3fn


def quantise(x):
    """Per-head e4m3 values (as float64) and the descale, the largest magnitude mapped to 448."""
    amax = x.abs().amax(dim=(-2, -1), keepdim=True).clamp_min(1e-30)
    descale = amax / 448
    return (x / descale).to(torch.float32).to(E4M3).to(torch.float64), descale


def emulated_scores(q, k, bits, promote=None, step=32):
    """q [M, d] · k [N, d]ᵀ of e4m3 values, accumulated as modelled above."""
    products = q[:, None, :] * k[None, :, :]  # exact in float64
    acc = torch.zeros(q.shape[0], k.shape[0], dtype=torch.float64)
    total = torch.zeros_like(acc)
    for c0 in range(0, q.shape[1], step):
        if promote and c0 and c0 % promote == 0:
            total, acc = total + acc, torch.zeros_like(acc)
        terms = torch.cat([products[:, :, c0:c0 + step], acc[:, :, None]], dim=2)
        top = torch.floor(torch.log2(terms.abs().amax(dim=2).clamp_min(1e-300)))
        ulp = torch.exp2(top - bits)[:, :, None]
        acc = (torch.trunc(terms / ulp) * ulp).sum(2).to(torch.float32).to(torch.float64)
    return total + acc


def attention(q, k, v, scale, causal, scores=None, p_e4m3=True):
    s = (q @ k.T if scores is None else scores) * scale
    m, n = s.shape
    if causal:  # bottom-right aligned, as attnprof's fp8 problems
        s = s.masked_fill(torch.arange(n)[None, :] > torch.arange(m)[:, None] + (n - m), -math.inf)
    p = torch.exp(s - s.amax(1, keepdim=True))
    total = p.sum(1, keepdim=True)
    if p_e4m3:  # P scaled by 2^8 before its rounding, as the kernel and plain FP8 do
        p = (p * 256).to(torch.float32).to(E4M3).to(torch.float64) / 256
    return (p @ v) / total


def one_draw(d, rows, keys, gen, bits, promote):
    """Squared errors (plain FP8, emulated) and the reference's squared norm, over `rows` query rows
    (heads of one K/V head) of one-query attention to `keys` keys, causal."""
    q = torch.randn(rows, 1, d, generator=gen, dtype=torch.float64)
    k = torch.randn(keys, d, generator=gen, dtype=torch.float64)
    v = torch.randn(keys, d, generator=gen, dtype=torch.float64)
    for c in (3, d // 2):  # outlier channels, as outlier_inputs
        q[..., c] *= 50
        k[:, c] *= 50
    q *= 0.05
    q, k, v = (t.to(torch.bfloat16).to(torch.float64) for t in (q, k, v))
    (q8, qd), (k8, kd), (v8, _) = quantise(q), quantise(k[None])[0:2], quantise(v[None])[0:2]
    k8, v8, kd = k8[0], v8[0], kd.item()
    out = [0.0, 0.0, 0.0]
    for h in range(rows):
        scale = qd[h].item() * kd / math.sqrt(d)
        ref = attention(q8[h], k8, v8, scale, True, p_e4m3=False)
        plain = attention(q8[h], k8, v8, scale, True)
        emu = attention(q8[h], k8, v8, scale, True, scores=emulated_scores(q8[h], k8, bits, promote))
        out[0] += ((plain - ref) ** 2).sum().item()
        out[1] += ((emu - ref) ** 2).sum().item()
        out[2] += (ref ** 2).sum().item()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--head-dim", type=int, action="append", help="repeatable (default 128 and 256)")
    ap.add_argument("--rows", type=int, default=3, help="query heads of one-query attention (the tests' 1x3/1x1/300)")
    ap.add_argument("--keys", type=int, default=300)
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--pool", default="1,4,16,64", help="draws pooled per ratio")
    ap.add_argument("--bits", type=int, default=13)
    ap.add_argument("--promote", type=int, default=None, help="promote to fp32 every N dims")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    dims = args.head_dim or [128, 256]
    for d in dims:
        if d < 32 or d % 32:
            ap.error(f"--head-dim {d}: expected a positive multiple of 32 (whole k32 steps)")
    for name in ("rows", "keys", "draws", "bits"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} {getattr(args, name)}: expected at least 1")
    if args.promote is not None and (args.promote < 32 or args.promote % 32):
        ap.error(f"--promote {args.promote}: expected a positive multiple of 32 (whole k32 steps)")
    try:
        pools = [int(x) for x in args.pool.split(",")]
    except ValueError:
        pools = []
    if not pools or not all(1 <= n <= args.draws for n in pools):
        ap.error(f"--pool {args.pool!r}: expected comma-separated counts from 1 to --draws ({args.draws})")
    gen = torch.Generator().manual_seed(args.seed)
    for d in dims:
        draws = [one_draw(d, args.rows, args.keys, gen, args.bits, args.promote) for _ in range(args.draws)]
        for pool in pools:
            ratios = [math.sqrt(sum(e[1] for e in draws[i:i + pool]) / sum(e[0] for e in draws[i:i + pool]))
                      for i in range(0, len(draws) - pool + 1, pool)]
            print(f"head_dim {d}, {pool} draw(s) pooled: error / plain FP8 median {statistics.median(ratios):.2f}, "
                  f"max {max(ratios):.2f}, above 2: {sum(r > 2 for r in ratios)} of {len(ratios)}")


if __name__ == "__main__":
    main()
