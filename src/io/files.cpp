#include "attnprof/io/files.h"

#include <fcntl.h>
#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

namespace attnprof::io {

namespace {
std::string os_reason(int err = errno) { return std::strerror(err); }

// A path as an error message shows it: whole up to 200 bytes, else its ends
// (a PATH_MAX-long --out would otherwise fill the screen).
std::string shown(const std::string& path) {
  if (path.size() <= 200) return path;
  return path.substr(0, 100) + "..." + path.substr(path.size() - 60) + " (" + std::to_string(path.size()) + " bytes)";
}

std::string parent_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "a regular file";
}

// Paths the OS would refuse with ENAMETOOLONG, refused before anything is
// created (mkdir -p of a too-long path makes every prefix that fits first).
void check_path_length(const std::string& path, const std::string& what) {
  if (path.size() >= PATH_MAX)
    throw FileError(what + " '" + shown(path) + "': the path is longer than the system's limit of " +
                    std::to_string(PATH_MAX - 1) + " bytes");
  for (size_t start = 0; start < path.size();) {
    const size_t end = std::min(path.find('/', start), path.size());
    if (end - start > NAME_MAX)
      throw FileError(what + " '" + shown(path) + "': the name '" + shown(path.substr(start, end - start)) +
                      "' is longer than the system's limit of " + std::to_string(NAME_MAX) + " bytes");
    start = end + 1;
  }
}

// --- temp files a signal handler must remove -----------------------------------
constexpr int kSlots = 64;
struct Slot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 holds a path
  char path[PATH_MAX];
};
Slot g_slots[kSlots];

void register_temp(const std::string& path) noexcept {
  if (path.size() + 5 >= PATH_MAX) return;  // room for the writer's ".tmp"
  for (Slot& s : g_slots) {
    int expected = 0;
    if (!s.state.compare_exchange_strong(expected, 1)) continue;
    std::memcpy(s.path, path.c_str(), path.size() + 1);
    s.state.store(2);
    return;
  }
}

void unregister_temp(const std::string& path) noexcept {
  for (Slot& s : g_slots) {
    int expected = 2;
    if (s.state.load() == 2 && std::strcmp(s.path, path.c_str()) == 0 && s.state.compare_exchange_strong(expected, 1))
      s.state.store(0);
  }
}

std::mutex g_cleaned_mutex;
std::set<std::string> g_cleaned;  // directories already cleared of stale temps

void remove_stale_temps_once(const std::string& dir) {
  {
    std::lock_guard<std::mutex> lock(g_cleaned_mutex);
    if (!g_cleaned.insert(dir).second) return;
  }
  remove_stale_temps(dir);
}

// Writes all of `bytes` to `fd`; false with errno set on failure.
bool write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

// Blocks the stop signals while files are moved into place, so a second
// Ctrl-C cannot kill the process between two renames of one set.
class StopSignalsBlocked {
 public:
  StopSignalsBlocked() {
    sigset_t s;
    sigemptyset(&s);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&s, sig);
    pthread_sigmask(SIG_BLOCK, &s, &old_);
  }
  ~StopSignalsBlocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

 private:
  sigset_t old_;
};
}  // namespace

void remove_registered_temps() noexcept {
  char with_suffix[PATH_MAX + 8];
  for (Slot& s : g_slots) {
    if (s.state.load() != 2) continue;
    ::unlink(s.path);
    const size_t n = std::strlen(s.path);
    std::memcpy(with_suffix, s.path, n);
    std::memcpy(with_suffix + n, ".tmp", 5);
    ::unlink(with_suffix);
  }
}

// POSIX calls rather than std::filesystem: LibTorch's wheel exports its own copy
// of std::filesystem symbols, which interpose on ours in any binary linking it
// (std::filesystem::remove_all was seen to crash through them).
void ensure_writable_dir(const std::string& dir, MadeDirs* made) {
  if (made) return made->make(dir);
  MadeDirs local;
  local.make(dir);
  local.keep();  // a plain ensure_writable_dir keeps what it made
}

