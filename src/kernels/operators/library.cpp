// The attnprof:: operator namespace. Each kernel family's api.cpp defines its
// operators' schemas (TORCH_LIBRARY_FRAGMENT, compiled in every build, with or
// without CUDA: the schemas exist everywhere, the CUDA implementations only
// where the kernels were built); autograd.cpp adds the autograd kernels.
// Callers that need a kernel ask the dispatcher whether one is registered for
// CUDA (variants/custom_op_variant.h).
#include <torch/library.h>

TORCH_LIBRARY(attnprof, m) {}
