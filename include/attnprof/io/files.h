// File output that never leaves a half-written file behind: every writer goes
// to a temporary name beside the target and renames it into place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace attnprof::io {

// Any failure to create, write or rename an output. The message names the path
// and the OS reason, ready for a one-line error.
class FileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Creates `dir` and its parents; throws FileError if it is a file or not writable.
void ensure_writable_dir(const std::string& dir);

// "a/b" from "a" and "b".
std::string join_path(const std::string& a, const std::string& b);

// A unique temporary path beside `target` (same directory, so rename is atomic).
std::string temp_path_for(const std::string& target);

// Writes `bytes` to a temp file, flushes it to disk and renames it over `target`.
// On any failure the temp file is removed and `target` is left as it was.
void write_file_atomic(const std::string& target, const std::string& bytes);

std::string read_file(const std::string& path);

// Whether anything (file, directory, link target) exists at `path`.
bool path_exists(const std::string& path) noexcept;

// gzip framing (RFC 1952), so `gunzip` and Perfetto read it.
std::string gzip_compress(const std::string& bytes);
// Throws FileError for a stream that is not gzip, is truncated, or would expand
// past `max_bytes` (readers of untrusted files bound it: a small .gz can inflate
// to gigabytes).
std::string gzip_decompress(const std::string& bytes, size_t max_bytes = SIZE_MAX);

void remove_quietly(const std::string& path) noexcept;

// A temporary file that is removed (with a writer's own "<path>.tmp" beside
// it) when the owner goes away, unless release() handed it on: what a failed
// or interrupted run leaves behind is nothing.
class TempFile {
 public:
  TempFile() = default;
  explicit TempFile(std::string path) : path_(std::move(path)) {}
  TempFile(TempFile&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  TempFile& operator=(TempFile&& o) noexcept;
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() { remove(); }

  const std::string& path() const { return path_; }
  bool empty() const { return path_.empty(); }
  void remove() noexcept;

 private:
  std::string path_;
};

// Bytes available to this user on the filesystem holding `path`; nullopt if unknown.
std::optional<uint64_t> free_bytes(const std::string& path) noexcept;

}  // namespace attnprof::io