void MadeDirs::make(const std::string& dir) {
  if (dir.empty()) throw FileError("output directory is empty");
  check_path_length(dir, "cannot create output directory");
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    throw FileError("output path '" + shown(dir) + "' exists and is not a directory");
  const size_t before = made_.size();
  try {
    // mkdir -p, one component at a time.
    for (size_t pos = 1; pos <= dir.size(); ++pos) {
      if (pos != dir.size() && dir[pos] != '/') continue;
      const std::string prefix = dir.substr(0, pos);
      if (::mkdir(prefix.c_str(), 0755) == 0) made_.push_back(prefix);
      else if (errno != EEXIST)
        throw FileError("cannot create output directory '" + shown(dir) + "': " + os_reason());
      if (::stat(prefix.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        throw FileError("cannot create output directory '" + shown(dir) + "': '" + shown(prefix) +
                        "' is not a directory");
    }
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
      throw FileError("output directory '" + shown(dir) + "' is not writable: " + os_reason());
  } catch (const FileError&) {
    // Nothing made by this call stays behind.
    while (made_.size() > before) {
      ::rmdir(made_.back().c_str());
      made_.pop_back();
    }
    throw;
  }
}

void MadeDirs::remove_empty() noexcept {
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) ::rmdir(it->c_str());  // fails, harmlessly, when not empty
  made_.clear();
}

std::string join_path(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  return a.back() == '/' ? a + b : a + "/" + b;
}

std::string temp_path_for(const std::string& target) {
  static std::atomic<unsigned> counter{0};
  const size_t slash = target.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : target.substr(0, slash + 1);
  const std::string file = slash == std::string::npos ? target : target.substr(slash + 1);
  // A leading dot keeps half-written files out of globs such as *.json.gz.
  return dir + "." + file + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

long temp_owner_pid(const std::string& name) noexcept {
  if (name.size() < 2 || name[0] != '.') return -1;
  std::string s = name;
  if (s.size() > 4 && s.compare(s.size() - 4, 4, ".tmp") == 0) s.resize(s.size() - 4);
  auto digits_after_last_dot = [&s](std::string& out) {
    const size_t dot = s.rfind('.');
    if (dot == std::string::npos || dot + 1 == s.size() || s.size() - dot > 20) return false;
    out = s.substr(dot + 1);
    for (char c : out)
      if (c < '0' || c > '9') return false;
    s.resize(dot);
    return true;
  };
  std::string counter, pid;
  if (!digits_after_last_dot(counter) || !digits_after_last_dot(pid)) return -1;
  if (s.size() < 6 || s.compare(s.size() - 4, 4, ".tmp") != 0) return -1;  // ".x.tmp" at least
  const long p = std::strtol(pid.c_str(), nullptr, 10);
  return p > 0 ? p : -1;
}

int remove_stale_temps(const std::string& dir) noexcept {
  int removed = 0;
  try {
    DIR* d = ::opendir(dir.c_str());
    if (!d) return 0;
    std::vector<std::string> stale;
    while (const dirent* e = ::readdir(d)) {
      const long pid = temp_owner_pid(e->d_name);
      if (pid <= 0 || pid == ::getpid()) continue;
      // ESRCH: no such process. EPERM means it exists (another user's).
      if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.emplace_back(e->d_name);
    }
    ::closedir(d);
    for (const std::string& n : stale) {
      const std::string p = join_path(dir, n);
      struct stat st {};
      if (::lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::unlink(p.c_str()) == 0) ++removed;
    }
  } catch (...) {
    // Out of memory while listing: leave them for the next run.
  }
  return removed;
}

void remove_quietly(const std::string& path) noexcept { ::unlink(path.c_str()); }

TempFile::TempFile(std::string path) : path_(std::move(path)) { register_temp(path_); }

TempFile& TempFile::operator=(TempFile&& o) noexcept {
  if (this != &o) {
    remove();
    path_ = std::move(o.path_);
    o.path_.clear();
  }
  return *this;
}

void TempFile::remove() noexcept {
  if (path_.empty()) return;
  remove_quietly(path_);
  remove_quietly(path_ + ".tmp");
  unregister_temp(path_);
  path_.clear();
}

std::optional<uint64_t> free_bytes(const std::string& path) noexcept {
  struct statvfs vfs {};
  if (::statvfs(path.c_str(), &vfs) != 0) return std::nullopt;
  return static_cast<uint64_t>(vfs.f_bavail) * static_cast<uint64_t>(vfs.f_frsize);
}

// --- StagedFiles -----------------------------------------------------------------

StagedFiles::~StagedFiles() { discard(); }

void StagedFiles::discard() noexcept {
  for (Entry& e : entries_) {
    if (e.temp.empty()) continue;
    remove_quietly(e.temp);
    unregister_temp(e.temp);
    e.temp.clear();
  }
  entries_.clear();
}

void StagedFiles::add(const std::string& target, const std::string& bytes) {
  const std::string what = "cannot write '" + shown(target) + "'";
  check_path_length(target, "cannot write");
  Entry e;
  e.target = target;
  e.real = target;
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
      struct stat own {};
      if (::fstat(fd, &own) == 0 && own.st_dev == st.st_dev && own.st_ino == st.st_ino) {
        e.fd = fd;  // renaming over it would leave the descriptor writing to an unlinked file
        e.bytes = bytes;
        entries_.push_back(std::move(e));
        targets_.push_back(target);
        return;
      }
    }
  }
  if (::lstat(target.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      if (::stat(target.c_str(), &st) != 0)
        throw FileError(what + ": it is a symbolic link to " +
                        (errno == ENOENT ? std::string("a missing file") : "something unreadable: " + os_reason()));
      if (S_ISREG(st.st_mode)) {
        char* real = ::realpath(target.c_str(), nullptr);
        if (!real) throw FileError(what + ": " + os_reason());
        e.real = real;
        std::free(real);
      }
    }
    if (S_ISDIR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode))
      throw FileError(what + ": it is " + kind_of(st.st_mode));
    if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
      e.bytes = bytes;  // written into it at publish time
      entries_.push_back(std::move(e));
      targets_.push_back(target);
      return;
    }
  }
  const std::string dir = parent_of(e.real);
  remove_stale_temps_once(dir);
  e.temp = temp_path_for(e.real);
  check_path_length(e.temp, "cannot write");
  const int fd = ::open(e.temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw FileError(what + ": " + os_reason());
  register_temp(e.temp);
  auto fail = [&](const std::string& verb) {
    const std::string reason = os_reason();
    if (fd >= 0) ::close(fd);
    remove_quietly(e.temp);
    unregister_temp(e.temp);
    throw FileError("cannot " + verb + " '" + shown(target) + "': " + reason);
  };
  if (!write_all(fd, bytes)) fail("write");
  // A full disk can surface only at flush time (e.g. /dev/full, NFS).
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) fail("flush");
  if (::close(fd) != 0) {
    const std::string reason = os_reason();
    remove_quietly(e.temp);
    unregister_temp(e.temp);
    throw FileError(what + ": " + reason);
  }
  entries_.push_back(std::move(e));
  targets_.push_back(target);
}

