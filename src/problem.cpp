#include "attnprof/problem.h"

#include <cmath>

namespace attnprof {

const char* dtype_name(DType d) {
  switch (d) {
    case DType::BF16: return "bf16";
    case DType::FP16: return "fp16";
    case DType::FP32: return "fp32";
  }
  return "?";
}

const std::vector<std::string>& dtype_names() {
  static const std::vector<std::string> names = {"bf16", "fp16", "fp32"};
  return names;
}

std::optional<DType> parse_dtype(const std::string& s) {
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  if (s == "fp16" || s == "float16" || s == "half") return DType::FP16;
  if (s == "fp32" || s == "float32" || s == "float") return DType::FP32;
  return std::nullopt;
}

int dtype_bytes(DType d) { return d == DType::FP32 ? 4 : 2; }

double Problem::softmax_scale() const { return 1.0 / std::sqrt(static_cast<double>(head_dim)); }

double Problem::flops() const {
  const double full = 4.0 * double(batch) * double(heads) * double(seq) * double(seq) * double(head_dim);
  return causal ? full / 2.0 : full;
}

std::string Problem::file_stem() const {
  return std::to_string(batch) + "_" + std::to_string(heads) + "_" + std::to_string(seq) + "_" +
         std::to_string(head_dim) + "_" + dtype_name(dtype);
}

std::string Problem::shape_string() const {
  return std::to_string(batch) + "x" + std::to_string(heads) + "x" + std::to_string(seq) + "x" +
         std::to_string(head_dim);
}

}  // namespace attnprof
