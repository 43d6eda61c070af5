// The seed of a test that draws random inputs: fresh on every run, or the
// value of ATTNPROF_TEST_SEED, to replay the draws of a failure (which
// prints its seed): ATTNPROF_TEST_SEED=1383582858 ctest -R Fp8Variants.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>

namespace attnprof::testing {

inline uint64_t test_seed() {
  if (const char* text = std::getenv("ATTNPROF_TEST_SEED"); text && *text) {
    size_t used = 0;
    const uint64_t seed = std::stoull(text, &used);
    if (text[used] != '\0' || text[0] == '-') throw std::invalid_argument(std::string("ATTNPROF_TEST_SEED: ") + text);
    return seed;
  }
  return (static_cast<uint64_t>(std::random_device{}()) << 32) | std::random_device{}();
}

}  // namespace attnprof::testing
