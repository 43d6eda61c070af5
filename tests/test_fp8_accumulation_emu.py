#!/usr/bin/env python3
"""scripts/fp8_accumulation_emu.py's model of Hopper's FP8 accumulation: with enough bits it is exact
accumulation, with 13 each k32 step loses at most 2^-13 of its largest term (truncated toward zero),
promotion restarts the accumulator, and the attention it feeds matches the float64 formula."""
import math
import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
import fp8_accumulation_emu as emu  # noqa: E402


def e4m3_values(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g, dtype=torch.float64)
    x[..., 3] *= 50  # an outlier channel, as the tests' inputs
    return emu.quantise(x)[0]


class Accumulation(unittest.TestCase):
    def test_many_bits_is_exact_accumulation(self):
        q, k = e4m3_values(5, 256, seed=1), e4m3_values(7, 256, seed=2)
        exact = q @ k.T
        for promote in (None, 128, 64):
            got = emu.emulated_scores(q, k, bits=60, promote=promote)
            # Only the fp32 rounding of each step's partial sum remains.
            self.assertTrue(torch.allclose(got, exact, rtol=1e-5, atol=1e-3), promote)

    def test_each_step_loses_at_most_its_largest_terms_last_kept_bit(self):
        q, k = e4m3_values(6, 256, seed=3), e4m3_values(9, 256, seed=4)
        exact = q @ k.T
        got = emu.emulated_scores(q, k, bits=13)
        products = (q[:, None, :] * k[None, :, :]).abs()
        # A step truncates 33 terms, each by less than an ulp of the largest of them
        # (at most the running sum's magnitude, itself at most the sum of |products|), plus fp32 rounding.
        bound = 33 * (256 // 32) * math.ldexp(1.0, -13) * products.sum(2) + 1e-6 * products.sum(2)
        err = (got - exact).abs()
        self.assertTrue(bool((err <= bound).all()))
        self.assertGreater(err.max().item(), 0.0, "13 bits must lose something on outlier-heavy products")

    def test_promotion_restarts_the_accumulator(self):
        q, k = e4m3_values(4, 256, seed=5), e4m3_values(4, 256, seed=6)
        promoted = emu.emulated_scores(q, k, bits=13, promote=128)
        halves = (emu.emulated_scores(q[:, :128], k[:, :128], bits=13)
                  + emu.emulated_scores(q[:, 128:], k[:, 128:], bits=13))
        self.assertTrue(torch.equal(promoted, halves))


class Attention(unittest.TestCase):
    def test_exact_scores_and_unrounded_p_give_the_softmax_formula(self):
        g = torch.Generator().manual_seed(7)
        q, k, v = (torch.randn(n, 64, generator=g, dtype=torch.float64) for n in (3, 40, 40))
        s = (q @ k.T) * 0.125
        s = s.masked_fill(torch.arange(40)[None, :] > torch.arange(3)[:, None] + 37, -math.inf)
        want = torch.softmax(s, -1) @ v
        got = emu.attention(q, k, v, 0.125, causal=True, p_e4m3=False)
        self.assertTrue(torch.allclose(got, want, rtol=1e-12, atol=1e-12))
        rounded = emu.attention(q, k, v, 0.125, causal=True)
        self.assertFalse(torch.equal(rounded, got), "P in e4m3 must show")


if __name__ == "__main__":
    unittest.main()
