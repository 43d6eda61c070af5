// The gloo backend (CPU tensors) of a process group; see gloo_backend.cpp for
// why it is built without ProcessGroupGloo.hpp. Only where LibTorch has gloo
// (USE_C10D_GLOO).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

namespace attnprof::ring {

// `loopback`: every rank is on this host (MASTER_ADDR 127.0.0.1/localhost).
c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    std::chrono::milliseconds timeout, bool loopback);

}  // namespace attnprof::ring
