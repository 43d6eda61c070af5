#include "attnprof/report/kernel_names.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace attnprof::report {
namespace {

TEST(KernelNames, ShortNamesAndSymbols) {
  struct Case {
    std::string name, short_name, symbol;
  };
  const Case cases[] = {
      {"void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128> >(pytorch_flash::Flash_fwd_params)",
       "pytorch_flash::flash_fwd_kernel", "flash_fwd_kernel"},
      {"void (anonymous namespace)::softmax_warp_forward<float, float, float, 7, false, false>(float*, int)",
       "softmax_warp_forward", "softmax_warp_forward"},
      {"void attnprof::softmax::(anonymous namespace)::scaled_masked_softmax_warp_kernel<__nv_bfloat16, 1>(int)",
       "attnprof::softmax::scaled_masked_softmax_warp_kernel", "scaled_masked_softmax_warp_kernel"},
      {"Memcpy DtoD (Device -> Device)", "Memcpy DtoD", "Memcpy DtoD"},
      {"nvjet_sm90_tst_64x8_64x16_2x4_h_bz_TNT", "nvjet_sm90_tst_64x8_64x16_2x4_h_bz_TNT",
       "nvjet_sm90_tst_64x8_64x16_2x4_h_bz_TNT"},
      {"<lambda>(int)", "<lambda>(int)", "<lambda>(int)"},  // nothing before the arguments: kept whole
      {"ns::", "ns::", "ns::"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(short_kernel_name(c.name), c.short_name);
    EXPECT_EQ(kernel_symbol(c.name), c.symbol);
  }
  EXPECT_EQ(short_kernel_name(std::string(100, 'a'), 10), "aaaaaaa...");
  // Cut at a character boundary: "µ" is two bytes.
  EXPECT_EQ(short_kernel_name("ab\u00b5\u00b5\u00b5\u00b5", 6), "ab...");
}

// A megabyte of "(anonymous namespace)::" is read in one pass.
TEST(KernelNames, HostileNamesStayLinear) {
  std::string name;
  while (name.size() < (size_t(1) << 20)) name += "(anonymous namespace)::";
  name += "k<int>";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(kernel_symbol(name), "k");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
}

}  // namespace
}  // namespace attnprof::report
