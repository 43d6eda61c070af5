#include "attnprof/io/files.h"

#include <fcntl.h>
#include <dirent.h>
#include <limits.h>
#include <poll.h>
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
#include <functional>
#include <set>

#include "attnprof/interrupt.h"

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

std::atomic<long> g_published{0};  // files moved into place (or written into a FIFO) by this process

// `name` parsed as temp_path_for makes it: ".<target>.tmp.<pid>.<n>", with a
// writer's own ".tmp" possibly appended. False when it is not one.
bool parse_temp_name(const std::string& name, std::string& target, long& pid) noexcept {
  try {
    if (name.size() < 2 || name[0] != '.') return false;
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
    std::string counter, digits;
    if (!digits_after_last_dot(counter) || !digits_after_last_dot(digits)) return false;
    if (s.size() < 6 || s.compare(s.size() - 4, 4, ".tmp") != 0) return false;  // ".x.tmp" at least
    pid = std::strtol(digits.c_str(), nullptr, 10);
    if (pid <= 0) return false;
    target = s.substr(1, s.size() - 5);
    return true;
  } catch (...) {
    return false;
  }
}

// Unlinks, in `dir` (not below), the temps of processes that no longer run
// whose target name `own` accepts, and only regular files of this user.
int remove_dead_temps(const std::string& dir, const std::function<bool(const std::string&)>& own) noexcept {
  int removed = 0;
  try {
    DIR* d = ::opendir(dir.empty() ? "." : dir.c_str());
    if (!d) return 0;
    std::vector<std::string> stale;
    while (const dirent* e = ::readdir(d)) {
      std::string target;
      long pid = -1;
      if (!parse_temp_name(e->d_name, target, pid) || pid == ::getpid() || !own(target)) continue;
      // ESRCH: no such process. EPERM means it exists (another user's).
      if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.emplace_back(e->d_name);
    }
    ::closedir(d);
    for (const std::string& n : stale) {
      const std::string p = join_path(dir, n);
      struct stat st {};
      if (::lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && ::unlink(p.c_str()) == 0)
        ++removed;
    }
  } catch (...) {
    // Out of memory while listing: leave them for the next run.
  }
  return removed;
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
    const sigset_t s = stop_signal_set();
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
  std::string target;
  long pid = -1;
  return parse_temp_name(name, target, pid) ? pid : -1;
}

std::string temp_target_name(const std::string& name) {
  std::string target;
  long pid = -1;
  return parse_temp_name(name, target, pid) ? target : std::string();
}

int remove_stale_temps(const std::string& dir, const std::function<bool(const std::string&)>& own) noexcept {
  if (!own) return 0;
  return remove_dead_temps(dir, own);
}

int remove_stale_temps_of(const std::string& target) noexcept {
  try {
    const size_t slash = target.rfind('/');
    const std::string name = slash == std::string::npos ? target : target.substr(slash + 1);
    return remove_dead_temps(parent_of(target), [&name](const std::string& t) { return t == name; });
  } catch (...) {
    return 0;
  }
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
  if (!is_stream(target))
    for (const Entry& other : entries_)
      if (other.target == target || same_file(other.target, target))
        throw FileError(what + ": two outputs of one set name this path");
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
  remove_stale_temps_of(e.real);
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
    if (!e.temp.empty() || e.remove) continue;
    const std::string what = "cannot write '" + shown(e.target) + "'";
    if (e.fd >= 0) {
      if (!write_all(e.fd, e.bytes)) fail(what + ": " + os_reason());
      ++g_published;
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
    ++g_published;
  }
  // Renames and removals, each atomic; the old file of each kept as a hard
  // link until all have succeeded, so a failure part-way restores the old set.
  std::vector<std::string> backups(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    if (e.temp.empty() && !e.remove) continue;
    struct stat st {};
    if (::lstat(e.real.c_str(), &st) == 0 && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) {
      const std::string b = temp_path_for(e.real);
      if (::link(e.real.c_str(), b.c_str()) == 0) {
        backups[i] = b;
        register_temp(b);
      }
    }
    const bool failed = e.remove ? (::unlink(e.real.c_str()) != 0 && errno != ENOENT)
                                 : ::rename(e.temp.c_str(), e.real.c_str()) != 0;
    if (failed) {
      const std::string message = (e.remove ? "cannot remove the earlier '" : "cannot move into place '") +
                                  shown(e.target) + "': " + os_reason();
      for (size_t j = 0; j < i; ++j) {
        if (entries_[j].temp.empty() && !entries_[j].remove) continue;
        if (!backups[j].empty()) ::rename(backups[j].c_str(), entries_[j].real.c_str());
        else if (!entries_[j].remove) remove_quietly(entries_[j].real);
        entries_[j].temp.clear();  // moved: nothing left at the temp name
      }
      for (const std::string& b : backups)
        if (!b.empty()) remove_quietly(b), unregister_temp(b);
      fail(message);
    }
    if (!e.remove) unregister_temp(e.temp), ++g_published;
  }
  for (const std::string& b : backups)
    if (!b.empty()) remove_quietly(b), unregister_temp(b);
  entries_.clear();
}

