// The calibration cache: where it lives, its name, the round trip, and that
// no garbage (truncated, mutated, wrongly typed, another device or driver,
// zero figures, huge or deep input) is ever taken for a calibration.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>

#include "attnprof/io/files.h"
#include "attnprof/report/ceilings_cache.h"
#include "attnprof/report/counters.h"
#include "test_util.h"

using namespace attnprof;
using namespace attnprof::report;
using nlohmann::json;

namespace {

// Made-up figures (a well-formed calibration), not a measurement of any GPU.
DeviceCeilings sample() {
  DeviceCeilings c;
  c.device = "NVIDIA H200";
  c.driver = "580.95.05";
  c.sm_clock_mhz = 1000, c.mem_clock_mhz = 2000;
  c.gemm_bf16_tflops = 123.25, c.gemm_fp16_tflops = 124.5, c.gemm_fp32_tflops = 12.75, c.copy_gbps = 1234.5;
  c.gemm_fp8_tflops = 246.5;
  c.spec_bf16_tflops = 989.4, c.spec_dram_gbps = 4800;
  c.measured_at = "2026-12-02T10:00:00Z";
  c.gemm_n = 8192, c.copy_bytes = 1073741824;
  c.source = "measured", c.cache_file = "ignored";
  return c;
}

std::optional<DeviceCeilings> parse(const std::string& text, std::string* why = nullptr) {
  std::string w;
  auto c = parse_ceilings_cache(text, "NVIDIA H200", "580.95.05", &w);
  if (why) *why = w;
  if (!c) {
    EXPECT_FALSE(w.empty()) << "a refusal says why";
    EXPECT_EQ(w.find('\n'), std::string::npos) << w;
  }
  return c;
}

}  // namespace

TEST(CeilingsCache, DirectoryFollowsXdgThenHome) {
  EXPECT_EQ(ceilings_cache_dir("/x/cache", "/home/u"), "/x/cache/attnprof/ceilings");
  EXPECT_EQ(ceilings_cache_dir(nullptr, "/home/u"), "/home/u/.cache/attnprof/ceilings");
  EXPECT_EQ(ceilings_cache_dir("", "/home/u"), "/home/u/.cache/attnprof/ceilings");
  EXPECT_EQ(ceilings_cache_dir("relative/cache", "/home/u"), "/home/u/.cache/attnprof/ceilings")
      << "a relative XDG_CACHE_HOME is ignored";
  EXPECT_EQ(ceilings_cache_dir(nullptr, nullptr), "");
  EXPECT_EQ(ceilings_cache_dir(nullptr, "not/absolute"), "");
}

TEST(CeilingsCache, NameIsOneSafeFileName) {
  EXPECT_EQ(ceilings_cache_name("NVIDIA H200", "580.95.05"), "NVIDIA_H200-580.95.05.json");
  EXPECT_EQ(ceilings_cache_name("A/B\n..", "cuda 13.0"), "A_B_..-cuda_13.0.json");
  EXPECT_EQ(ceilings_cache_name("..", "x")[0], '_') << "never a hidden name or a directory";
  EXPECT_EQ(ceilings_cache_name("", "").find('/'), std::string::npos);
}

TEST(CeilingsCache, DriverVersionFromProc) {
  EXPECT_EQ(parse_nvidia_driver_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Thu Sep 25 "
                                        "2025\nGCC version:  gcc version 12.2.0\n"),
            "580.95.05");
  EXPECT_EQ(parse_nvidia_driver_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  "
                                        "Release Build  (dvs-builder@U16-I3-B03-4-3)  Wed Jan 22 2025"),
            "570.124.06") << "the open kernel module's line";
  EXPECT_EQ(parse_nvidia_driver_version("Kernel Module x\n580.95.05"), "") << "on the marker's line only";
  EXPECT_EQ(parse_nvidia_driver_version("garbage"), "");
  EXPECT_EQ(parse_nvidia_driver_version("Kernel Module"), "");
  EXPECT_EQ(parse_nvidia_driver_version("Kernel Module  ..."), "");
}

