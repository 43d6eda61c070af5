#!/usr/bin/env python3
"""attnprof's operators from Python: load the library, check every operator it
registers, and feed each one bad inputs. Every bad input must raise a Python
RuntimeError that names the operator; none may kill the process.

  python3 scripts/ops_check.py --lib build/libattnprof_core.so [--device cpu|cuda]

--device cpu (the ctest, CI): the schemas exist; every operator refuses CPU
tensors (the dispatcher has no CPU kernel: NotImplementedError, a
RuntimeError) and arguments of the wrong type, for operators this script knows
and, from their schemas, for those it does not.
--device cuda (scripts/gpu_check.sh, with the library built on that machine):
a valid call per known operator, then its table of bad inputs (wrong device,
dtype, rank, shape, mismatched sizes, non-contiguous, bad scale, empty), and
generic bad inputs for operators without a table.

Each case runs in a child process that reports it before it starts, so a case
that crashes the interpreter (SIGSEGV) is named and the others still run.
Prints one line per case and a summary; exits 1 on any failure or crash, 77
when torch is not importable or (cuda) no GPU is present.
"""
import argparse
import itertools
import os
import subprocess
import sys

try:
    import torch
except Exception as exc:  # pragma: no cover - depends on the machine
    print(f"SKIP: Python torch is not importable here ({exc.__class__.__name__}: {exc})")
    sys.exit(77)


def registered_ops():
    """Every attnprof:: operator the loaded library registered, by bare name."""
    names = set()
    for full in torch._C._dispatch_get_all_op_names():
        if full.startswith("attnprof::"):
            names.add(full.split("::", 1)[1].split(".", 1)[0])
    return sorted(names)


def op(name):
    return getattr(torch.ops.attnprof, name)


# --- known operators: a valid call and the bad inputs, per device -------------------

def flash_inputs(dev, dtype=torch.bfloat16, b=2, hq=4, hkv=2, sq=64, skv=80, d=64):
    g = torch.Generator(device="cpu").manual_seed(0)
    q = torch.randn(b, hq, sq, d, generator=g).to(dev, dtype)
    k = torch.randn(b, hkv, skv, d, generator=g).to(dev, dtype)
    v = torch.randn(b, hkv, skv, d, generator=g).to(dev, dtype)
    return q, k, v


def flash_cases(dev, name="flash_attention", empty="ok", *extra):
    """(name, thunk, expectation): 'error' must raise naming the op, 'ok' must
    return, 'either' may do one or the other (never crash). `extra`: the
    arguments after the scale (a by-name operator's configuration)."""
    q, k, v = flash_inputs(dev)
    f = (lambda *a: op(name)(*a, *extra)) if extra else op(name)
    s = 0.125
    bsd = lambda t: t.transpose(1, 2).contiguous().transpose(1, 2)  # [b, s, h, d] storage viewed as [b, h, s, d]
    return [
        ("valid GQA call", lambda: f(q, k, v, True, s), "ok"),
        ("q on the CPU", lambda: f(q.cpu(), k, v, True, s), "error"),
        ("k on the CPU", lambda: f(q, k.cpu(), v, True, s), "error"),
        ("v on the CPU", lambda: f(q, k, v.cpu(), True, s), "error"),
        ("q float32", lambda: f(q.float(), k, v, True, s), "error"),
        ("q float64", lambda: f(q.double(), k.double(), v.double(), True, s), "error"),
        ("k float16, q bfloat16", lambda: f(q, k.half(), v, True, s), "error"),
        ("q int32", lambda: f(q.int(), k, v, True, s), "error"),
        ("q rank 3", lambda: f(q[0], k, v, True, s), "error"),
        ("q rank 5", lambda: f(q.unsqueeze(0), k, v, True, s), "error"),
        ("k and v shapes differ", lambda: f(q, k, v[:, :, :40], True, s), "error"),
        ("batch differs", lambda: f(q, k[:1].contiguous(), v[:1].contiguous(), True, s), "error"),
        ("head_dim differs", lambda: f(q, *flash_inputs(dev, d=128)[1:], True, s), "error"),
        ("head_dim 32", lambda: f(*flash_inputs(dev, d=32), True, s), "error"),
        ("heads_q not a multiple of heads_kv", lambda: f(*flash_inputs(dev, hq=3, hkv=2), True, s), "error"),
        ("no key/value heads", lambda: f(q, k[:, :0], v[:, :0], True, s), "error"),
        ("q non-contiguous ([b, s, h, d] transposed)", lambda: f(bsd(q), k, v, True, s), "error"),
        ("k non-contiguous", lambda: f(q, bsd(k), v, True, s), "error"),
        ("v non-contiguous (expanded)", lambda: f(q, k, v[:, :1].expand(-1, 2, -1, -1), True, s), "error"),
        ("scale 0", lambda: f(q, k, v, True, 0.0), "error"),
        ("scale negative", lambda: f(q, k, v, True, -0.125), "error"),
        ("scale NaN", lambda: f(q, k, v, True, float("nan")), "error"),
        ("scale inf", lambda: f(q, k, v, True, float("inf")), "error"),
        ("empty batch (returns empty outputs)", lambda: f(q[:0], k[:0], v[:0], True, s), empty),
        ("no keys (returns zeros)", lambda: f(q, k[:, :, :0], v[:, :, :0], False, s), empty),
        # The kernels copy 16-byte pieces: a contiguous view one element in is refused, not a device fault.
        ("k one element into its storage", lambda: f(q, one_element_in(k), v, True, s), "error"),
        ("one query row, one batch, one key head: strides of size-1 dimensions ignored",
         lambda: same_with_odd_unit_strides(f, q[:1, :, :1], k[:1, :1], v[:1, :1], True, s), "ok"),
    ] + (window_cases(lambda *w: f(q, k, v, *w)) if name == "flash_attention" else [])


