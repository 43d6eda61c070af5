// Atomic writes and gzip framing: the guarantees every output file relies on.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "attnprof/io/files.h"

namespace fs = std::filesystem;
using namespace attnprof::io;

namespace {
fs::path fresh_dir() {
  const fs::path d = fs::temp_directory_path() / ("attnprof_files_" + std::to_string(::getpid()) + "_" +
                                                  std::to_string(std::random_device{}()));
  fs::create_directories(d);
  return d;
}
size_t entries(const fs::path& d) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(d), fs::directory_iterator()));
}
}  // namespace

TEST(AtomicWrite, ReplacesExistingFileAndLeavesNoTemp) {
  const fs::path d = fresh_dir();
  const std::string target = (d / "out.txt").string();
  write_file_atomic(target, "first");
  write_file_atomic(target, "second, longer");
  EXPECT_EQ(read_file(target), "second, longer");
  EXPECT_EQ(entries(d), 1u);
  fs::remove_all(d);
}

TEST(AtomicWrite, FailureKeepsOldFileAndRemovesTemp) {
  const fs::path d = fresh_dir();
  const std::string target = (d / "out.txt").string();
  write_file_atomic(target, "kept");
  // A directory in the way makes the final rename fail after the temp was written.
  const std::string blocked = (d / "dir_target").string();
  fs::create_directories(fs::path(blocked) / "child");
  EXPECT_THROW(write_file_atomic(blocked, "x"), FileError);
  EXPECT_EQ(read_file(target), "kept");
  EXPECT_EQ(entries(d), 2u);  // out.txt and dir_target, no temp
  fs::remove_all(d);
}

TEST(AtomicWrite, MissingDirectoryIsAClearError) {
  try {
    write_file_atomic("/nonexistent_attnprof_dir/x.txt", "x");
    FAIL() << "expected FileError";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent_attnprof_dir/x.txt"), std::string::npos);
  }
}

TEST(EnsureWritableDir, RejectsAFile) {
  const fs::path d = fresh_dir();
  const std::string file = (d / "plain").string();
  write_file_atomic(file, "x");
  EXPECT_THROW(ensure_writable_dir(file), FileError);
  EXPECT_THROW(ensure_writable_dir(file + "/sub"), FileError);
  EXPECT_NO_THROW(ensure_writable_dir((d / "a" / "b").string()));
  EXPECT_TRUE(fs::is_directory(d / "a" / "b"));
  fs::remove_all(d);
}

TEST(Gzip, RoundTripsRandomBytes) {
  std::mt19937 rng(std::random_device{}());
  std::string data(100000 + rng() % 1000, '\0');
  for (auto& c : data) c = static_cast<char>(rng() % 7);  // compressible but not trivial
  const std::string z = gzip_compress(data);
  ASSERT_GE(z.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(z[0]), 0x1f);  // gzip magic
  EXPECT_EQ(static_cast<unsigned char>(z[1]), 0x8b);
  EXPECT_LT(z.size(), data.size());
  EXPECT_EQ(gzip_decompress(z), data);
}

TEST(Gzip, RejectsTruncatedAndGarbage) {
  const std::string z = gzip_compress(std::string(5000, 'a') + "tail");
  EXPECT_THROW(gzip_decompress(z.substr(0, z.size() / 2)), FileError);
  EXPECT_THROW(gzip_decompress("not gzip at all"), FileError);
}

TEST(Gzip, BoundedInflateStopsAtTheLimit) {
  const std::string z = gzip_compress(std::string(3u << 20, 'x'));  // 3 MiB of one byte: a tiny .gz
  EXPECT_EQ(gzip_decompress(z, 4u << 20).size(), 3u << 20);
  try {
    gzip_decompress(z, 1u << 20);
    FAIL() << "expected FileError";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("expands past 1 MiB"), std::string::npos) << e.what();
  }
}