TEST(CeilingsCache, RoundTripKeepsEveryMeasuredField) {
  const DeviceCeilings c = sample();
  const auto b = parse(ceilings_cache_text(c));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->device, c.device);
  EXPECT_EQ(b->driver, c.driver);
  EXPECT_DOUBLE_EQ(b->sm_clock_mhz, 1000);
  EXPECT_DOUBLE_EQ(b->mem_clock_mhz, 2000);
  EXPECT_DOUBLE_EQ(b->gemm_bf16_tflops, 123.25);
  EXPECT_DOUBLE_EQ(b->gemm_fp16_tflops, 124.5);
  EXPECT_DOUBLE_EQ(b->gemm_fp32_tflops, 12.75);
  EXPECT_DOUBLE_EQ(b->copy_gbps, 1234.5);
  EXPECT_DOUBLE_EQ(*b->gemm_fp8_tflops, 246.5);
  EXPECT_DOUBLE_EQ(*b->spec_bf16_tflops, 989.4);
  EXPECT_DOUBLE_EQ(*b->spec_dram_gbps, 4800);
  EXPECT_EQ(b->measured_at, c.measured_at);
  EXPECT_EQ(b->gemm_n, 8192);
  EXPECT_DOUBLE_EQ(b->copy_bytes, 1073741824);
  EXPECT_EQ(b->source, "cached");
  EXPECT_EQ(b->cache_file, "") << "where it came from is the reader's to say, not the file's";
  const json j = json::parse(ceilings_cache_text(c));
  EXPECT_EQ(j["tool"], "attnprof");
  EXPECT_EQ(j["version"], kCeilingsCacheVersion);
  EXPECT_FALSE(j["ceilings"].contains("source"));
  // A GPU without fp8 tensor cores: null, and absent reads the same.
  DeviceCeilings no_fp8 = c;
  no_fp8.gemm_fp8_tflops.reset();
  EXPECT_FALSE(parse(ceilings_cache_text(no_fp8))->gemm_fp8_tflops);
  json k = j;
  k["ceilings"].erase("gemm_fp8_tflops");
  EXPECT_FALSE(parse(k.dump())->gemm_fp8_tflops);
  EXPECT_DOUBLE_EQ(*gemm_ceiling_tflops(c, "fp8"), 246.5);
  EXPECT_FALSE(gemm_ceiling_tflops(no_fp8, "fp8"));
}

TEST(CeilingsCache, OtherDeviceDriverOrImplausibleFiguresAreRefused) {
  std::string why;
  DeviceCeilings c = sample();
  EXPECT_FALSE(parse_ceilings_cache(ceilings_cache_text(c), "NVIDIA H100 80GB HBM3", "580.95.05", &why));
  EXPECT_NE(why.find("measured on 'NVIDIA H200'"), std::string::npos) << why;
  EXPECT_FALSE(parse_ceilings_cache(ceilings_cache_text(c), "NVIDIA H200", "575.57.08", &why));
  EXPECT_NE(why.find("driver 580.95.05"), std::string::npos) << why;
  c.copy_gbps = 0;
  EXPECT_FALSE(parse(ceilings_cache_text(c), &why));
  EXPECT_NE(why.find("'copy_gbps' is 0"), std::string::npos) << why;
  c = sample();
  c.measured_at.clear();
  EXPECT_FALSE(parse(ceilings_cache_text(c), &why));
  json j = json::parse(ceilings_cache_text(sample()));
  for (const auto& [pointer, value] : std::vector<std::pair<const char*, json>>{
           {"/ceilings/gemm_bf16_tflops", "fast"},
           {"/ceilings/gemm_bf16_tflops", -1.0},
           {"/ceilings/gemm_bf16_tflops", 1e300},
           {"/ceilings/gemm_n", 1.5},
           {"/ceilings/device", 3},
           {"/ceilings", json::array()},
           {"/version", 1},  // before the fp8 GEMM: measured again
           {"/version", 3},
           {"/ceilings/gemm_fp8_tflops", "fast"},
           {"/ceilings/gemm_fp8_tflops", -1.0},
           {"/tool", "other"},
           {"/kind", "summary"}}) {
    json k = j;
    k[json::json_pointer(pointer)] = value;
    EXPECT_FALSE(parse(k.dump(), &why)) << pointer;
  }
  for (const char* field : {"copy_gbps", "driver", "measured_at", "gemm_n"}) {
    json k = j;
    k["ceilings"].erase(field);
    EXPECT_FALSE(parse(k.dump(), &why)) << field;
    EXPECT_NE(why.find(field), std::string::npos) << why;
  }
}

