// Atomic writes, staged sets, reading untrusted paths, stale temps, the
// output-directory lock and gzip framing: the guarantees every output file
// relies on.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

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

// --- a run's set of files: all new and complete, or the old set untouched -------

TEST(StagedFiles, PublishesTheWholeSetAndLeavesNoTemp) {
  const fs::path d = fresh_dir();
  StagedFiles set;
  set.make_dir((d / "a" / "b").string());
  set.add((d / "a" / "b" / "one").string(), "1");
  set.add((d / "two").string(), "2");
  EXPECT_FALSE(fs::exists(d / "two")) << "nothing is visible before publish";
  set.publish();
  EXPECT_EQ(read_file((d / "a" / "b" / "one").string()), "1");
  EXPECT_EQ(read_file((d / "two").string()), "2");
  EXPECT_EQ(entries(d), 2u);  // a/ and two: no temp
  fs::remove_all(d);
}

TEST(StagedFiles, ADirectoryAtOneTargetLeavesTheOldSetUntouchedAndNoNewDirectory) {
  const fs::path d = fresh_dir();
  write_file_atomic((d / "trace").string(), "old trace");
  fs::create_directories(d / "summary");  // where a file must go
  {
    StagedFiles set;
    set.make_dir((d / "new" / "deeper").string());
    set.add((d / "new" / "deeper" / "x").string(), "x");
    set.add((d / "trace").string(), "new trace");
    try {
      set.add((d / "summary").string(), "new summary");
      set.publish();
      FAIL() << "expected FileError";
    } catch (const FileError& e) {
      EXPECT_NE(std::string(e.what()).find("summary"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("directory"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(read_file((d / "trace").string()), "old trace");
  EXPECT_FALSE(fs::exists(d / "new")) << "directories made for the set are removed with it";
  EXPECT_EQ(entries(d), 2u);  // trace and summary/, no temp
  fs::remove_all(d);
}

TEST(StagedFiles, FollowsALinkToAFileAndRefusesADanglingOne) {
  const fs::path d = fresh_dir();
  write_file_atomic((d / "real.csv").string(), "old");
  fs::create_symlink(d / "real.csv", d / "link.csv");
  write_file_atomic((d / "link.csv").string(), "new");
  EXPECT_TRUE(fs::is_symlink(d / "link.csv")) << "the link stays a link";
  EXPECT_EQ(read_file((d / "real.csv").string()), "new");
  fs::create_symlink(d / "missing", d / "dangling.csv");
  EXPECT_THROW(write_file_atomic((d / "dangling.csv").string(), "x"), FileError);
  EXPECT_FALSE(fs::exists(d / "missing"));
  fs::remove_all(d);
}

TEST(StagedFiles, AFifoIsWrittenIntoWhenReadAndRefusedWithoutAReader) {
  const fs::path d = fresh_dir();
  const std::string fifo = (d / "out.csv").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  try {
    write_file_atomic(fifo, "x");  // must not block
    FAIL() << "expected FileError";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("no process is reading"), std::string::npos) << e.what();
  }
  // A reader: the bytes arrive through the FIFO, which stays a FIFO.
  std::string got;
  std::thread reader([&] {  // as `cat fifo` does: a blocking open, then read to the end
    const int fd = ::open(fifo.c_str(), O_RDONLY);
    char buf[256];
    for (ssize_t n; fd >= 0 && (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, size_t(n));
    if (fd >= 0) ::close(fd);
  });
  for (int i = 0; i < 200 && got.empty(); ++i) {
    try {
      write_file_atomic(fifo, "a,b\n1,2\n");
      break;
    } catch (const FileError&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the reader has not opened it yet
    }
  }
  reader.join();
  EXPECT_EQ(got, "a,b\n1,2\n");
  EXPECT_TRUE(fs::is_fifo(fifo));
  fs::remove_all(d);
}

TEST(ReadFile, NeverBlocksAndNamesWhatIsNotAFile) {
  const fs::path d = fresh_dir();
  const std::string fifo = (d / "in.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  auto message = [](const std::string& path, size_t max = SIZE_MAX) {
    try {
      read_file(path, max);
    } catch (const FileError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(fifo).find("a FIFO with no writer"), std::string::npos) << message(fifo);
  EXPECT_NE(message("/dev/zero").find("a character device"), std::string::npos);
  EXPECT_NE(message(d.string()).find("a directory"), std::string::npos);
  write_file_atomic((d / "big").string(), std::string(2048, 'x'));
  EXPECT_NE(message((d / "big").string(), 1024).find("larger than 1024 bytes"), std::string::npos);
  EXPECT_EQ(read_file((d / "big").string(), 2048).size(), 2048u);
  fs::remove_all(d);
}

// --- temp files of dead processes -------------------------------------------------

TEST(StaleTemps, TempNamesCarryTheirOwnersPid) {
  const std::string t = temp_path_for("/x/y/z.summary.json");
  EXPECT_EQ(t.rfind("/x/y/.z.summary.json.tmp.", 0), 0u) << t;
  EXPECT_EQ(temp_owner_pid(t.substr(t.rfind('/') + 1)), long(::getpid()));
  EXPECT_EQ(temp_owner_pid(".a.json.tmp.123.4.tmp"), 123);  // Kineto's own ".tmp" beside it
  // Property: random names are recognised exactly when they have the shape.
  std::mt19937 rng(std::random_device{}());
  const std::string alphabet = ".tmp0123456789ax";
  for (int i = 0; i < 20000; ++i) {
    std::string n(1 + rng() % 24, ' ');
    for (char& c : n) c = alphabet[rng() % alphabet.size()];
    const long pid = temp_owner_pid(n);
    if (pid < 0) continue;
    SCOPED_TRACE(n);
    EXPECT_EQ(n[0], '.');
    const std::string needle = ".tmp." + std::to_string(pid) + ".";
    EXPECT_NE(n.find(needle), std::string::npos);
  }
  for (const char* not_temp : {"x.tmp.1.2", ".tmp.1.2", ".a.tmp.x.2", ".a.tmp.1.", ".a.json", ".attnprof.lock", ".a.tmp.0.1"})
    EXPECT_EQ(temp_owner_pid(not_temp), -1) << not_temp;
}

TEST(StaleTemps, RemovesThoseOfDeadProcessesOnly) {
  const fs::path d = fresh_dir();
  const pid_t dead = ::fork();
  if (dead == 0) _exit(0);
  ::waitpid(dead, nullptr, 0);  // a pid that no longer exists (reuse within the test is unlikely)
  const std::string stale = "." + std::string("t.json.tmp.") + std::to_string(dead) + ".0";
  const std::string live = "." + std::string("t.json.tmp.") + std::to_string(::getppid()) + ".0";
  for (const std::string& n : {stale, stale + ".tmp", live, std::string("keep.json")})
    write_file_atomic((d / n).string(), "x");
  EXPECT_EQ(remove_stale_temps(d.string()), 2);
  EXPECT_FALSE(fs::exists(d / stale));
  EXPECT_TRUE(fs::exists(d / live)) << "a running process's temp stays";
  EXPECT_TRUE(fs::exists(d / "keep.json"));
  fs::remove_all(d);
}

// --- one run at a time per output directory ----------------------------------------

TEST(DirLock, ASecondHolderIsToldWhoHasItAndTheFileGoesWithTheLock) {
  const fs::path d = fresh_dir();
  {
    DirLock first(d.string());
    EXPECT_EQ(read_file((d / ".attnprof.lock").string()), std::to_string(::getpid()) + "\n");
    try {
      DirLock second(d.string());
      FAIL() << "expected DirBusy";
    } catch (const DirBusy& e) {
      EXPECT_EQ(e.holder_pid, long(::getpid()));
      EXPECT_NE(std::string(e.what()).find("in use by another attnprof run (pid " + std::to_string(::getpid())),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_FALSE(fs::exists(d / ".attnprof.lock"));
  EXPECT_NO_THROW(DirLock again(d.string()));
  fs::remove_all(d);
}

TEST(OutputDir, RemovesWhatItMadeWhenTheRunLeftNothing) {
  const fs::path d = fresh_dir();
  { OutputDir out((d / "x" / "y").string()); }
  EXPECT_FALSE(fs::exists(d / "x"));
  {
    OutputDir out((d / "x" / "y").string());
    write_file_atomic((d / "x" / "y" / "f").string(), "kept");
  }
  EXPECT_TRUE(fs::exists(d / "x" / "y" / "f"));
  EXPECT_FALSE(fs::exists(d / "x" / "y" / ".attnprof.lock"));
  fs::remove_all(d);
}

TEST(EnsureWritableDir, RefusesTooLongPathsBeforeMakingAnything) {
  const fs::path d = fresh_dir();
  std::string deep = d.string();
  while (deep.size() < 5000) deep += "/abcdefghij";
  try {
    ensure_writable_dir(deep);
    FAIL() << "expected FileError";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("longer than"), std::string::npos) << e.what();
    EXPECT_LT(std::string(e.what()).size(), 400u) << "the path is shortened in the message";
  }
  EXPECT_THROW(ensure_writable_dir((d / std::string(300, 'n')).string()), FileError);
  EXPECT_EQ(entries(d), 0u);
  fs::remove_all(d);
}
