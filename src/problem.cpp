#include "attnprof/problem.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace attnprof {

const char* dtype_name(DType d) {
  switch (d) {
    case DType::BF16: return "bf16";
    case DType::FP16: return "fp16";
    case DType::FP32: return "fp32";
    case DType::FP8: return "fp8";
  }
  return "?";
}

const std::vector<std::string>& dtype_names() {
  static const std::vector<std::string> names = {"bf16", "fp16", "fp32", "fp8"};
  return names;
}

std::optional<DType> parse_dtype(const std::string& s) {
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  if (s == "fp16" || s == "float16" || s == "half") return DType::FP16;
  if (s == "fp32" || s == "float32" || s == "float") return DType::FP32;
  if (s == "fp8" || s == "e4m3" || s == "float8_e4m3fn") return DType::FP8;
  return std::nullopt;
}

int dtype_bytes(DType d) { return d == DType::FP32 ? 4 : d == DType::FP8 ? 1 : 2; }

DType output_dtype(DType d) { return d == DType::FP8 ? DType::BF16 : d; }

const char* mask_name(Mask m) {
  switch (m) {
    case Mask::none: return "full";
    case Mask::causal_top_left: return "causal-top-left";
    case Mask::causal_bottom_right: return "causal";
  }
  return "?";
}

std::optional<Mask> parse_mask(const std::string& s) {
  if (s == "full" || s == "none") return Mask::none;
  if (s == "causal" || s == "causal-bottom-right") return Mask::causal_bottom_right;
  if (s == "causal-top-left") return Mask::causal_top_left;
  return std::nullopt;
}

const char* pass_name(Pass p) {
  switch (p) {
    case Pass::fwd: return "fwd";
    case Pass::bwd: return "bwd";
    case Pass::fwd_bwd: return "fwd+bwd";
  }
  return "?";
}

const std::vector<std::string>& pass_names() {
  static const std::vector<std::string> names = {"fwd", "bwd", "fwd+bwd"};
  return names;
}

std::optional<Pass> parse_pass(const std::string& s) {
  if (s == "fwd") return Pass::fwd;
  if (s == "bwd") return Pass::bwd;
  if (s == "fwd+bwd" || s == "fwdbwd") return Pass::fwd_bwd;
  return std::nullopt;
}

std::vector<std::string> pass_scopes(Pass p) {
  switch (p) {
    case Pass::fwd: return {kForwardScope};
    case Pass::bwd: return {kBackwardScope};
    case Pass::fwd_bwd: return {kForwardScope, kBackwardScope};
  }
  return {};
}

double pass_flop_factor(Pass p) {
  switch (p) {
    case Pass::fwd: return 1.0;
    case Pass::bwd: return 2.5;
    case Pass::fwd_bwd: return 3.5;
  }
  return 1.0;
}

Mask Problem::effective_mask() const {
  return mask == Mask::causal_top_left && seq_q == seq_kv ? Mask::causal_bottom_right : mask;
}

double Problem::softmax_scale() const { return 1.0 / std::sqrt(static_cast<double>(head_dim)); }

namespace {

// Sum of min(c, w) over the integers c in [lo, hi] (lo <= hi), in closed form.
double sum_capped(double lo, double hi, double w) {
  const double below_hi = std::min(hi, w);  // the terms c <= w sum to themselves
  const double below = below_hi >= lo ? (lo + below_hi) * (below_hi - lo + 1) / 2.0 : 0.0;
  const double capped = hi - std::max(lo - 1, w);  // the terms past w each count w
  return below + (capped > 0 ? capped * w : 0.0);
}

}  // namespace

int64_t Problem::total_q() const {
  int64_t n = 0;
  for (int64_t b = 0; b < batch; ++b) n += q_len(b);
  return n;
}

int64_t Problem::total_kv() const {
  int64_t n = 0;
  for (int64_t b = 0; b < batch; ++b) n += kv_len(b);
  return n;
}

Problem Problem::sequence(int64_t b) const {
  Problem one = *this;
  one.seqlens.clear();
  one.batch = 1, one.seq_q = q_len(b), one.seq_kv = kv_len(b);
  return one;
}