def unit_strides_odd(t):
    """t's values with every size-1 dimension given stride 12345: PyTorch still calls the tensor contiguous
    (contiguous() returns it as is), as it does one query row made by transpose(1, 2)."""
    c = t.clone(memory_format=torch.contiguous_format)
    return c.as_strided(c.shape, [12345 if n == 1 else st for n, st in zip(c.shape, c.stride())])


def same_with_odd_unit_strides(f, *tensors):
    """f on tensors whose size-1 dimensions carry odd strides gives what it gives on plain ones, bit for bit."""
    plain = [t.contiguous() if isinstance(t, torch.Tensor) else t for t in tensors]
    odd = [unit_strides_odd(t) if isinstance(t, torch.Tensor) else t for t in plain]
    assert all(t.is_contiguous() for t in odd if isinstance(t, torch.Tensor))
    got, ref = f(*odd), f(*plain)
    if not all(torch.equal(a, b) for a, b in zip(got, ref)):
        raise AssertionError("a size-1 dimension's stride changed the result")
    return got


def one_element_in(t):
    """t's values in a contiguous tensor that starts one element into its storage (2 bytes off 16)."""
    return torch.cat([t.flatten(), t.flatten()[:1]])[1:].view(t.shape)


def window_cases(f):
    """The sliding window of the portable operators: f(causal, scale, window)."""
    s = 0.125
    return [
        ("window 16", lambda: f(True, s, 16), "ok"),
        ("window 1 (the diagonal only)", lambda: f(True, s, 1), "ok"),
        ("window past the keys", lambda: f(True, s, 10 ** 6), "ok"),
        ("window past int32", lambda: f(True, s, 2 ** 40), "ok"),
        ("window 0 (none)", lambda: f(True, s, 0), "ok"),
        ("window -1", lambda: f(True, s, -1), "error"),
        ("window with causal False", lambda: f(False, s, 16), "error"),
    ]


