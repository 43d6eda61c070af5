// main() of every test executable that links LibTorch. As attnprof's own
// main(), it ends the process without running static destructors once the
// results are flushed: Kineto's config thread (started by the first
// prepareProfiler) and OpenMP's workers are still alive at exit, and tearing
// LibTorch's state down under them corrupted the heap now and then —
// "malloc(): unsorted double linked list corrupted" after
// Runner.AutoWarmupTimesEachStepAndRecordsTheCount had passed, once in CI.
// The report-layer tests keep gtest's own main, so LeakSanitizer still runs
// at their exit.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(rc);
}