void StagedFiles::remove_at_publish(const std::string& target) {
  check_path_length(target, "cannot remove");
  struct stat st {};
  if (::lstat(target.c_str(), &st) != 0 || !(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) return;
  for (const Entry& other : entries_)
    if (other.target == target) return;  // written anew: nothing to remove
  Entry e;
  e.target = target;
  e.real = target;
  e.remove = true;
  entries_.push_back(std::move(e));
}

long files_published() noexcept { return g_published.load(); }

void write_file_atomic(const std::string& target, const std::string& bytes) {
  StagedFiles one;
  one.add(target, bytes);
  one.publish();
}

std::string canonical_path(const std::string& path) {
  if (char* real = ::realpath(path.c_str(), nullptr)) {
    std::string r = real;
    std::free(real);
    return r;
  }
  // Not there (yet): the nearest existing ancestor resolved, the rest as written
  // with "." and ".." folded.
  std::vector<std::string> rest;
  std::string head = path.empty() ? "." : path;
  std::string base;
  for (;;) {
    while (head.size() > 1 && head.back() == '/') head.pop_back();
    const size_t slash = head.rfind('/');
    rest.push_back(slash == std::string::npos ? head : head.substr(slash + 1));
    head = slash == std::string::npos ? "." : slash == 0 ? "/" : head.substr(0, slash);
    if (char* real = ::realpath(head.c_str(), nullptr)) {
      base = real;
      std::free(real);
      break;
    }
    if (head == "/" || head == ".") return path;  // nothing resolves: compare as written
  }
  std::vector<std::string> parts;
  for (size_t start = 1; start <= base.size();) {
    const size_t end = std::min(base.find('/', start), base.size());
    if (end > start) parts.push_back(base.substr(start, end - start));
    start = end + 1;
  }
  for (auto it = rest.rbegin(); it != rest.rend(); ++it) {
    if (*it == "." || it->empty()) continue;
    if (*it == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(*it);
  }
  std::string out;
  for (const std::string& p : parts) out += "/" + p;
  return out.empty() ? "/" : out;
}

bool same_file(const std::string& a, const std::string& b) noexcept {
  try {
    struct stat sa {}, sb {};
    const bool ea = ::stat(a.c_str(), &sa) == 0, eb = ::stat(b.c_str(), &sb) == 0;
    if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea != eb) return false;
    return canonical_path(a) == canonical_path(b);
  } catch (...) {
    return a == b;
  }
}

bool is_stream(const std::string& path) noexcept {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode));
}

bool path_within(const std::string& path, const std::string& dir) noexcept {
  try {
    const std::string p = canonical_path(path), d = canonical_path(dir);
    if (d == "/") return true;
    return p == d || (p.size() > d.size() && p.compare(0, d.size(), d) == 0 && p[d.size()] == '/');
  } catch (...) {
    return false;
  }
}