def paged_inputs(dev, page=16, b=2, hq=4, hkv=2, sq=3, skv=80, d=64, dtype=torch.bfloat16):
    """q, the paged k/v caches, the int32 block table, and the contiguous k, v they hold."""
    q, k, v = flash_inputs(dev, dtype, b, hq, hkv, sq, skv, d)
    per = -(-skv // page)
    table = torch.randperm(b * per, generator=torch.Generator().manual_seed(1)).view(b, per)

    def pool(t):
        padded = torch.zeros(b, hkv, per * page, d, dtype=dtype, device=dev)
        padded[:, :, :skv] = t
        slots = padded.view(b, hkv, per, page, d).permute(0, 2, 1, 3, 4).reshape(b * per, hkv, page, d)
        out = torch.empty(slots.shape, dtype=dtype, device=dev)  # contiguous (empty_like keeps a view's strides)
        out[table.flatten().to(dev)] = slots
        return out
    return q, pool(k), pool(v), table.to(dev, torch.int32), k, v


def paged_cases(dev):
    """attnprof::flash_attention_paged: valid calls must equal the contiguous operator bit for bit."""
    s = 0.125
    f = op("flash_attention_paged")

    def same(page=16, sq=3, causal=True, window=0, keys=None, **kw):
        q, kc, vc, t, k, v = paged_inputs(dev, page, sq=sq, **kw)
        n = k.shape[2] if keys is None else keys
        # -1 (every key the table holds) where the keys fill their pages exactly.
        out, lse = f(q, kc, vc, t, -1 if keys is None and n % page == 0 else n, causal, s, window)
        ref, ref_lse = op("flash_attention")(q, k[:, :, :n].contiguous(), v[:, :, :n].contiguous(), causal, s, window)
        if not (torch.equal(out, ref) and torch.equal(lse, ref_lse)):
            raise AssertionError("differs from attnprof::flash_attention on the same keys")
        return out, lse

    def inference(**kw):
        with torch.inference_mode():  # as servers run: tensors without a version counter
            out = same(**kw)
            bad = paged_inputs(dev)[3].clone()
            bad[0, 0] = -1
            try:
                f(*paged_inputs(dev)[:3], bad, -1, True, s)
            except RuntimeError:
                return out
            raise AssertionError("an inference-mode table naming page -1 was not refused")

    q, kc, vc, t, _, _ = paged_inputs(dev)
    bad_table = t.clone()
    bad_table[0, 0] = kc.shape[0]
    return [
        ("valid decode, 16-token pages", lambda: same(16, sq=1), "ok"),
        ("valid prefill, 1-token pages", lambda: same(1, sq=80, skv=80), "ok"),
        ("valid chunk, 64-token pages, GQA", lambda: same(64, sq=37, skv=300), "ok"),
        ("valid, 256-token pages, non-causal", lambda: same(256, sq=5, causal=False), "ok"),
        ("valid, window 16", lambda: same(16, sq=4, window=16), "ok"),
        ("valid under torch.inference_mode, and a bad table refused there", lambda: inference(page=16, sq=1), "ok"),
        ("valid, seqlen_k 70 of 80", lambda: same(16, sq=1, keys=70), "ok"),
        ("seqlen_k 0 (returns zeros)", lambda: f(q, kc, vc, t, 0, True, s), "ok"),
        ("seqlen_k past the table", lambda: f(q, kc, vc, t, 81, True, s), "error"),
        ("seqlen_k -2", lambda: f(q, kc, vc, t, -2, True, s), "error"),
        ("block_table int64", lambda: f(q, kc, vc, t.long(), -1, True, s), "error"),
        ("block_table float", lambda: f(q, kc, vc, t.float(), -1, True, s), "error"),
        ("block_table on the CPU", lambda: f(q, kc, vc, t.cpu(), -1, True, s), "error"),
        ("block_table rank 1", lambda: f(q, kc, vc, t.flatten(), -1, True, s), "error"),
        ("block_table rows != batch", lambda: f(q, kc, vc, t[:1], -1, True, s), "error"),
        ("block_table non-contiguous", lambda: f(q, kc, vc, t.t().contiguous().t(), -1, True, s), "error"),
        ("block_table names a page past the pool", lambda: f(q, kc, vc, bad_table, -1, True, s), "error"),
        ("block_table names page -1", lambda: f(q, kc, vc, t - 1, -1, True, s), "error"),
        ("page size 3 (not a power of two)", lambda: f(q, kc[:, :, :3].contiguous(), vc[:, :, :3].contiguous(), t, 12,
                                                      True, s), "error"),
        ("k_cache and v_cache shapes differ", lambda: f(q, kc, vc[:-1].contiguous(), t, -1, True, s), "error"),
        ("k_cache float16", lambda: f(q, kc.half(), vc.half(), t, -1, True, s), "error"),
        ("k_cache on the CPU", lambda: f(q, kc.cpu(), vc, t, -1, True, s), "error"),
        ("k_cache rank 3", lambda: f(q, kc[0], vc[0], t, -1, True, s), "error"),
        ("k_cache non-contiguous", lambda: f(q, kc.transpose(1, 2), vc, t, -1, True, s), "error"),
        ("k_cache one element into its storage", lambda: f(q, one_element_in(kc), vc, t, -1, True, s), "error"),
        ("q float32", lambda: f(q.float(), kc, vc, t, -1, True, s), "error"),
        ("heads_q not a multiple of the cache's heads", lambda: f(q[:, :3].contiguous(), kc, vc, t, -1, True, s),
         "error"),
        ("head_dim differs", lambda: f(q, *paged_inputs(dev, d=128)[1:4], -1, True, s), "error"),
        ("scale NaN", lambda: f(q, kc, vc, t, -1, True, float("nan")), "error"),
        ("window -1", lambda: f(q, kc, vc, t, -1, True, s, -1), "error"),
        ("window with causal False", lambda: f(q, kc, vc, t, -1, False, s, 16), "error"),
        ("empty batch", lambda: f(q[:0], kc, vc, t[:0], -1, True, s), "ok"),
        ("one sequence, one query, one cache head: strides of size-1 dimensions ignored",
         lambda: same_with_odd_unit_strides(f, *paged_inputs(dev, b=1, hkv=1, sq=1)[:4], -1, True, s), "ok"),
    ]


def varlen_inputs(dev, q_lens, k_lens, hq=4, hkv=2, d=64, dtype=torch.bfloat16):
    """Packed q [total_q, hq, d], k, v [total_k, hkv, d] and their int32 cu_seqlens on `dev`."""
    g = torch.Generator(device=dev).manual_seed(3)
    q = torch.randn(sum(q_lens), hq, d, device=dev, dtype=dtype, generator=g)
    k = torch.randn(sum(k_lens), hkv, d, device=dev, dtype=dtype, generator=g)
    v = torch.randn(sum(k_lens), hkv, d, device=dev, dtype=dtype, generator=g)
    cu = lambda lens: torch.tensor([0] + list(itertools.accumulate(lens)), dtype=torch.int32, device=dev)
    return q, k, v, cu(q_lens), cu(k_lens)


def varlen_cases(dev, name="flash_attention_varlen"):
    """attnprof::flash_attention_varlen (or the Hopper kernel's, which has no
    sliding window): each sequence as flash_attention gives it alone, bad inputs refused."""
    s = 0.125
    f = op(name)
    windows = name == "flash_attention_varlen"

    def same(q_lens, k_lens, causal=True, window=0):
        q, k, v, cq, ck = varlen_inputs(dev, q_lens, k_lens)
        out, lse = f(q, k, v, cq, ck, max(q_lens), max(k_lens), causal, s, window)
        for b in range(len(q_lens)):
            rq, rk = slice(int(cq[b]), int(cq[b + 1])), slice(int(ck[b]), int(ck[b + 1]))
            seq = lambda t, r: t[r].transpose(0, 1).unsqueeze(0).contiguous()
            ref, ref_lse = op("flash_attention")(seq(q, rq), seq(k, rk), seq(v, rk), causal, s, window)
            got, got_lse = out[rq].transpose(0, 1).unsqueeze(0), lse[:, rq].unsqueeze(0)
            # Another kernel may run the sequence alone (split-KV for one query): bf16 rounding apart.
            if not torch.allclose(got.float(), ref.float(), rtol=2e-2, atol=2e-2):
                raise AssertionError(f"sequence {b} differs from attnprof::flash_attention on it alone")
            if not torch.allclose(got_lse, ref_lse, rtol=1e-3, atol=1e-3):
                raise AssertionError(f"sequence {b}'s lse differs from attnprof::flash_attention's")
        return out, lse

    def inference():
        with torch.inference_mode():  # offsets without a version counter: checked on every call
            out = same([5, 40], [5, 40])
            q, k, v, cq, ck = varlen_inputs(dev, [5, 40], [5, 40])
            f(q, k, v, cq, ck, 40, 40, True, s)  # checked, and would be remembered if it had a version
            ck[1] = 99  # in place: no version to bump
            try:
                f(q, k, v, cq, ck, 40, 40, True, s)
            except RuntimeError:
                return out
            raise AssertionError("inference-mode offsets edited past the keys were not refused")

    q, k, v, cq, ck = varlen_inputs(dev, [4, 6], [5, 7])
    return [
        ("valid prefill, lengths 1, 77, 300, 5", lambda: same([1, 77, 300, 5], [1, 77, 300, 5]), "ok"),
        ("valid decode, one query per sequence", lambda: same([1, 1, 1], [90, 7, 1000]), "ok"),
        ("valid, non-causal", lambda: same([30, 3], [30, 3], causal=False), "ok"),
        ("valid, window 16", lambda: same([200, 9], [200, 9], window=16), "ok" if windows else "error"),
        ("valid, 40 sequences of 1 to 600 rows", lambda: same([(1 + 97 * i) % 600 + 1 for i in range(40)],
                                                              [(1 + 97 * i) % 600 + 1 for i in range(40)]), "ok"),
        ("valid under torch.inference_mode, and bad offsets refused there", inference, "ok"),
        ("empty batch", lambda: f(q[:0], k[:0], v[:0], cq[:1], ck[:1], 0, 0, True, s), "ok"),
        ("cu_seqlens int64", lambda: f(q, k, v, cq.long(), ck, 6, 7, True, s), "error"),
        ("cu_seqlens on the CPU", lambda: f(q, k, v, cq.cpu(), ck, 6, 7, True, s), "error"),
        ("cu_seqlens of different batches", lambda: f(q, k, v, cq[:2], ck, 6, 7, True, s), "error"),
        ("cu_seqlens_q not from 0", lambda: f(q, k, v, cq + 1, ck, 6, 7, True, s), "error"),
        ("cu_seqlens_k decreasing", lambda: f(q, k, v, cq, ck.new_tensor([0, 7, 5]), 6, 7, True, s), "error"),
        ("cu_seqlens_k short of the keys", lambda: f(q, k, v, cq, ck.new_tensor([0, 5, 11]), 6, 7, True, s), "error"),
        ("q one element into its storage", lambda: f(one_element_in(q), k, v, cq, ck, 6, 7, True, s), "error"),
        ("no query heads", lambda: f(q[:, :0].contiguous(), k, v, cq, ck, 6, 7, True, s), "ok"),
        ("max_seqlen above the longest", lambda: f(q, k, v, cq, ck, 60, 70, True, s), "ok"),
        ("a sequence past max_seqlen_q", lambda: f(q, k, v, cq, ck, 5, 7, True, s), "error"),
        ("max_seqlen_k -1", lambda: f(q, k, v, cq, ck, 6, -1, True, s), "error"),
        ("max_seqlen_q past int32", lambda: f(q, k, v, cq, ck, 2 ** 40, 7, True, s), "error"),
        ("q rank 4", lambda: f(q.unsqueeze(0), k, v, cq, ck, 6, 7, True, s), "error"),
        ("k and v shapes differ", lambda: f(q, k, v[:-1].contiguous(), cq, ck, 6, 7, True, s), "error"),
        ("k float16", lambda: f(q, k.half(), v.half(), cq, ck, 6, 7, True, s), "error"),
        ("q non-contiguous", lambda: f(q.transpose(0, 1).contiguous().transpose(0, 1), k, v, cq, ck, 6, 7, True, s),
         "error"),
        ("heads_q not a multiple of heads_kv", lambda: f(q[:, :3].contiguous(), k, v, cq, ck, 6, 7, True, s), "error"),
        ("scale NaN", lambda: f(q, k, v, cq, ck, 6, 7, True, float("nan")), "error"),
        ("window with causal False", lambda: f(q, k, v, cq, ck, 6, 7, False, s, 16), "error"),
    ]


def flash_autograd_cases(dev):
    def grads(window):
        q, k, v = (t.requires_grad_(True) for t in flash_inputs(dev))
        out, _ = op("flash_attention")(q, k, v, True, 0.125, window)
        out.float().sum().backward()
        return q.grad, k.grad, v.grad
    return [("gradients through the autograd kernel", lambda: grads(0), "ok"),
            ("gradients through the autograd kernel, window 16", lambda: grads(16), "ok")]


def flash_backward_cases(dev, name="flash_attention_backward", *extra):
    q, k, v = flash_inputs(dev)
    out, lse = op("flash_attention")(q, k, v, True, 0.125)
    g = torch.randn_like(q)
    f = (lambda *a: op(name)(*a, *extra)) if extra else op(name)
    s = 0.125
    bsd = lambda t: t.transpose(1, 2).contiguous().transpose(1, 2)

    def one_row():
        q1, k1, v1 = q[:1, :, -1:].contiguous(), k[:1].contiguous(), v[:1].contiguous()
        o1, l1 = op("flash_attention")(q1, k1, v1, True, s)
        return same_with_odd_unit_strides(f, g[:1, :, -1:].contiguous(), q1, k1, v1, o1, l1, True, s)
    return [
        ("valid call", lambda: f(g, q, k, v, out, lse, True, s), "ok"),
        ("grad_out on the CPU", lambda: f(g.cpu(), q, k, v, out, lse, True, s), "error"),
        ("lse on the CPU", lambda: f(g, q, k, v, out, lse.cpu(), True, s), "error"),
        ("grad_out float16, q bfloat16", lambda: f(g.half(), q, k, v, out, lse, True, s), "error"),
        ("q float32", lambda: f(g.float(), q.float(), k.float(), v.float(), out.float(), lse, True, s), "error"),
        ("lse float16", lambda: f(g, q, k, v, out, lse.half(), True, s), "error"),
        ("lse of the wrong shape", lambda: f(g, q, k, v, out, lse[:, :, :-1].contiguous(), True, s), "error"),
        ("out of the wrong shape", lambda: f(g, q, k, v, out[:, :, :-1].contiguous(), lse, True, s), "error"),
        ("k and v shapes differ", lambda: f(g, q, k, v[:, :, :40].contiguous(), out, lse, True, s), "error"),
        ("q rank 3", lambda: f(g[0], q[0], k, v, out[0], lse[0], True, s), "error"),
        ("head_dim 32", lambda: f(*[torch.randn(2, 4, 64, 32, device=dev, dtype=torch.bfloat16) for _ in range(2)],
                                  *flash_inputs(dev, d=32)[1:], torch.randn(2, 4, 64, 32, device=dev,
                                  dtype=torch.bfloat16), lse, True, s), "error"),
        ("grad_out non-contiguous", lambda: f(bsd(g), q, k, v, out, lse, True, s), "error"),
        ("scale NaN", lambda: f(g, q, k, v, out, lse, True, float("nan")), "error"),
        ("scale 0", lambda: f(g, q, k, v, out, lse, True, 0.0), "error"),
        # 16-byte copies (cp.async, TMA) from aligned bases only: a view one element in.
        ("q one element into its storage", lambda: f(g, one_element_in(q), k, v, out, lse, True, s), "error"),
        ("grad_out one element into its storage", lambda: f(one_element_in(g), q, k, v, out, lse, True, s), "error"),
        ("one query row, one batch: strides of size-1 dimensions ignored", lambda: one_row(), "ok"),
    ] + (window_cases(lambda *w: f(g, q, k, v, out, lse, *w)) if name == "flash_attention_backward" else [])


def softmax_backward_cases(dev):
    g0 = torch.Generator(device="cpu").manual_seed(0)
    y = op("scaled_masked_softmax")(torch.randn(2, 3, 16, 32, generator=g0).to(dev, torch.float16), 0.5, True)
    g = torch.randn_like(y)
    f = op("scaled_masked_softmax_backward")
    return [
        ("valid call", lambda: f(g, y, 0.5), "ok"),
        ("grad_out on the CPU", lambda: f(g.cpu(), y, 0.5), "error"),
        ("out on the CPU", lambda: f(g, y.cpu(), 0.5), "error"),
        ("grad_out float32, out float16", lambda: f(g.float(), y, 0.5), "error"),
        ("shapes differ", lambda: f(g[..., :-1].contiguous(), y, 0.5), "error"),
        ("a 0-dim out", lambda: f(g[0, 0, 0, 0], y[0, 0, 0, 0], 0.5), "error"),
        ("out non-contiguous", lambda: f(g.transpose(-1, -2), y.transpose(-1, -2), 0.5), "error"),
        ("scale NaN", lambda: f(g, y, float("nan")), "error"),
    ]


def softmax_cases(dev):
    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(2, 3, 16, 32, generator=g).to(dev, torch.float16)
    f = op("scaled_masked_softmax")
    return [
        ("valid call", lambda: f(x, 0.5, True), "ok"),
        ("scores on the CPU", lambda: f(x.cpu(), 0.5, True), "error"),
        ("scores float64", lambda: f(x.double(), 0.5, True), "error"),
        ("scores int64", lambda: f(x.long(), 0.5, True), "error"),
        ("scores rank 1", lambda: f(x.flatten(), 0.5, True), "error"),
        ("scores non-contiguous (transposed)", lambda: f(x.transpose(-1, -2), 0.5, True), "error"),
        ("scale NaN", lambda: f(x, float("nan"), True), "error"),
        ("scale inf", lambda: f(x, float("inf"), False), "error"),
        ("empty scores (returns empty)", lambda: f(x[:0], 0.5, True), "ok"),
    ]


def fp8_cases(dev, name="flash_attention_sm90_fp8", config=None):
    """attnprof::flash_attention_sm90_fp8: e4m3 q, k, v (head_dim 128; 64 and 256 run too) with
    float32 descales [batch, heads]; a valid call, then every input wrong once
    (with `config`, the by-name operator `name` running that configuration)."""
    named = op(name)
    f = named if config is None else (lambda *a: named(*a, config))
    q, k, v = flash_inputs(dev, torch.float32, d=128)
    e4m3 = torch.float8_e4m3fn
    q8, k8, v8 = q.to(e4m3), k.to(e4m3), v.to(e4m3)
    qd = torch.full((2, 4), 0.01, device=dev)
    kd = torch.full((2, 2), 0.01, device=dev)

    def call(q_=q8, k_=k8, v_=v8, qd_=qd, kd_=kd, vd_=kd, causal=True, scale=0.088):
        return f(q_, k_, v_, qd_, kd_, vd_, causal, scale)

    e5m2 = torch.float8_e5m2
    return [
        ("valid call", lambda: call(), "ok"),
        ("valid call, no mask", lambda: call(causal=False), "ok"),
        ("e5m2 inputs", lambda: call(q8.float().to(e5m2), k8.float().to(e5m2), v8.float().to(e5m2)), "error"),
        ("bf16 inputs", lambda: call(q.bfloat16(), k.bfloat16(), v.bfloat16()), "error"),
        ("one input bf16", lambda: call(q_=q.bfloat16()), "error"),
        ("head_dim 96", lambda: call(q8[..., :96].contiguous(), k8[..., :96].contiguous(), v8[..., :96].contiguous()),
         "error"),
        # The operator's head dims: 64, 128 and 256; a configuration by name runs its own only.
        ("head_dim 64", lambda: call(q8[..., :64].contiguous(), k8[..., :64].contiguous(), v8[..., :64].contiguous()),
         "ok" if config is None else "error"),
        ("q_descale [batch, heads_kv]", lambda: call(qd_=kd), "error"),
        ("k_descale 1-D", lambda: call(kd_=kd.flatten()), "error"),
        ("v_descale float64", lambda: call(vd_=kd.double()), "error"),
        ("v_descale bf16", lambda: call(vd_=kd.bfloat16()), "error"),
        ("q_descale on the CPU", lambda: call(qd_=qd.cpu()), "error"),
        ("k_descale non-contiguous", lambda: call(kd_=torch.full((2, 4), 0.01, device=dev)[:, ::2]), "error"),
        ("q_descale negative", lambda: call(qd_=-qd), "error"),
        ("k_descale zero", lambda: call(kd_=torch.zeros_like(kd)), "error"),
        ("v_descale NaN", lambda: call(vd_=torch.full_like(kd, float("nan"))), "error"),
        ("v_descale inf", lambda: call(vd_=torch.full_like(kd, float("inf"))), "error"),
        ("q non-contiguous", lambda: call(q_=q8.transpose(1, 2).contiguous().transpose(1, 2)), "error"),
        ("k on the CPU", lambda: call(k_=k8.cpu()), "error"),
        ("k and v of different lengths", lambda: call(v_=v8[:, :, :40].contiguous()), "error"),
        ("q rank 3", lambda: call(q_=q8[0]), "error"),
        ("scale NaN", lambda: call(scale=float("nan")), "error"),
        ("scale negative", lambda: call(scale=-1.0), "error"),
        ("no query rows (returns empty)", lambda: call(q_=q8[:, :, :0]), "ok"),
        ("no keys (zeros)", lambda: call(k_=k8[:, :, :0], v_=v8[:, :, :0]), "ok"),
        ("33 keys (Vᵀ padded to 64)", lambda: call(k_=k8[:, :, :33].contiguous(), v_=v8[:, :, :33].contiguous()), "ok"),
    ]


def hopper_only(cases, dev=None, name=None):
    """On a GPU other than compute capability 9.0 a valid call raises too
    (given `dev` and the operator's `name`, the cases stay as they are on a 9.0
    one whose build has the operator's CUDA kernel)."""
    if (dev is not None and name is not None and str(dev).startswith("cuda")
            and torch.cuda.get_device_capability(dev) == (9, 0)
            and torch._C._dispatch_has_kernel_for_dispatch_key(f"attnprof::{name}", "CUDA")):
        return cases
    return [(w, t, "either" if e == "ok" else e) for w, t, e in cases]


def config_cases(dev, name, backward):
    """The by-name operators: the other flash cases with a head_dim-64
    configuration, then names that are not built or not for q's head_dim."""
    cfg = "sm90_bwd_hdim64" if backward else "sm90_fwd_hdim64"
    other = "sm90_bwd_hdim128" if backward else "sm90_fwd_hdim128"
    base = flash_backward_cases(dev, name, cfg) if backward else flash_cases(dev, name, "either", cfg)
    q, k, v = flash_inputs(dev)
    if backward:
        out, lse = op("flash_attention")(q, k, v, True, 0.125)
        g = torch.randn_like(q)
        call = lambda c: op(name)(g, q, k, v, out, lse, True, 0.125, c)
    else:
        call = lambda c: op(name)(q, k, v, True, 0.125, c)
    return hopper_only(base) + [
        ("a configuration that is not built", lambda: call("no_such_config"), "error"),
        ("an empty configuration name", lambda: call(""), "error"),
        ("a configuration for another head_dim", lambda: call(other), "error"),
    ]


def fp8_config_at(head_dim):
    """The first fp8 configuration of this build at head_dim (names say it: sm90_fwd_hdim<D>_...; every
    build with the sm_90a kernels has the operator's), else a name no build has (the calls then raise)."""
    built = [c for c in op("flash_attention_sm90_fp8_configs")() if c.startswith(f"sm90_fwd_hdim{head_dim}_")]
    return built[0] if built else f"sm90_fwd_hdim{head_dim}_fp8_none_built"


def fp8_config_cases(dev):
    """The fp8 by-name operator: the fp8 cases with a head_dim-128 configuration of this build, then
    names that are not built or run 16-bit inputs."""
    name = "flash_attention_sm90_fp8_config"
    q, k, v = flash_inputs(dev, torch.float32, d=128)
    e4m3 = torch.float8_e4m3fn
    d = torch.full((2, 2), 0.01, device=dev)
    call = lambda c: op(name)(q.to(e4m3), k.to(e4m3), v.to(e4m3), torch.full((2, 4), 0.01, device=dev), d, d,
                              True, 0.088, c)
    return hopper_only(fp8_cases(dev, name, fp8_config_at(128)), dev, name) + [
        ("a configuration that is not built", lambda: call("no_such_config"), "error"),
        ("an empty configuration name", lambda: call(""), "error"),
        ("a 16-bit configuration", lambda: call("sm90_fwd_hdim128"), "error"),
    ]


def names_of(f, *args):
    """f(*args), which must be a list of non-empty configuration names."""
    got = f(*args)
    if not isinstance(got, list) or not all(isinstance(n, str) and n for n in got):
        raise AssertionError(f"not a list of names: {got!r}")
    return got


def fp8_configs_list_cases(dev):
    f = op("flash_attention_sm90_fp8_configs")
    return [("fp8 names", lambda: names_of(f), "ok")]


def configs_list_cases(dev):
    f = op("flash_attention_sm90_configs")
    return [("forward names", lambda: names_of(f, False), "ok"), ("backward names", lambda: names_of(f, True), "ok")]


KNOWN = {
    "flash_attention": lambda dev: flash_cases(dev) + flash_autograd_cases(dev),
    # On a GPU other than compute capability 9.0 its valid call raises too.
    "flash_attention_sm90": lambda dev: hopper_only(flash_cases(dev, "flash_attention_sm90", "either")),
    "flash_attention_sm90_config": lambda dev: config_cases(dev, "flash_attention_sm90_config", False),
    "flash_attention_backward_sm90_config": lambda dev: config_cases(dev, "flash_attention_backward_sm90_config", True),
    "flash_attention_sm90_configs": configs_list_cases,
    "scaled_masked_softmax": softmax_cases,
    "flash_attention_backward": flash_backward_cases,
    "flash_attention_paged": paged_cases,
    "flash_attention_varlen": varlen_cases,
    "flash_attention_sm90_varlen": lambda dev: hopper_only(varlen_cases(dev, "flash_attention_sm90_varlen"), dev,
                                                           "flash_attention_sm90_varlen"),
    "flash_attention_backward_sm90": lambda dev: hopper_only(flash_backward_cases(dev, "flash_attention_backward_sm90")),
    "flash_attention_sm90_fp8": lambda dev: hopper_only(fp8_cases(dev), dev, "flash_attention_sm90_fp8"),
    "flash_attention_sm90_fp8_config": fp8_config_cases,
    "flash_attention_sm90_fp8_configs": fp8_configs_list_cases,
    "scaled_masked_softmax_backward": softmax_backward_cases,
}
SCHEMAS = {  # what the Python user calls; the test fails if one changes unnoticed
    "flash_attention": "attnprof::flash_attention(Tensor q, Tensor k, Tensor v, bool causal, float scale, "
                       "int window=0) -> (Tensor out, Tensor lse)",
    "flash_attention_paged": "attnprof::flash_attention_paged(Tensor q, Tensor k_cache, Tensor v_cache, "
                             "Tensor block_table, int seqlen_k, bool causal, float scale, int window=0) -> "
                             "(Tensor out, Tensor lse)",
    "flash_attention_varlen": "attnprof::flash_attention_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, "
                              "Tensor cu_seqlens_k, int max_seqlen_q, int max_seqlen_k, bool causal, float scale, "
                              "int window=0) -> (Tensor out, Tensor lse)",
    "flash_attention_sm90_varlen": "attnprof::flash_attention_sm90_varlen(Tensor q, Tensor k, Tensor v, "
                                   "Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, int max_seqlen_k, "
                                   "bool causal, float scale, int window=0) -> (Tensor out, Tensor lse)",
    "flash_attention_sm90_fp8": "attnprof::flash_attention_sm90_fp8(Tensor q, Tensor k, Tensor v, Tensor q_descale, "
                                "Tensor k_descale, Tensor v_descale, bool causal, float scale) -> "
                                "(Tensor out, Tensor lse)",
    "flash_attention_sm90_fp8_config": "attnprof::flash_attention_sm90_fp8_config(Tensor q, Tensor k, Tensor v, "
                                       "Tensor q_descale, Tensor k_descale, Tensor v_descale, bool causal, "
                                       "float scale, str config) -> (Tensor out, Tensor lse)",
    "flash_attention_sm90_fp8_configs": "attnprof::flash_attention_sm90_fp8_configs() -> str[]",
    "scaled_masked_softmax": "attnprof::scaled_masked_softmax(Tensor scores, float scale, bool causal) -> Tensor",
    "flash_attention_sm90_config": "attnprof::flash_attention_sm90_config(Tensor q, Tensor k, Tensor v, bool causal, "
                                   "float scale, str config) -> (Tensor out, Tensor lse)",
}


# --- any operator, from its schema -----------------------------------------------

def placeholder(arg_type, dev):
    t = str(arg_type)
    if t.startswith("Tensor"):
        return torch.zeros(1, 1, 8, 64, device=dev, dtype=torch.bfloat16)
    if t.endswith("?"):
        return None
    if t.endswith("[]"):
        return [1]
    return {"bool": False, "float": 1.0, "int": 1, "str": "x", "SymInt": 1}.get(t, None)


def generic_cases(name, dev):
    """Bad inputs any attnprof operator must refuse: built from the schema alone."""
    schema = op(name).default._schema
    args = schema.arguments
    base = lambda: [placeholder(a.type, dev) for a in args]
    cases = []
    for i, a in enumerate(args):
        t = str(a.type)
        if t.startswith("Tensor"):
            if not t.endswith("?"):
                cases.append((f"{a.name} = None", lambda i=i: op(name)(*[None if j == i else x for j, x in enumerate(base())]),
                              "error"))
            cases.append((f"{a.name} a CPU float64 scalar", lambda i=i: op(name)(
                *[torch.tensor(1.0, dtype=torch.float64) if j == i else x for j, x in enumerate(base())]), "error"))
        elif t in ("bool", "float", "int"):
            cases.append((f"{a.name} a string", lambda i=i: op(name)(*["x" if j == i else x for j, x in enumerate(base())]),
                          "error"))
    if dev == "cpu" and any(str(a.type).startswith("Tensor") for a in args):
        cases.append(("CPU tensors (no CPU kernel)", lambda: op(name)(*base()), "error"))
    return cases


# Known operators whose table also runs on the CPU: they take no tensor.
NO_TENSORS = {"flash_attention_sm90_configs", "flash_attention_sm90_fp8_configs"}


def cases_for(name, dev):
    cases = []
    if name in KNOWN and (dev == "cuda" or name in NO_TENSORS):
        cases += KNOWN[name](dev)
    cases += generic_cases(name, dev)
    return cases


# --- running -----------------------------------------------------------------------

def check(name, thunk, expect):
    """'' when the case behaved, else what went wrong."""
    try:
        result = thunk()
    except RuntimeError as e:  # NotImplementedError is one too
        if expect == "either":
            return ""
        if expect == "ok":
            return f"raised {e.__class__.__name__}: {str(e).splitlines()[0][:200]}"
        msg = str(e)
        if f"attnprof::{name}" not in msg and f"attnprof.{name}" not in msg:
            return f"RuntimeError does not name attnprof::{name}: {msg.splitlines()[0][:200]}"
        return ""
    except Exception as e:  # a TypeError or worse: not the documented RuntimeError
        return f"raised {e.__class__.__name__}, not RuntimeError: {str(e).splitlines()[0][:200]}"
    if expect == "error":
        return "returned instead of raising"
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    outs = result if isinstance(result, (tuple, list)) else [result]
    for o in outs:
        if o is None:
            return "an output is None"
        if isinstance(o, torch.Tensor) and o.is_floating_point() and o.numel() and \
                not torch.isfinite(o[o != float("-inf")]).all():
            return "output not finite"
    return ""


def child(lib, dev, start):
    torch.ops.load_library(lib)
    plan = [(n, c) for n in registered_ops() for c in cases_for(n, dev)]
    for i in range(start, len(plan)):
        name, (what, thunk, expect) = plan[i]
        print(f"START {i} attnprof::{name}: {what}", flush=True)
        problem = check(name, thunk, expect)
        print(f"{'FAIL' if problem else 'PASS'} {i} attnprof::{name}: {what}" + (f": {problem}" if problem else ""),
              flush=True)
    print("DONE", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", default=os.path.join(os.path.dirname(__file__), "..", "build", "libattnprof_core.so"))
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.lib, args.device, args.child)
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: no CUDA device: the GPU cases run on the GPU machine (scripts/gpu_check.sh)")
        return 77
    if not os.path.exists(args.lib):
        print(f"FAIL: {args.lib} does not exist (build it first: scripts/setup.sh)")
        return 1

    torch.ops.load_library(args.lib)
    names = registered_ops()
    failures = []
    print(f"{args.lib}: torch {torch.__version__}, operators: {', '.join('attnprof::' + n for n in names)}")
    for n, schema in SCHEMAS.items():
        if n not in names:
            failures.append(f"attnprof::{n} is not registered")
        elif str(op(n).default._schema) != schema:
            failures.append(f"attnprof::{n} schema changed: {op(n).default._schema}")
    for n in names:
        if n not in KNOWN:
            print(f"note: attnprof::{n} has no table of bad inputs here: only the generic cases from its schema run")
    for f in failures:
        print("FAIL " + f)

    passed, start, crashes = 0, 0, 0
    while True:
        p = subprocess.run([sys.executable, __file__, "--lib", args.lib, "--device", args.device, "--child", str(start)],
                           capture_output=True, text=True)
        started, started_what = None, ""
        for line in p.stdout.splitlines():
            if line.startswith("START "):
                started, started_what = int(line.split()[1]), line.split(" ", 2)[2]
            elif line.startswith("PASS "):
                passed += 1
                print(line)
            elif line.startswith("FAIL "):
                failures.append(line[5:])
                print(line)
        if "DONE" in p.stdout.splitlines():
            break
        if started is None:
            failures.append(f"the checking process died before its first case (exit {p.returncode}): "
                            f"{p.stderr.strip()[-500:]}")
            break
        crashes += 1
        what = f"{started_what}: killed the Python process (exit {p.returncode}"
        what += f", signal {-p.returncode})" if p.returncode < 0 else ")"
        failures.append(what + ": " + (p.stderr.strip().splitlines() or [""])[-1][:200])
        print("CRASH " + what)
        start = started + 1
    print(f"\n{passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
