// Atomic writes, staged sets, reading untrusted paths, stale temps, the
// output-directory lock and gzip framing: the guarantees every output file
// relies on.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include <csignal>

#include "attnprof/interrupt.h"
#include "attnprof/io/files.h"
#include "attnprof/report/run_files.h"

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

// A writer that opens the FIFO and closes it without a byte is not "no
// writer"; one that is slow may take its time, and its wait ends at a stop signal.
TEST(ReadFile, AFifoWhoseWriterSendsNothingOrIsSlow) {
  const fs::path d = fresh_dir();
  const std::string fifo = (d / "in.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  auto message = [&] {
    try {
      read_file(fifo);
    } catch (const FileError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::thread silent([&] {
    const int fd = ::open(fifo.c_str(), O_WRONLY);  // waits for the reader
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::close(fd);
  });
  const std::string said = message();
  EXPECT_NE(said.find("its writer closed the FIFO without sending anything"), std::string::npos) << said;
  silent.join();
  std::thread slow([&] {
    const int fd = ::open(fifo.c_str(), O_WRONLY);
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // longer than the 2 s a missing writer gets
    (void)!::write(fd, "late", 4);
    ::close(fd);
  });
  EXPECT_EQ(read_file(fifo), "late");
  slow.join();
  std::thread held([&] {
    const int fd = ::open(fifo.c_str(), O_WRONLY);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    ::close(fd);
  });
  std::thread stop([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    attnprof::request_interrupt(SIGINT);
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(read_file(fifo), attnprof::Interrupted);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1200)) << "the signal ended the wait";
  stop.join();
  held.join();
  attnprof::request_interrupt(0);
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

namespace {
pid_t dead_pid() {
  const pid_t dead = ::fork();
  if (dead == 0) _exit(0);
  ::waitpid(dead, nullptr, 0);  // a pid that no longer exists (reuse within the test is unlikely)
  return dead;
}
}  // namespace

TEST(StaleTemps, RemovesThoseOfDeadProcessesForTheNamesItIsGivenOnly) {
  const fs::path d = fresh_dir();
  const pid_t dead = dead_pid();
  const std::string stale = ".t.json.tmp." + std::to_string(dead) + ".0";
  const std::string live = ".t.json.tmp." + std::to_string(::getppid()) + ".0";
  const std::string users = ".notes.txt.tmp." + std::to_string(dead) + ".1";  // same shape, another name
  for (const std::string& n : {stale, stale + ".tmp", live, users, std::string("keep.json")})
    write_file_atomic((d / n).string(), "x");
  EXPECT_EQ(temp_target_name(stale), "t.json");
  EXPECT_EQ(temp_target_name(stale + ".tmp"), "t.json");
  EXPECT_EQ(remove_stale_temps(d.string(), [](const std::string& t) { return t == "t.json"; }), 2);
  EXPECT_FALSE(fs::exists(d / stale));
  EXPECT_TRUE(fs::exists(d / live)) << "a running process's temp stays";
  EXPECT_TRUE(fs::exists(d / users)) << "a name it was not given stays";
  EXPECT_TRUE(fs::exists(d / "keep.json"));
  EXPECT_EQ(remove_stale_temps(d.string(), {}), 0) << "no names: nothing removed";
  fs::remove_all(d);
}

// Writing a file clears the dead temps of that very file, and only those: a
// --csv into a user's directory never touches the user's other hidden files.
TEST(StaleTemps, WritingAFileClearsOnlyItsOwnDeadTemps) {
  const fs::path d = fresh_dir();
  const pid_t dead = dead_pid();
  const std::string mine = ".diff.csv.tmp." + std::to_string(dead) + ".4";
  const std::string other = ".other.csv.tmp." + std::to_string(dead) + ".4";
  for (const std::string& n : {mine, mine + ".tmp", other}) write_file_atomic((d / n).string(), "x");
  write_file_atomic((d / "diff.csv").string(), "a,b\n");
  EXPECT_FALSE(fs::exists(d / mine));
  EXPECT_FALSE(fs::exists(d / (mine + ".tmp")));
  EXPECT_TRUE(fs::exists(d / other));
  EXPECT_EQ(read_file((d / "diff.csv").string()), "a,b\n");
  fs::remove_all(d);
}

// An output directory is cleared only in the folders attnprof writes, only
// for the names its `own` predicate accepts, and never through a link.
TEST(StaleTemps, OutputDirWalksItsOwnFoldersWithoutFollowingLinks) {
  const fs::path d = fresh_dir(), outside = fresh_dir();
  const std::string tail = ".tmp." + std::to_string(dead_pid()) + ".0";
  fs::create_directories(d / "v" / "s");
  for (const fs::path& dir : {d, d / "v", d / "v" / "s", outside})
    for (const std::string& n : {"own.json", "user.txt"}) write_file_atomic((dir / ("." + n + tail)).string(), "x");
  fs::create_symlink(outside, d / "link");
  std::vector<std::string> asked;
  {
    OutputDir out(d.string(), [&asked](const std::string& rel, const std::string& name) {
      asked.push_back(rel + "|" + name);
      return name == "own.json";
    });
  }
  for (const fs::path& dir : {d, d / "v", d / "v" / "s"}) {
    EXPECT_FALSE(fs::exists(dir / (".own.json" + tail))) << dir;
    EXPECT_TRUE(fs::exists(dir / (".user.txt" + tail))) << dir;
  }
  EXPECT_TRUE(fs::exists(outside / (".own.json" + tail))) << "a link out of the tree is not followed";
  EXPECT_NE(std::find(asked.begin(), asked.end(), "v/s|own.json"), asked.end());
  for (const std::string& a : asked) EXPECT_EQ(a.find("link"), std::string::npos) << a;
  fs::remove_all(d);
  fs::remove_all(outside);
}

// --- one set: removals and the same path twice --------------------------------------

TEST(StagedFiles, AnEarlierFileLeftOutOfTheSetGoesWithItAndComesBackOnFailure) {
  const fs::path d = fresh_dir();
  const std::string gz = (d / "t.pt.trace.json.gz").string(), plain = (d / "t.pt.trace.json").string();
  write_file_atomic(gz, "old gzip");
  {
    StagedFiles set;
    set.add(plain, "new plain");
    set.remove_at_publish(gz);
    set.remove_at_publish((d / "never_there").string());  // nothing to remove: no error
    set.publish();
  }
  EXPECT_EQ(read_file(plain), "new plain");
  EXPECT_FALSE(fs::exists(gz));
  // A set that fails after the removal puts the removed file back.
  write_file_atomic(gz, "old gzip");
  {
    StagedFiles set;
    set.remove_at_publish(gz);
    set.add((d / "later.txt").string(), "x");
    for (const auto& e : fs::directory_iterator(d))  // its temp gone: its rename fails, after the removal
      if (e.path().filename().string().rfind(".later.txt.tmp.", 0) == 0) fs::remove(e.path());
    EXPECT_THROW(set.publish(), FileError);
  }
  EXPECT_FALSE(fs::exists(d / "later.txt"));
  EXPECT_EQ(read_file(gz), "old gzip");
  EXPECT_EQ(read_file(plain), "new plain");
  fs::remove_all(d);
}

TEST(StagedFiles, TwoOutputsOfOneSetNamingOnePathAreRefused) {
  const fs::path d = fresh_dir();
  fs::create_directories(d / "sub");
  StagedFiles set;
  set.add((d / "a.csv").string(), "1");
  EXPECT_THROW(set.add((d / "a.csv").string(), "2"), FileError);
  EXPECT_THROW(set.add((d / "sub" / ".." / "a.csv").string(), "2"), FileError);
  set.publish();
  EXPECT_EQ(read_file((d / "a.csv").string()), "1");
  // A stream takes both: nothing is replaced there.
  StagedFiles streams;
  streams.add("/dev/null", "1");
  EXPECT_NO_THROW(streams.add("/dev/null", "2"));
  streams.publish();
  fs::remove_all(d);
}

TEST(Paths, SameFileAndWithinSeeThroughLinksDotsAndPathsNotYetThere) {
  const fs::path d = fresh_dir();
  fs::create_directories(d / "a" / "b");
  write_file_atomic((d / "a" / "f").string(), "x");
  fs::create_symlink(d / "a", d / "link");
  EXPECT_TRUE(same_file((d / "a" / "f").string(), (d / "link" / "f").string()));
  EXPECT_TRUE(same_file((d / "a").string(), (d / "a" / "b" / "..").string()));
  EXPECT_TRUE(same_file((d / "a" / "new.csv").string(), (d / "link" / "b" / ".." / "new.csv").string()));
  EXPECT_FALSE(same_file((d / "a" / "f").string(), (d / "a" / "g").string()));
  EXPECT_FALSE(same_file((d / "a").string(), (d / "a" / "b").string()));
  EXPECT_TRUE(path_within((d / "link" / "b" / "x" / "y").string(), (d / "a").string()));
  EXPECT_TRUE(path_within((d / "a").string(), (d / "a").string()));
  EXPECT_FALSE(path_within((d / "ab").string(), (d / "a").string())) << "a prefix of the name is not a parent";
  EXPECT_FALSE(path_within((d / "a" / ".." / "x").string(), (d / "a").string()));
  EXPECT_EQ(canonical_path((d / "link" / "nope" / ".." / "q").string()), canonical_path((d / "a").string()) + "/q");
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

// What an output directory's cleaning may remove: temps of attnprof's own
// file names in the folders it writes, nothing else.
TEST(OwnOutputs, NamesAttnprofWritesAndNoOthers) {
  using attnprof::report::is_own_output;
  const std::string stem = "8_16_1024_64_bf16_causal", gqa = "8_32_1_128_bf16_causal_hkv8_kv8192_bwd";
  EXPECT_TRUE(is_own_output("", "naive_" + stem + ".json"));
  EXPECT_TRUE(is_own_output("", "ring-sdpa-flash_" + gqa + ".json"));
  EXPECT_TRUE(is_own_output("naive", stem + ".txt"));
  EXPECT_TRUE(is_own_output("naive", stem + ".summary.json"));
  EXPECT_TRUE(is_own_output("ring-sdpa-flash", gqa + ".rank3.summary.json"));
  EXPECT_TRUE(is_own_output("ring-sdpa-flash", stem + ".ring.csv"));
  EXPECT_TRUE(is_own_output("naive/" + stem, stem + ".pt.trace.json.gz"));
  EXPECT_TRUE(is_own_output("naive/" + stem, stem + ".rank1.pt.trace.json"));
  EXPECT_TRUE(is_own_output("compare", stem + ".timeline.svg"));
  EXPECT_TRUE(is_own_output("compare", stem + ".md"));
  EXPECT_TRUE(is_own_output("sweep", "sweep.csv"));
  EXPECT_TRUE(is_own_output("sweep/partial", "tflops_d64.svg"));
  // Every suffix Problem::file_stem writes: window, pages, variable lengths (padded too).
  for (const std::string s : {"1_16_32768_128_bf16_causal_w4096", "8_32_1_128_bf16_causal_hkv8_kv32768_p16",
                              "16_32_8065_128_bf16_causal_hkv8_vl16-a2a59e7b",
                              "16_32_8065_128_bf16_causal_hkv8_vl16-a2a59e7b-padded",
                              "1_2_300_64_bf16_causal_w17_bwd"}) {
    EXPECT_TRUE(is_own_output("naive", s + ".summary.json")) << s;
    EXPECT_TRUE(is_own_output("naive/" + s, s + ".pt.trace.json.gz")) << s;
    EXPECT_TRUE(is_own_output("", "custom-flash_" + s + ".json")) << s;
  }
  EXPECT_FALSE(is_own_output("naive", stem + "_vl16-.summary.json")) << "no hash";
  EXPECT_FALSE(is_own_output("naive", stem + "_vl16-a2a59e7b-pad.summary.json"));
  for (const auto& [rel, name] : std::vector<std::pair<std::string, std::string>>{
           {"", "notes.txt"}, {"", stem + ".json"}, {"", "x_notes.json"}, {"naive", "notes.txt"},
           {"naive", stem + ".pt.trace.json.gz"}, {"mydata", "report.csv"}, {"naive", stem + ".txt.bak"},
           {"naive/" + stem, "8_16_1024_64_bf16_full.pt.trace.json.gz"}, {"naive/other", stem + ".pt.trace.json"},
           {"compare", "notes.md"}, {"sweep", "notes.txt"}, {"naive/" + stem + "/deeper", stem + ".txt"}})
    EXPECT_FALSE(is_own_output(rel, name)) << rel << " | " << name;
}