TEST(CeilingsCache, GarbageNeverReadsAsACalibration) {
  const std::string good = ceilings_cache_text(sample());
  ASSERT_TRUE(parse(good));
  // Every truncation.
  for (size_t cut = 0; cut + 1 < good.size(); ++cut) EXPECT_FALSE(parse(good.substr(0, cut))) << cut;
  // Random byte changes: refused, or (a digit for a digit) still a complete, plausible calibration.
  std::mt19937 rng(29);
  for (int i = 0; i < 3000; ++i) {
    std::string bad = good;
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) bad[rng() % bad.size()] = static_cast<char>(rng() % 256);
    std::string why;
    if (const auto c = parse_ceilings_cache(bad, "NVIDIA H200", "580.95.05", &why)) {
      EXPECT_GT(c->gemm_bf16_tflops, 0.0);
      EXPECT_GT(c->copy_gbps, 0.0);
      EXPECT_EQ(c->device, "NVIDIA H200");
    } else {
      EXPECT_FALSE(why.empty());
      EXPECT_EQ(why.find('\n'), std::string::npos) << why;
    }
  }
  std::string why;
  EXPECT_FALSE(parse(std::string(kMaxCeilingsCacheBytes + 1, ' '), &why));
  EXPECT_NE(why.find("larger than"), std::string::npos);
  EXPECT_FALSE(parse(std::string(30000, '[') + std::string(30000, ']'), &why));
  EXPECT_NE(why.find("nested too deep"), std::string::npos) << why;
  EXPECT_FALSE(parse("", &why));
  EXPECT_FALSE(parse("{\"tool\": \"attnprof\", \"kind\": \"device ceilings\", \"version\": 1e999}", &why));
  EXPECT_FALSE(parse("\x1b[2J", &why));
  EXPECT_EQ(why.find('\x1b'), std::string::npos) << "terminal controls made visible";
}

TEST(CeilingsCache, FilesWrittenAtomicallyAndReadBack) {
  const std::string d = attnprof::testing::make_temp_dir("ceilings");
  ASSERT_FALSE(d.empty());
  const std::string path = d + "/deep/er/" + ceilings_cache_name("NVIDIA H200", "580.95.05");
  std::string why;
  EXPECT_FALSE(read_ceilings_cache(path, "NVIDIA H200", "580.95.05", &why));
  EXPECT_EQ(why, "not cached yet");
  write_ceilings_cache(path, sample());
  const auto c = read_ceilings_cache(path, "NVIDIA H200", "580.95.05", &why);
  ASSERT_TRUE(c) << why;
  EXPECT_EQ(c->cache_file, path);
  EXPECT_EQ(c->source, "cached");
  // Garbage on disk: refused with the reason, never thrown.
  io::write_file_atomic(path, "{ not json");
  EXPECT_FALSE(read_ceilings_cache(path, "NVIDIA H200", "580.95.05", &why));
  EXPECT_NE(why.find("not valid JSON"), std::string::npos) << why;
  EXPECT_FALSE(read_ceilings_cache(d, "NVIDIA H200", "580.95.05", &why)) << "a directory";
  EXPECT_NE(why.find("cannot read"), std::string::npos) << why;
  // A file where the directory should be: FileError.
  io::write_file_atomic(d + "/file", "x");
  EXPECT_THROW(write_ceilings_cache(d + "/file/c.json", sample()), io::FileError);
  attnprof::testing::remove_tree(d);
}
