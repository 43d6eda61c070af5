// Plain parameters of one Hopper (sm_90a) attention forward and backward. No
// templates, no LibTorch and no CUDA types, so the boundary (api.cpp) fills
// them and the launch layer reads them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/attention_params.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace attnprof::flash {
struct BwdParams;  // flash_attention/flash_bwd_params.h: the backward shares the portable kernels' params
}  // namespace attnprof::flash

namespace attnprof::flash_sm90 {

// The shared forward params (kernels/common/attention_params.h; q, k, v, o
// contiguous: the tensor maps assume it, the boundary checks it) and what only
// the Hopper launch reads.
struct FwdParams : kernels::AttentionParams {
  // Causal launches over more than one query block per head hand tiles out
  // through this counter (in the order of tile_order.h, whichever SM is free
  // takes the next): two zeroed ints, which the kernel leaves zeroed; no other
  // launch may use them meanwhile. Required for causal calls; the others take
  // every gridDim.x-th tile (tiles of equal cost).
  int* tile_counter = nullptr;

  // Without a mask the last round of tiles may be cut along the keys
  // (tail_split.h): the pieces' partial results (fp32) and one counter per
  // (split tile, consumer warp): zeroed ints, which the kernel leaves zeroed.
  // Sized by fwd_workspace(); unused (may be null) where it asks for none.
  float* split_partials = nullptr;
  int64_t split_partial_bytes = 0;
  int* split_counters = nullptr;
  int split_counter_capacity = 0;

  // A packed variable-length batch (attnprof::flash_attention_sm90_varlen):
  // q, o [total_q][heads_q][head_dim], k, v [total_k][heads_kv][head_dim],
  // sequence b's query rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] and its key
  // rows likewise, lse [heads_q][total_q]; seqlen_q and seqlen_k are the
  // longest sequence's (or more), batch the sequences. Needs the tile counter.
  const int* cu_seqlens_q = nullptr;
  const int* cu_seqlens_k = nullptr;
  int total_q = 0, total_k = 0;
  bool varlen() const { return cu_seqlens_q != nullptr; }

  // 8-bit inputs (AttentionParams::is_fp8; Sm90FwdFp8Configs): v is read as
  // it is by the kTransposeV configurations, and by the others as vt
  // (FwdWorkspace::fp8_vt): Vᵀ [B·Hkv][head_dim][vt_keys] e4m3, each group of
  // 32 keys permuted (fp8_layout.h), zeros from seqlen_k to vt_keys (a
  // multiple of 32).
  const void* vt = nullptr;
  int vt_keys = 0;

  int num_sms = 0;  // persistent grid: at most one block per SM
  int64_t l2_bytes = 0;  // sizes the head sections of the causal tile order (tile_order.h)
};

// What a forward launch needs besides the tensors: fill FwdParams (all but
// the workspace pointers), ask, then give it that much.
struct FwdWorkspace {
  int64_t split_partial_bytes = 0;
  int split_counters = 0;
  bool fp8_vt = false;  // reads Vᵀ (FwdParams::vt, written by run_fp8_vt), not v
};
FwdWorkspace fwd_workspace(const FwdParams& params);

// Runtime → template dispatch: the dtype, and the first configuration of
// Sm90FwdConfigs (Sm90FwdFp8Configs for 8-bit inputs; flash_sm90_traits.h)
// that runs this launch; launches on `stream`. Defined in flash_fwd_sm90_api.cu.
void run_fwd(const FwdParams& params, CUstream_st* stream);

// One named configuration's launch and workspace, instantiated per
// (configuration, dtype) in a generated file (flash_fwd_sm90_launch.cuh).
template <typename Config, typename Element>
void run_fwd_config(const FwdParams& params, CUstream_st* stream);
template <typename Config, typename Element>
FwdWorkspace fwd_workspace_config(const FwdParams& params);

// Vᵀ of 8-bit v [slabs][seqlen][head_dim] (contiguous, 16-byte aligned,
// head_dim a multiple of 16 up to 256) into vt [slabs][head_dim][padded]
// (padded: seqlen rounded up to kFp8KeyGroup), in fp8_vt.h's layout, on
// `stream`. Defined in fp8_vt_kernel.cu.
void run_fp8_vt(const void* v, void* vt, int64_t slabs, int seqlen, int padded, int head_dim, int num_sms,
                CUstream_st* stream);

// The backward: the portable preprocessing, the Hopper main kernel (dK, dV,
// dQ into the fp32 workspace), the portable dQ conversion; all on `stream`.
// q, k, v, dout must be contiguous with 16-byte aligned bases (tensor maps);
// dk, dv take the params' strides. The configuration is the one of
// Sm90BwdConfigs (flash_bwd_sm90_traits.h) for the head dim. Defined in
// flash_bwd_sm90_api.cu.
void run_bwd(const flash::BwdParams& params, CUstream_st* stream);

template <typename Config, typename Element>
void run_bwd_config(const flash::BwdParams& params, CUstream_st* stream);

// A configuration built into this library, by its kName, for the operators
// that run one by name (attnprof::flash_attention_sm90_config,
// attnprof::flash_attention_sm90_fp8_config and
// attnprof::flash_attention_backward_sm90_config): the defaults and the
// alternatives requested with -DATTNPROF_KERNEL_CONFIGS. Each generated
// instantiation file registers its own (config_registry.cpp).
struct FwdConfigEntry {
  int head_dim = 0;
  bool varlen = false;  // runs packed variable-length launches only (FwdParams::cu_seqlens_q)
  bool fp8 = false;     // runs 8-bit inputs only (FwdParams::is_fp8)
  // Normalises by the sum of the e4m3 probabilities P·V multiplies (kSumByGemm):
  // its log-sum-exp is within e4m3's rounding (2^-4 relative) of the exact one.
  bool e4m3_sums = false;
  // Its P are linear in the exponent (kPBits): each within 8% of exp2, not 2^-4.
  bool p_bits = false;
  void (*run)(const FwdParams&, CUstream_st*) = nullptr;
  FwdWorkspace (*workspace)(const FwdParams&) = nullptr;
};
struct BwdConfigEntry {
  int head_dim = 0;
  void (*run)(const flash::BwdParams&, CUstream_st*) = nullptr;
};
bool register_config(const char* name, bool is_bf16, const FwdConfigEntry& entry);
bool register_config(const char* name, bool is_bf16, const BwdConfigEntry& entry);
// nullptr when `name` is not built for that dtype (an fp8 configuration
// registers as not bf16; its entry says fp8).
const FwdConfigEntry* find_fwd_config(const std::string& name, bool is_bf16);
const BwdConfigEntry* find_bwd_config(const std::string& name, bool is_bf16);
// Every registered name of a kind, each once, sorted; the forward's leave out
// the packed-batch (varlen) and fp8 configurations, which no by-name operator runs.
std::vector<std::string> fwd_config_names();
std::vector<std::string> bwd_config_names();
// The fp8 configurations' names (attnprof::flash_attention_sm90_fp8_config runs them).
std::vector<std::string> fp8_config_names();

}  // namespace attnprof::flash_sm90