bool path_exists(const std::string& path) noexcept {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string read_file(const std::string& path, size_t max_bytes) {
  // O_NONBLOCK, kept: opening a FIFO for reading would otherwise wait for a
  // writer, and reading one whose writer is slow would not see a stop signal.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw FileError(path + ": cannot read: " + os_reason());
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode))) {
    const std::string kind = kind_of(st.st_mode);
    ::close(fd);
    throw FileError(path + ": cannot read: it is " + kind + ", not a file");
  }
  const bool fifo = S_ISFIFO(st.st_mode);
  auto fail = [&](const std::string& why) {
    ::close(fd);
    throw FileError(path + ": " + why);
  };
  std::string out;
  char buf[1 << 16];
  // A FIFO reads as end-of-file until a writer has opened it and as EAGAIN
  // while its writer sends nothing. A writer started just before us (`cat a >
  // fifo &`) gets up to 2 s to open it; none is an error, never a hang. A
  // writer that is there may take as long as it needs, but a stop signal ends
  // the wait (Interrupted).
  bool writer_seen = false;
  int no_writer_waits = fifo ? 100 : 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      writer_seen = true;
      out.append(buf, static_cast<size_t>(n));
      if (out.size() > max_bytes)
        fail("larger than " + (max_bytes >= (1u << 20) ? std::to_string(max_bytes >> 20) + " MiB"
                                                       : std::to_string(max_bytes) + " bytes"));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      writer_seen = true;
      pollfd p{fd, POLLIN, 0};
      (void)::poll(&p, 1, 100);
      if (interrupt_signal()) {
        ::close(fd);
        throw Interrupted();
      }
      continue;
    }
    if (n < 0) fail("cannot read: " + os_reason());
    if (!fifo || writer_seen) break;  // end of file
    if (no_writer_waits-- <= 0) fail("cannot read: a FIFO with no writer");
    ::usleep(20 * 1000);
    if (interrupt_signal()) {
      ::close(fd);
      throw Interrupted();
    }
  }
  ::close(fd);
  if (out.empty() && fifo) throw FileError(path + ": cannot read: its writer closed the FIFO without sending anything");
  return out;
}

// --- DirLock ------------------------------------------------------------------------

namespace {
// Whether the file open at fd is still the one at path (an owner removes the
// lock file on release, and a later run makes a new one).
bool still_at(int fd, const std::string& path) {
  struct stat opened {}, now {};
  return ::fstat(fd, &opened) == 0 && ::stat(path.c_str(), &now) == 0 && opened.st_ino == now.st_ino &&
         opened.st_dev == now.st_dev;
}
}  // namespace

DirLock::DirLock(const std::string& dir) : path_(join_path(dir, ".attnprof.lock")) {
  // The owner removes the file on release; a waiter that opened the removed
  // file sees a different inode at the path after locking, and tries again.
  for (int attempt = 0; attempt < 100; ++attempt) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd_ < 0) throw FileError("cannot lock output directory '" + shown(dir) + "': " + os_reason());
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (err != EWOULDBLOCK) {
        ::close(fd_);
        fd_ = -1;
        throw FileError("cannot lock output directory '" + shown(dir) + "': " + os_reason(err));
      }
      // The holder writes its pid just after it locks; a run that locked a
      // moment ago may not have yet, so read for up to 100 ms before naming none.
      char buf[32] = {0};
      ssize_t n = 0;
      for (int wait = 0; wait < 20; ++wait) {
        n = ::pread(fd_, buf, sizeof buf - 1, 0);
        if (n > 0) break;
        ::usleep(5 * 1000);
      }
      // Still no pid and the file gone or replaced: the holder released meanwhile; lock anew.
      const bool released = n <= 0 && !still_at(fd_, path_);
      ::close(fd_);
      fd_ = -1;
      if (released) continue;
      const long holder = n > 0 ? std::strtol(buf, nullptr, 10) : -1;
      throw DirBusy("output directory '" + shown(dir) + "' is in use by another attnprof run" +
                        (holder > 0 ? " (pid " + std::to_string(holder) + ")" : std::string()) +
                        "; wait for it to finish or choose another --out",
                    holder > 0 ? holder : -1);
    }
    if (still_at(fd_, path_)) {
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

OutputDir::OutputDir(const std::string& dir, const OwnOutputs& own) {
  made_.make(dir);
  lock_ = std::make_unique<DirLock>(dir);
  if (!own) return;
  // <out>, <out>/<variant|compare|sweep>, <out>/<variant>/<stem> (trace
  // folders), never through a symbolic link, and only temps of the names `own`
  // says attnprof writes there.
  std::vector<std::string> level = {""};
  for (int depth = 0; depth <= 2; ++depth) {
    std::vector<std::string> next;
    for (const std::string& rel : level) {
      const std::string d = rel.empty() ? dir : join_path(dir, rel);
      remove_dead_temps(d, [&own, &rel](const std::string& target) { return own(rel, target); });
      if (depth == 2) continue;
      DIR* h = ::opendir(d.c_str());
      if (!h) continue;
      while (const dirent* e = ::readdir(h)) {
        if (e->d_name[0] == '.') continue;
        const std::string sub = rel.empty() ? std::string(e->d_name) : rel + "/" + e->d_name;
        struct stat st {};
        if (::lstat(join_path(dir, sub).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) next.push_back(sub);
      }
      ::closedir(h);
    }
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