void StagedFiles::publish() {
  StopSignalsBlocked blocked;
  auto fail = [this](const std::string& message) {
    discard();
    throw FileError(message);
  };
  // Everything that can be checked before the first target changes.
  for (const Entry& e : entries_) {
    struct stat st {};
    if (!e.temp.empty() && ::lstat(e.real.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      fail("cannot write '" + shown(e.target) + "': it is a directory");
  }
  // FIFOs and devices take the bytes as a stream: they cannot be restored, so
  // they go first, before any file is replaced.
  for (Entry& e : entries_) {
    if (!e.temp.empty()) continue;
    const std::string what = "cannot write '" + shown(e.target) + "'";
    if (e.fd >= 0) {
      if (!write_all(e.fd, e.bytes)) fail(what + ": " + os_reason());
      continue;
    }
    const int fd = ::open(e.real.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) fail(what + (errno == ENXIO ? std::string(": it is a FIFO that no process is reading")
                                            : ": " + os_reason()));
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    const bool ok = write_all(fd, e.bytes);
    const int err = errno;
    ::close(fd);
    if (!ok) fail(what + ": " + os_reason(err));
  }
  // Renames, each atomic; the old file of each kept as a hard link until all
  // have succeeded, so a failure part-way restores the old set.
  std::vector<std::string> backups(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    if (e.temp.empty()) continue;
    struct stat st {};
    if (::lstat(e.real.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      const std::string b = temp_path_for(e.real);
      if (::link(e.real.c_str(), b.c_str()) == 0) {
        backups[i] = b;
        register_temp(b);
      }
    }
    if (::rename(e.temp.c_str(), e.real.c_str()) != 0) {
      const std::string message = "cannot move into place '" + shown(e.target) + "': " + os_reason();
      for (size_t j = 0; j < i; ++j) {
        if (entries_[j].temp.empty()) continue;
        if (!backups[j].empty()) ::rename(backups[j].c_str(), entries_[j].real.c_str());
        else remove_quietly(entries_[j].real);
        entries_[j].temp.clear();  // moved: nothing left at the temp name
      }
      for (const std::string& b : backups)
        if (!b.empty()) remove_quietly(b), unregister_temp(b);
      fail(message);
    }
    unregister_temp(e.temp);
  }
  for (const std::string& b : backups)
    if (!b.empty()) remove_quietly(b), unregister_temp(b);
  entries_.clear();
}

void write_file_atomic(const std::string& target, const std::string& bytes) {
  StagedFiles one;
  one.add(target, bytes);
  one.publish();
}

bool path_exists(const std::string& path) noexcept {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string read_file(const std::string& path, size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw FileError(path + ": cannot read: " + os_reason());
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode))) {
    const std::string kind = kind_of(st.st_mode);
    ::close(fd);
    throw FileError(path + ": cannot read: it is " + kind + ", not a file");
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::string out;
  char buf[1 << 16];
  // A FIFO reads as empty until its writer has opened it: a writer started
  // just before us (`cat a > fifo &`) gets up to 2 s to do so; none is an error,
  // never a hang.
  int fifo_waits = S_ISFIFO(st.st_mode) ? 100 : 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string reason = os_reason();
      ::close(fd);
      throw FileError(path + ": cannot read: " + reason);
    }
    if (n == 0 && out.empty() && fifo_waits-- > 0) {
      ::usleep(20 * 1000);
      continue;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      ::close(fd);
      throw FileError(path + ": larger than " + (max_bytes >= (1u << 20) ? std::to_string(max_bytes >> 20) + " MiB"
                                                                           : std::to_string(max_bytes) + " bytes"));
    }
  }
  ::close(fd);
  if (out.empty() && S_ISFIFO(st.st_mode)) throw FileError(path + ": cannot read: a FIFO with no writer");
  return out;
}

