// Where the fp8 forward's values sit, as index maps (host and device): P
// goes from the S accumulator into wgmma's 8-bit A fragment without
// shuffles, because Vᵀ's keys are stored permuted within each group of 32.
//
// A consumer thread (g = lane / 4, c = lane % 4) holds, of S's 32-key group
// q, accumulator elements s[16q + 4t + 2i + j] = S[row g + 8i][key 32q + 8t +
// 2c + j] (t < 4; sm90_wgmma.cuh). The k32 A fragment of O += P·V wants in
// register r, byte b, A[row g + 8(r & 1)][k 32q + 4c + b + 16(r >> 1)]
// (CuTe's ALayout_64x32). Register r, byte b therefore takes the element of
// row half r & 1 in tile t = 2(r >> 1) + (b >> 1), column bit b & 1: key 32q +
// 16(r >> 1) + 8(b >> 1) + 2c + (b & 1) lands at logical k 32q + 16(r >> 1) +
// 4c + b. Vᵀ's logical column k must then hold that key: within a group of
// 32, k = 16h + 4c + 2j + i holds key 16h + 8j + 2c + i, which is V viewed
// [S / 32, 2 (h), 2 (j), 4 (c), 2 (i), D], permuted to [S / 32, h, c, j, i, D].
// tests/test_flash_sm90_fp8.cpp checks both maps against those layouts.
#pragma once

#include "kernels/common/host_device.h"

namespace attnprof::flash_sm90 {

// Keys per group whose order Vᵀ permutes (one k32 step of P·V).
inline constexpr int kFp8KeyGroup = 32;

// The accumulator element (of the thread's kBlockN / 2) that byte b of
// register r of k32 step q of P's A fragment takes.
ATTNPROF_HOST_DEVICE constexpr int fp8_p_source(int q, int r, int b) {
  return 16 * q + 4 * (2 * (r >> 1) + (b >> 1)) + 2 * (r & 1) + (b & 1);
}

// The key (within its group of 32) that logical column k (< 32) of Vᵀ holds.
ATTNPROF_HOST_DEVICE constexpr int fp8_vt_key(int k) {
  const int h = k >> 4, c = (k >> 2) & 3, j = (k >> 1) & 1, i = k & 1;
  return 16 * h + 8 * j + 2 * c + i;
}

}  // namespace attnprof::flash_sm90