double Problem::visible_pairs() const {
  if (varlen()) {
    double sum = 0.0;
    for (int64_t b = 0; b < batch; ++b) sum += sequence(b).visible_pairs();
    return batch > 0 ? sum / double(batch) : 0.0;
  }
  const double q = double(seq_q), k = double(seq_kv);
  if (windowed()) {
    // Query i sees min(i + 1 + k - q, window) keys; the counts i + 1 + k - q
    // run over the integers from max(1, k - q + 1) to k (those above 0). Each
    // such query's diagonal counts half, as in the causal count below (q*k -
    // q^2/2 is the exact count less q/2), so the two meet at window = k.
    const double lo = std::max(1.0, k - q + 1);
    return sum_capped(lo, k, double(window)) - (k - lo + 1) / 2.0;
  }
  switch (effective_mask()) {
    case Mask::none:
      return q * k;
    case Mask::causal_bottom_right: {
      // Query i sees i + 1 + (k - q) keys, clamped to [0, k]: the area of a
      // triangle (square problems: q^2/2, the convention attnprof always used)
      // above a rectangle of keys every query sees.
      if (q <= k) return q * k - q * q / 2.0;
      return k * k / 2.0;  // the first q - k queries see nothing
    }
    case Mask::causal_top_left:
      return q <= k ? q * q / 2.0 : q * k - k * k / 2.0;
  }
  return q * k;
}

double Problem::forward_flops() const {
  return 4.0 * double(batch) * double(heads_q) * visible_pairs() * double(head_dim);
}

double Problem::flops() const { return forward_flops() * pass_flop_factor(pass); }

double Problem::padding_share() const {
  if (!varlen() || batch <= 0 || seq_q <= 0 || seq_kv <= 0) return 0.0;
  double real = 0.0;
  for (int64_t b = 0; b < batch; ++b) real += double(q_len(b)) * double(kv_len(b));
  return 1.0 - real / (double(batch) * double(seq_q) * double(seq_kv));
}

namespace {
std::string pass_tag(Pass p) { return p == Pass::fwd_bwd ? "fwdbwd" : pass_name(p); }

// FNV-1a over the lengths' decimal digits and separators: names a batch's
// lengths in 8 hex digits, the same on every machine.
std::string lengths_hash(const std::vector<int64_t>& lengths) {
  uint32_t h = 2166136261u;
  for (int64_t n : lengths)
    for (char c : std::to_string(n) + ",") h = (h ^ uint8_t(c)) * 16777619u;
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", h);
  return buf;
}

std::string lengths_range(const std::vector<int64_t>& lengths) {
  const auto [lo, hi] = std::minmax_element(lengths.begin(), lengths.end());
  return *lo == *hi ? std::to_string(*lo) : std::to_string(*lo) + "-" + std::to_string(*hi);
}
}  // namespace

std::string Problem::file_stem() const {
  std::string s = std::to_string(batch) + "_" + std::to_string(heads_q) + "_" + std::to_string(seq_q) + "_" +
                  std::to_string(head_dim) + "_" + dtype_name(dtype) + "_" + mask_name(effective_mask());
  if (heads_kv != heads_q) s += "_hkv" + std::to_string(heads_kv);
  if (seq_kv != seq_q) s += "_kv" + std::to_string(seq_kv);
  if (windowed()) s += "_w" + std::to_string(window);
  if (paged()) s += "_p" + std::to_string(page_size);
  if (varlen()) s += "_vl" + std::to_string(seqlens.size()) + "-" + lengths_hash(seqlens) + (varlen_padded ? "-padded" : "");
  if (fp8_rotated) s += "_rot";
  if (pass != Pass::fwd) s += "_" + pass_tag(pass);
  return s;
}

std::string Problem::shape_string() const {
  std::string heads = std::to_string(heads_q);
  if (heads_kv != heads_q) heads += "/" + std::to_string(heads_kv);
  std::string seq = std::to_string(seq_q);
  if (seq_kv != seq_q) seq += "/" + std::to_string(seq_kv);
  return std::to_string(batch) + "x" + heads + "x" + seq + "x" + std::to_string(head_dim);
}

std::string Problem::config_string() const {
  const Mask m = effective_mask();
  std::string s = std::string(dtype_name(dtype)) + " " +
                  (m == Mask::none ? "non-causal" : m == Mask::causal_top_left ? "causal (top-left)" : "causal");
  if (windowed()) s += " window " + std::to_string(window);
  if (paged()) s += " paged " + std::to_string(page_size);
  if (varlen()) s += " varlen " + lengths_range(seqlens) + (varlen_padded ? " padded" : "");
  if (fp8_rotated) s += " rotated";
  if (pass != Pass::fwd) s += std::string(" ") + pass_name(pass);
  return s;
}

}  // namespace attnprof