// --- DirLock ------------------------------------------------------------------------

DirLock::DirLock(const std::string& dir) : path_(join_path(dir, ".attnprof.lock")) {
  // The owner removes the file on release; a waiter that opened the removed
  // file sees a different inode at the path after locking, and tries again.
  for (int attempt = 0; attempt < 100; ++attempt) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd_ < 0) throw FileError("cannot lock output directory '" + shown(dir) + "': " + os_reason());
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      char buf[32] = {0};
      const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
      ::close(fd_);
      fd_ = -1;
      if (err != EWOULDBLOCK)
        throw FileError("cannot lock output directory '" + shown(dir) + "': " + os_reason(err));
      const long holder = n > 0 ? std::strtol(buf, nullptr, 10) : -1;
      throw DirBusy("output directory '" + shown(dir) + "' is in use by another attnprof run" +
                        (holder > 0 ? " (pid " + std::to_string(holder) + ")" : std::string()) +
                        "; wait for it to finish or choose another --out",
                    holder > 0 ? holder : -1);
    }
    struct stat held {}, now {};
    if (::fstat(fd_, &held) == 0 && ::stat(path_.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
        held.st_dev == now.st_dev) {
      const std::string pid = std::to_string(::getpid()) + "\n";
      if (::ftruncate(fd_, 0) == 0) (void)::pwrite(fd_, pid.data(), pid.size(), 0);
      register_temp(path_);  // a second Ctrl-C removes it too
      return;
    }
    ::close(fd_);
    fd_ = -1;
  }
  throw FileError("cannot lock output directory '" + shown(dir) + "': the lock file keeps changing");
}

DirLock::~DirLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still holding the lock: see the constructor
  unregister_temp(path_);
  ::close(fd_);
}

OutputDir::OutputDir(const std::string& dir) {
  made_.make(dir);
  lock_ = std::make_unique<DirLock>(dir);
  // <out>, <out>/<variant|compare|sweep>, <out>/<variant>/<stem> (trace folders).
  remove_stale_temps(dir);
  std::vector<std::string> level = {dir};
  for (int depth = 0; depth < 2; ++depth) {
    std::vector<std::string> next;
    for (const std::string& d : level) {
      DIR* h = ::opendir(d.c_str());
      if (!h) continue;
      while (const dirent* e = ::readdir(h)) {
        if (e->d_name[0] == '.') continue;
        const std::string p = join_path(d, e->d_name);
        struct stat st {};
        if (::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) next.push_back(p);
      }
      ::closedir(h);
    }
    for (const std::string& d : next) remove_stale_temps(d);
    level = std::move(next);
  }
}

OutputDir::~OutputDir() { lock_.reset(); }

// --- gzip ---------------------------------------------------------------------------

std::string gzip_compress(const std::string& bytes) {
  z_stream zs{};
  // windowBits 15 + 16 asks zlib for a gzip header and trailer.
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw FileError("zlib: deflateInit2 failed");
  std::string out;
  out.resize(deflateBound(&zs, bytes.size()));
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  zs.avail_in = static_cast<uInt>(bytes.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw FileError("zlib: deflate failed");
  out.resize(zs.total_out);
  return out;
}

std::string gzip_decompress(const std::string& bytes, size_t max_bytes) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) throw FileError("zlib: inflateInit2 failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  zs.avail_in = static_cast<uInt>(bytes.size());
  std::string out;
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&zs);
      throw FileError("not a valid gzip stream");
    }
    out.append(buf, sizeof(buf) - zs.avail_out);
    if (out.size() > max_bytes) {
      inflateEnd(&zs);
      throw FileError("expands past " + std::to_string(max_bytes >> 20) + " MiB");
    }
    if (rc == Z_OK && zs.avail_in == 0 && zs.avail_out != 0) {
      inflateEnd(&zs);
      throw FileError("truncated gzip stream");
    }
  }
  inflateEnd(&zs);
  return out;
}

}  // namespace attnprof::io
