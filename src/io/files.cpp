#include "attnprof/io/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace attnprof::io {

namespace {
std::string os_reason() { return std::strerror(errno); }
}  // namespace

// POSIX calls rather than std::filesystem: LibTorch's wheel exports its own copy
// of std::filesystem symbols, which interpose on ours in any binary linking it
// (std::filesystem::remove_all was seen to crash through them).
void ensure_writable_dir(const std::string& dir) {
  if (dir.empty()) throw FileError("output directory is empty");
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    throw FileError("output path '" + dir + "' exists and is not a directory");
  // mkdir -p, one component at a time.
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      throw FileError("cannot create output directory '" + dir + "': " + os_reason());
    if (::stat(prefix.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      throw FileError("cannot create output directory '" + dir + "': '" + prefix + "' is not a directory");
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw FileError("output directory '" + dir + "' is not writable: " + os_reason());
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

void remove_quietly(const std::string& path) noexcept { ::unlink(path.c_str()); }

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
  path_.clear();
}

std::optional<uint64_t> free_bytes(const std::string& path) noexcept {
  struct statvfs vfs {};
  if (::statvfs(path.c_str(), &vfs) != 0) return std::nullopt;
  return static_cast<uint64_t>(vfs.f_bavail) * static_cast<uint64_t>(vfs.f_frsize);
}

void write_file_atomic(const std::string& target, const std::string& bytes) {
  const std::string tmp = temp_path_for(target);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw FileError("cannot write '" + target + "': " + os_reason());
  auto fail = [&](const std::string& what) {
    const std::string reason = os_reason();
    ::close(fd);
    remove_quietly(tmp);
    throw FileError(what + " '" + target + "': " + reason);
  };
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write");
    }
    done += static_cast<size_t>(n);
  }
  // A full disk can surface only at flush time (e.g. /dev/full, NFS).
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) fail("cannot flush");
  if (::close(fd) != 0) {
    const std::string reason = os_reason();
    remove_quietly(tmp);
    throw FileError("cannot write '" + target + "': " + reason);
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const std::string reason = os_reason();
    remove_quietly(tmp);
    throw FileError("cannot move into place '" + target + "': " + reason);
  }
}

bool path_exists(const std::string& path) noexcept {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError("cannot read '" + path + "': " + os_reason());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

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
