// attnprof's operators called from a thread that has done no CUDA runtime work
// yet, the way autograd's device thread runs a backward and the way a Python
// thread pool calls an operator: the thread has no current CUDA context, and
// when every allocation comes from the caching allocator nothing binds one
// before the operator's first driver call. The Hopper kernels' tensor maps
// (cuTensorMapEncodeTiled, a driver call) failed there with CUresult 201
// (CUDA_ERROR_INVALID_CONTEXT): seq 65 through autograd on the H200. Each case
// runs once on this thread (which fills the allocator's cache with blocks of
// the sizes the call needs), then on a fresh std::thread, whose result must be
// this thread's (the parity suites check these shapes against float64).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cmath>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/operators/signatures.h"
#include "variants/torch_problem.h"

namespace {

using attnprof::ops::op_handle;
using attnprof::relative_frobenius_error;

bool has_cuda_kernel(const char* op) {
  auto handle = c10::Dispatcher::singleton().findSchema({op, ""});
  return handle && handle->hasKernelForDispatchKey(c10::DispatchKey::CUDA);
}

bool on_hopper() {
  const auto* prop = at::cuda::getCurrentDeviceProperties();
  return prop->major == 9 && prop->minor == 0;
}

// Runs `body` on a new thread; returns the message of what it threw, or "".
std::string on_fresh_thread(const std::function<void()>& body) {
  std::string error;
  std::thread t([&] {
    try {
      body();
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  t.join();
  return error.substr(0, error.find('\n'));
}

// What one call returned: the output and the gradients of q, k, v.
struct Ref {
  at::Tensor out, dq, dk, dv;
};

// The same call's result on two threads: equal to bf16 rounding (the
// backward sums dQ in a different order each run; a wrong answer is off by O(1)).
void expect_same(const char* what, const at::Tensor& fresh, const at::Tensor& first) {
  EXPECT_LE(relative_frobenius_error(fresh, first), 1e-2) << what << " differs between threads";
}

struct Case {
  int64_t b, hq, hkv, s, d;
  bool causal;
};

std::string describe(const Case& c, uint64_t seed) {
  return std::to_string(c.b) + "x" + std::to_string(c.hq) + "/" + std::to_string(c.hkv) + "x" + std::to_string(c.s) +
         "x" + std::to_string(c.d) + (c.causal ? " causal" : " full") + " seed " + std::to_string(seed);
}

const std::vector<Case> kCases = {{1, 4, 4, 65, 64, true}, {1, 4, 2, 65, 128, false}, {2, 8, 2, 17, 64, true},
                                  {1, 2, 2, 129, 128, true}};

// q, k, v and a gradient for the output, bf16 on the GPU, from `seed`.
struct Drawn {
  at::Tensor q, k, v, dout;
  double scale;
};
Drawn draw(const Case& c, uint64_t seed) {
  at::manual_seed(seed);
  const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  Drawn d;
  d.q = at::randn({c.b, c.hq, c.s, c.d}, opts);
  d.k = at::randn({c.b, c.hkv, c.s, c.d}, opts);
  d.v = at::randn({c.b, c.hkv, c.s, c.d}, opts);
  d.dout = at::randn({c.b, c.hq, c.s, c.d}, opts);
  d.scale = 1.0 / std::sqrt(static_cast<double>(c.d));
  return d;
}

void check_backward_on_fresh_thread(const char* op_name) {
  for (const Case& c : kCases) {
    const uint64_t seed = std::random_device{}();
    SCOPED_TRACE(std::string(op_name) + " " + describe(c, seed));
    const Drawn d = draw(c, seed);
    const at::Tensor &q = d.q, &k = d.k, &v = d.v, &dout = d.dout;
    const double scale = d.scale;
    auto [out, lse] = attnprof::ops::flash_forward_op("attnprof::flash_attention").call(q, k, v, c.causal, scale);
    const auto bwd = attnprof::ops::flash_backward_op(op_name);
    at::Tensor dq0, dk0, dv0;
    {  // its workspaces return to the cache
      auto [a, b, d] = bwd.call(dout, q, k, v, out, lse, c.causal, scale);
      dq0 = a, dk0 = b, dv0 = d;
    }
    torch::cuda::synchronize();
    at::Tensor dq, dk, dv;
    const std::string error = on_fresh_thread([&] {
      auto [a, b, d] = bwd.call(dout, q, k, v, out, lse, c.causal, scale);
      dq = a, dk = b, dv = d;
      torch::cuda::synchronize();
    });
    ASSERT_EQ(error, "") << "the operator failed on a thread with no CUDA work before it";
    expect_same("dq", dq, dq0);
    expect_same("dk", dk, dk0);
    expect_same("dv", dv, dv0);
  }
}

#define REQUIRE_OP(op)                                                                             \
  do {                                                                                             \
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: these tests need a GPU";    \
    if (!has_cuda_kernel(op)) GTEST_SKIP() << "attnprof was built without " op;                    \
  } while (0)
#define REQUIRE_HOPPER()                                                                           \
  do {                                                                                             \
    if (!on_hopper()) GTEST_SKIP() << "the Hopper kernels need a compute capability 9.0 GPU";      \
  } while (0)

TEST(OpsOnFreshThreads, HopperBackward) {
  REQUIRE_OP("attnprof::flash_attention_backward_sm90");
  REQUIRE_HOPPER();
  check_backward_on_fresh_thread("attnprof::flash_attention_backward_sm90");
}

TEST(OpsOnFreshThreads, PortableBackward) {
  REQUIRE_OP("attnprof::flash_attention_backward");
  check_backward_on_fresh_thread("attnprof::flash_attention_backward");
}

// The forwards, and both through autograd: backward() on a fresh thread hands
// the work to autograd's device thread.
TEST(OpsOnFreshThreads, ForwardsAndAutograd) {
  REQUIRE_OP("attnprof::flash_attention");
  std::vector<const char*> ops = {"attnprof::flash_attention"};
  if (has_cuda_kernel("attnprof::flash_attention_sm90") && on_hopper()) ops.push_back("attnprof::flash_attention_sm90");
  for (const char* op_name : ops)
    for (const Case& c : kCases) {
      const uint64_t seed = std::random_device{}();
      SCOPED_TRACE(std::string(op_name) + " " + describe(c, seed));
      const Drawn d = draw(c, seed);
      const at::Tensor &q0 = d.q, &k0 = d.k, &v0 = d.v, &dout = d.dout;
      const double scale = d.scale;
      const auto fwd = attnprof::ops::flash_forward_op(op_name);
      Ref first;
      {  // warms the cache with the sizes of every allocation below
        const at::Tensor q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true);
        const at::Tensor v = v0.clone().requires_grad_(true);
        first.out = std::get<0>(fwd.call(q, k, v, c.causal, scale));
        first.out.backward(dout);
        first.out = first.out.detach();
        first.dq = q.grad(), first.dk = k.grad(), first.dv = v.grad();
      }
      torch::cuda::synchronize();
      const at::Tensor q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true);
      const at::Tensor v = v0.clone().requires_grad_(true);
      at::Tensor out;
      const std::string error = on_fresh_thread([&] {
        out = std::get<0>(fwd.call(q, k, v, c.causal, scale));
        out.backward(dout);
        torch::cuda::synchronize();
      });
      ASSERT_EQ(error, "") << "the operator failed on a thread with no CUDA work before it";
      expect_same("out", out.detach(), first.out);
      expect_same("dq", q.grad(), first.dq);
      expect_same("dk", k.grad(), first.dk);
      expect_same("dv", v.grad(), first.dv);
    }
}

}  // namespace
