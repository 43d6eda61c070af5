// Online softmax (FlashAttention-2) over the score rows one thread holds.
//
// An m16n8 MMA accumulator gives a thread two rows of each m16 tile (g and
// g + 8, g = lane / 4), two adjacent columns per n8 tile; the other three lanes
// of its quad hold the rest of those rows. For each new tile of scores S the
// row max is updated, the running sum and the output accumulator O are
// rescaled to it, and S becomes P = exp2(S·c − max·c) in place, with
// c = scale·log2(e) (one FFMA and one MUFU.EX2 per score).
#pragma once

#include <cmath>

#include "kernels/common/sm80_primitives.cuh"

namespace attnprof::flash {

// kRescaleSlack < 0 moves the max the exponents are taken against whenever a
// row max grows; >= 0 keeps a stale max until the new one exceeds it by more
// than kRescaleSlack powers of two, so every exp2 stays <= 2^kRescaleSlack.
// The sum and O are normalised by the same stale max, so the result is exact.
template <int kMTiles, int kRescaleSlack>
struct OnlineSoftmax {
  static constexpr bool kLazyRescale = kRescaleSlack >= 0;

  float row_max[kMTiles][2];  // running max of raw (unscaled) scores
  float row_sum[kMTiles][2];  // this thread's part of the row sum

  // Empty rows, and the output accumulator `o` zeroed with them.
  template <int kOTiles>
  __device__ __forceinline__ void init(float (&o)[kMTiles][kOTiles][4]) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      row_max[mt][0] = row_max[mt][1] = -INFINITY;
      row_sum[mt][0] = row_sum[mt][1] = 0.f;
#pragma unroll
      for (int t = 0; t < kOTiles; ++t) o[mt][t][0] = o[mt][t][1] = o[mt][t][2] = o[mt][t][3] = 0.f;
    }
  }

  // New scores `s` for this thread's rows: updates max and sum, rescales `o`,
  // and leaves P (unnormalised probabilities) in `s`.
  template <int kSTiles, int kOTiles>
  __device__ __forceinline__ void update(float (&s)[kMTiles][kSTiles][4],
                                         float (&o)[kMTiles][kOTiles][4], float scale_log2) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const float tile_max = quad_row_max(s[mt], i, row_max[mt][i]);
        if constexpr (!kLazyRescale) {
          move_max(mt, i, tile_max, o[mt], scale_log2);
        } else {
          // Moving the max costs kOTiles·2 multiplies per row, FP32 work that
          // competes with the exponentials for issue slots, and past the first
          // key blocks the max rarely grows by more than the slack. The branch
          // is warp-uniform (no divergence): taken when any row of the group grew.
          const bool grow = tile_max * scale_log2 > row_max[mt][i] * scale_log2 + kRescaleSlack;
          if (__any_sync(0xffffffffu, grow))
            move_max(mt, i, grow ? tile_max : row_max[mt][i], o[mt], scale_log2);
        }
        exponentiate_and_sum(s[mt], i, scale_log2, row_sum[mt][i], row_max[mt][i]);
      }
    }
  }

  // Completes the row sums across the quad; 1/sum, 0 for a row that saw no key.
  __device__ __forceinline__ void finish(float (&inv_sum)[kMTiles][2]) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        float s = row_sum[mt][i];
        s += __shfl_xor_sync(0xffffffffu, s, 1);
        s += __shfl_xor_sync(0xffffffffu, s, 2);
        row_sum[mt][i] = s;
        inv_sum[mt][i] = s > 0.f ? 1.f / s : 0.f;
      }
  }

  // Natural-log log-sum-exp of a finished row: max·scale + ln(sum); −inf for a
  // row that saw no key.
  __device__ __forceinline__ float lse(int mt, int i, float scale) const {
    return row_sum[mt][i] > 0.f ? row_max[mt][i] * scale + logf(row_sum[mt][i]) : -INFINITY;
  }

 private:
  // Max of row `i` (g or g + 8) over the new tiles and `running`, across the quad.
  template <int kSTiles>
  __device__ __forceinline__ static float quad_row_max(const float (&s)[kSTiles][4], int i,
                                                       float running) {
    float mx = running;
#pragma unroll
    for (int t = 0; t < kSTiles; ++t) mx = fmaxf(mx, fmaxf(s[t][2 * i], s[t][2 * i + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    return mx;
  }

  // The max is stored unscaled and multiplied by scale_log2 where used. A row
  // with nothing visible yet keeps max −inf; subtracting 0 instead keeps
  // exp2(−inf − (−inf)) from making NaN.
  __device__ __forceinline__ static float scaled_max(float max, float scale_log2) {
    return max == -INFINITY ? 0.f : max * scale_log2;
  }

  // Moves row (mt, i)'s max to new_max and rescales its sum and O to match.
  template <int kOTiles>
  __device__ __forceinline__ void move_max(int mt, int i, float new_max, float (&o)[kOTiles][4],
                                           float scale_log2) {
    const float alpha =
        kernels::exp2_approx(row_max[mt][i] * scale_log2 - scaled_max(new_max, scale_log2));
    row_sum[mt][i] *= alpha;
#pragma unroll
    for (int t = 0; t < kOTiles; ++t) {
      o[t][2 * i] *= alpha;
      o[t][2 * i + 1] *= alpha;
    }
    row_max[mt][i] = new_max;
  }

  // P = exp2(S·c − max·c) for row i, added to the row sum.
  template <int kSTiles>
  __device__ __forceinline__ static void exponentiate_and_sum(float (&s)[kSTiles][4], int i,
                                                              float scale_log2, float& sum,
                                                              float max) {
    const float m_scaled = scaled_max(max, scale_log2);
#pragma unroll
    for (int t = 0; t < kSTiles; ++t) {
      s[t][2 * i] = kernels::exp2_approx(fmaf(s[t][2 * i], scale_log2, -m_scaled));
      s[t][2 * i + 1] = kernels::exp2_approx(fmaf(s[t][2 * i + 1], scale_log2, -m_scaled));
      sum += s[t][2 * i] + s[t][2 * i + 1];
    }
  }
};

}  // namespace attnprof::flash
