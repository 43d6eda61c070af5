// Masking and online softmax on wgmma accumulators (device code).
//
// A consumer thread holds, of its warpgroup's 64 × N score tile, two rows
// (g = lane / 4 and g + 8 of its warp's 16) and, per row, the columns
// 8t + 2c + j for t < N/8, j in {0, 1}, c = lane % 4: element s[4t + 2i + j]
// (sm90_wgmma.cuh). A row's values are spread over the 4 lanes of a quad, so
// row reductions finish with two xor-shuffles.
#pragma once

#include <cmath>
#include <type_traits>

#include "kernels/common/sm80_primitives.cuh"  // exp2_approx

namespace attnprof::flash_sm90 {

// Sets s to -inf where key column (8t + 2c + j) > limit[i] for row i; the
// limits are relative to the key tile's first column.
template <int kN>
__device__ __forceinline__ void mask_columns(float (&s)[kN / 2], int lane, const int (&limit)[2]) {
  const int c2 = (lane % 4) * 2;
#pragma unroll
  for (int t = 0; t < kN / 8; ++t)
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j)
        if (8 * t + c2 + j > limit[i]) s[4 * t + 2 * i + j] = -INFINITY;
}

// 2^x on the FMA and integer pipes instead of the MUFU unit (16 results per
// clock per SM against 4 warp-instructions of FMA per clock): round x to an
// integer n with the 1.5·2^23 trick, a degree-4 polynomial for 2^(x-n) on
// [-0.5, 0.5] (relative error 3.1e-6, below either 16-bit type's rounding of P),
// then n added to the exponent bits. The constant term is exactly 1, so after
// the clamp to -127 an input of -inf (a masked score) gives exactly +0, as
// ex2.approx does. About 10 instructions.
__device__ __forceinline__ float exp2_poly(float x) {
  x = fmaxf(x, -127.f);
  const float shifted = x + 12582912.f;  // 1.5 · 2^23: round(x) lands in the low mantissa bits
  const float n = shifted - 12582912.f;
  const float f = x - n;
  float p = fmaf(9.60039552e-3f, f, 5.59168938e-2f);
  p = fmaf(p, f, 2.40237185e-1f);
  p = fmaf(p, f, 6.93121995e-1f);
  p = fmaf(p, f, 1.f);
  return __int_as_float(__float_as_int(p) + (__float_as_int(shifted) << 23));
}

// P's e4m3 bytes without the MUFU or a conversion (8-bit P): for x = s·scale_log2 - m_scaled
// (at most 8: P = 2^x is below 2^8), e4m3's exponent and 3 mantissa bits are
// round(8x + 56) read as one fixed-point number, so the byte is linear in x: the
// mantissa 1 + f stands for 2^f (up to 6% above it, 4.1% on average for f
// uniform on [0, 1), which kPBitsBias, 8·log2(1.041), takes back). The sums by
// GEMM add the same bytes, so O is normalised by the P it multiplies. Per score
// two FFMA: u = sat((8x + 56.5 - bias) / 128) (FFMA.SAT: 0 for x below -7, a
// masked -inf or a NaN score), then 128u + 2^15, whose float bits hold floor(128u)
// in byte 1 (the value's ulp there is 2^-8); pack_p_e4m3<kSteps, true> gathers those bytes.
// O's error: 1.07-1.25x the plain FP8 implementation's on the H100 (12 cases
// per head dim; e4m3 P by rounding: 0.95-1.01x), 1.11-1.19x in a CPU emulation
// on normal and outlier inputs (docs/notes/flash_sm90_fp8.md).
constexpr float kPBitsBias = 0.46f;
template <int kN>
__device__ __forceinline__ void p_bits_e4m3(float (&s)[kN / 2], const float (&m_scaled)[2], float scale_log2) {
  const float c1 = scale_log2 * (8.f / 128.f);
  float c0[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) c0[i] = (56.5f - kPBitsBias - 8.f * m_scaled[i]) * (1.f / 128.f);
#pragma unroll
  for (int e = 0; e < kN / 2; ++e) s[e] = fmaf(__saturatef(fmaf(s[e], c1, c0[(e >> 1) & 1])), 128.f, 32768.f);
}

