// The attention problem one run measures. Plain data, no LibTorch types, so
// the report layer (and its tests) can use it without linking LibTorch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attnprof {

enum class DType { BF16, FP16, FP32 };

const char* dtype_name(DType d);               // "bf16", "fp16", "fp32"
std::optional<DType> parse_dtype(const std::string& s);
const std::vector<std::string>& dtype_names();
int dtype_bytes(DType d);

struct Problem {
  int64_t batch = 8;
  int64_t heads = 16;
  int64_t seq = 1024;
  int64_t head_dim = 64;
  DType dtype = DType::BF16;
  bool causal = true;
  std::string device = "cpu";  // "cpu" or "cuda:N", already resolved
  uint64_t seed = 0;

  bool on_cuda() const { return device.rfind("cuda", 0) == 0; }
  double softmax_scale() const;
  // 4*B*H*S^2*D FLOPs for the two matmuls; causal counts half the score matrix.
  double flops() const;
  // "<B>_<H>_<S>_<D>_<dtype>": the stem of every output file of this problem.
  std::string file_stem() const;
  // "8x16x1024x64" for tables and logs.
  std::string shape_string() const;
};

}  // namespace attnprof