// Row i of a thread's two, reduced over its quad: the thread's kN/4 scores and
// the running value as T's bits (int or unsigned), in a tree of 3-input steps
// (op3: the DPX VIMNMX3 on sm_90, one instruction where FMNMX takes two for
// three values), then across the quad's 4 lanes by op2.
template <typename T, int kN, typename Op3, typename Op2>
__device__ __forceinline__ T quad_row_reduce_bits(const float (&s)[kN / 2], float running, int i, Op3 op3, Op2 op2) {
  auto bits = [](float x) -> T {
    if constexpr (std::is_signed_v<T>) return __float_as_int(x);
    else return __float_as_uint(x);
  };
  constexpr int kV = kN / 4 + 1;
  T v[kV];
#pragma unroll
  for (int t = 0; t < kN / 8; ++t)
#pragma unroll
    for (int j = 0; j < 2; ++j) v[2 * t + j] = bits(s[4 * t + 2 * i + j]);
  v[kN / 4] = bits(running);
#pragma unroll
  for (int w = 1; w < kV; w *= 3)
#pragma unroll
    for (int t = 0; t < kV; t += 3 * w) {
      if (t + 2 * w < kV) v[t] = op3(v[t], v[t + w], v[t + 2 * w]);
      else if (t + w < kV) v[t] = op2(v[t], v[t + w]);
    }
  T r = op2(v[0], __shfl_xor_sync(0xffffffffu, v[0], 1));
  return op2(r, __shfl_xor_sync(0xffffffffu, r, 2));
}

// Running softmax state of a thread's two rows.
struct RowState {
  float max[2];  // running max of the raw scores (-inf until a key is visible)
  float sum[2];  // this thread's share of sum(exp2((s - max) * scale_log2))
};

// Folds a new score tile into the running state and turns s into
// P = exp2((s - max) · scale_log2) in place, against the row's running max.
// That max need not be the true one, only one that keeps every exponent
// <= kSlack (in powers of two): the sum and O are normalised by the same max,
// so the result is exact. A row's max moves only when a score exceeds it by
// more than kSlack (kSlack < 0: whenever it grows), and then, so that the
// branch stays warp-uniform, every row of the warp moves (rows that did not
// grow keep their max, alpha 1). Returns whether the warp moved; alpha then
// holds exp2((old - new max) · scale_log2) per row, by which O accumulated so
// far must be rescaled. Rows that have seen no key keep max -inf and subtract
// 0 instead, so exp2(-inf - -inf) never makes a NaN. With kPolyEvery > 0 the
// exponentials of every kPolyEvery-th 8-column tile run on exp2_poly.
// kExpOffset: P = exp2((s - max) · scale_log2 + kExpOffset), the sum alike
// (P scaled by 2^kExpOffset before its rounding to 8 bits; alpha is not).
// kSums false: the caller sums P elsewhere (kSumByGemm); st.sum is left alone.
// kIntMax: the row max on the floats' bits as integers (below).
// kPBits (8-bit P, kSums false): s becomes P's e4m3 bytes instead of P (p_bits_e4m3).
template <int kN, int kPolyEvery, int kSlack, int kExpOffset = 0, bool kSums = true, bool kIntMax = false,
          bool kPBits = false>
__device__ __forceinline__ bool online_softmax(float (&s)[kN / 2], RowState& st, float scale_log2,
                                               float (&alpha)[2]) {
  float mx[2];
  if constexpr (kIntMax) {
    // A float's bits as a signed integer order the floats >= +0 as the floats
    // (and below every negative one), so when a row has a score >= +0 or a
    // running max >= +0 their signed integer max is the row max: 3-input
    // VIMNMX3, about half the instructions of the FMNMX tree. A row of only
    // negative values (as its running max is until a score >= 0 is seen) takes
    // the least of their bits as unsigned integers, which is their float max
    // (-inf last, and a negative NaN after it, as FMNMX drops NaN). A positive
    // NaN score wins the integer max where FMNMX drops it; its P is NaN either
    // way, and so is the row's output.
    int im[2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
      im[i] = quad_row_reduce_bits<int, kN>(
          s, st.max[i], i, [](int a, int b, int c) { return __vimax3_s32(a, b, c); },
          [](int a, int b) { return max(a, b); });
    if (__any_sync(0xffffffffu, (im[0] | im[1]) < 0)) {  // a row of negative values only (warp-uniform)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const unsigned um = quad_row_reduce_bits<unsigned, kN>(
            s, st.max[i], i, [](unsigned a, unsigned b, unsigned c) { return __vimin3_u32(a, b, c); },
            [](unsigned a, unsigned b) { return min(a, b); });
        if (im[i] < 0) im[i] = static_cast<int>(um);
      }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) mx[i] = __int_as_float(im[i]);
  } else {
    // Row max as a tree over the thread's kN/4 values per row (depth log2,
    // not a chain of kN/8 dependent FMNMX): the exponentials, and P for the
    // next P·V, wait on it. Same instruction count; on the H200 within the
    // ±2% run-to-run noise of the chain (+0.5% on average over 8 points).
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float v[kN / 8];
#pragma unroll
      for (int t = 0; t < kN / 8; ++t) v[t] = fmaxf(s[4 * t + 2 * i], s[4 * t + 2 * i + 1]);
#pragma unroll
      for (int w = 1; w < kN / 8; w *= 2)
#pragma unroll
        for (int t = 0; t + w < kN / 8; t += 2 * w) v[t] = fmaxf(v[t], v[t + w]);
      mx[i] = fmaxf(st.max[i], v[0]);
    }
  }
  if constexpr (kPBits) {
    // P's bytes saturate a NaN score to 0 (p_bits_e4m3), where exp2 made its P
    // and so the row's output NaN. A NaN from wgmma is the positive canonical
    // one, which wins the integer max: its row's sum becomes NaN instead, and
    // with it the output and lse, as before.
    static_assert(kIntMax, "kPBits finds NaN scores through the integer max");
#pragma unroll
    for (int i = 0; i < 2; ++i)
      if (mx[i] != mx[i]) st.sum[i] = mx[i];
  }
  bool grow[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if constexpr (!kIntMax) {  // (the quad's share; the integer max has it)
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
    }
    // -inf (nothing seen yet) + kSlack stays -inf: the first visible key always moves it.
    grow[i] = kSlack < 0 ? mx[i] > st.max[i]
                         : mx[i] * scale_log2 > st.max[i] * scale_log2 + static_cast<float>(kSlack);
  }
  const bool move = __any_sync(0xffffffffu, grow[0] || grow[1]);
  float m_scaled[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    alpha[i] = 1.f;
    if (move) {
      const float new_max = grow[i] ? mx[i] : st.max[i];
      const float new_scaled = new_max == -INFINITY ? 0.f : new_max * scale_log2;
      alpha[i] = kernels::exp2_approx(st.max[i] * scale_log2 - new_scaled);
      if constexpr (kSums) st.sum[i] *= alpha[i];
      st.max[i] = new_max;
    }
    m_scaled[i] = (st.max[i] == -INFINITY ? 0.f : st.max[i] * scale_log2) - static_cast<float>(kExpOffset);
  }
  static_assert(!(kPBits && kSums), "P's bytes are summed by a GEMM");
  static_assert(!kPBits || kExpOffset == 8, "P's bytes: x <= 8, so at most 120 (256), below e4m3's NaN");
  if constexpr (kPBits) {
    p_bits_e4m3<kN>(s, m_scaled, scale_log2);
    return move;
  }
  float sum[2] = {0.f, 0.f};
#pragma unroll
  for (int t = 0; t < kN / 8; ++t) {
    const bool poly = kPolyEvery > 0 && t % (kPolyEvery > 0 ? kPolyEvery : 1) == kPolyEvery - 1;  // resolved at compile time
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float x0 = fmaf(s[4 * t + 2 * i], scale_log2, -m_scaled[i]);
      const float x1 = fmaf(s[4 * t + 2 * i + 1], scale_log2, -m_scaled[i]);
      const float e0 = poly ? exp2_poly(x0) : kernels::exp2_approx(x0);
      const float e1 = poly ? exp2_poly(x1) : kernels::exp2_approx(x1);
      s[4 * t + 2 * i] = e0;
      s[4 * t + 2 * i + 1] = e1;
      if constexpr (kSums) sum[i] += e0 + e1;
    }
  }
  if constexpr (kSums) {
#pragma unroll
    for (int i = 0; i < 2; ++i) st.sum[i] += sum[i];
  }
  return move;
}

// O (a 64 × kD accumulator in the same layout: the first kD / 2 of o) *= alpha per row.
template <int kD, int kN>
__device__ __forceinline__ void rescale_rows(float (&o)[kN], const float (&alpha)[2]) {
  static_assert(kN >= kD / 2, "O's kD columns");
#pragma unroll
  for (int t = 0; t < kD / 8; ++t)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      o[4 * t + 2 * i] *= alpha[i];
      o[4 * t + 2 * i + 1] *= alpha[i];
    }
}

// The row sums, completed over the quad.
__device__ __forceinline__ void finish_row_sums(RowState& st) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    st.sum[i] += __shfl_xor_sync(0xffffffffu, st.sum[i], 1);
    st.sum[i] += __shfl_xor_sync(0xffffffffu, st.sum[i], 2);
  }
}

}  // namespace attnprof::flash_sm90
