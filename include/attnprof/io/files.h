// File output that never leaves a half-written file behind: every writer goes
// to a temporary name beside the target and renames it into place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace attnprof::io {

// Any failure to create, write or rename an output. The message names the path
// and the OS reason, ready for a one-line error.
class FileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Directories made on the way to outputs. The destructor removes each one it
// made that is still empty (deepest first), so a run that wrote nothing leaves
// no new directory behind; one that published files keeps theirs.
class MadeDirs {
 public:
  MadeDirs() = default;
  MadeDirs(const MadeDirs&) = delete;
  MadeDirs& operator=(const MadeDirs&) = delete;
  ~MadeDirs() { remove_empty(); }
  // mkdir -p, recording what it created; throws FileError (nothing it made is left then).
  void make(const std::string& dir);
  void remove_empty() noexcept;
  void keep() noexcept { made_.clear(); }  // forget them: they stay

 private:
  std::vector<std::string> made_;
};

// Creates `dir` and its parents (recorded in `made` when given); throws
// FileError if it is a file, not writable, or its path is too long (checked
// before anything is created).
void ensure_writable_dir(const std::string& dir, MadeDirs* made = nullptr);

// "a/b" from "a" and "b".
std::string join_path(const std::string& a, const std::string& b);

// A unique temporary path beside `target` (same directory, so rename is
// atomic): ".<name>.tmp.<pid>.<n>". The pid lets a later run tell a temp of a
// dead process (SIGKILL, power loss) from one being written.
std::string temp_path_for(const std::string& target);
// The pid in a temp name made by temp_path_for (also with a writer's ".tmp"
// appended), or -1 when `name` is not one.
long temp_owner_pid(const std::string& name) noexcept;
// The target's name in such a temp name ("a.json" in ".a.json.tmp.12.0"), or "".
std::string temp_target_name(const std::string& name);
// Removes, in `dir` (not below), the temps of processes that no longer exist
// whose target name `own` accepts (regular files of this user only). Returns
// how many it removed. Never throws.
int remove_stale_temps(const std::string& dir, const std::function<bool(const std::string& target)>& own) noexcept;
// The same for the temps of one target: what a killed attnprof left while
// writing that very file. Called before a file is written.
int remove_stale_temps_of(const std::string& target) noexcept;

// Temp files this process is writing, for a signal handler that must remove
// them before the process dies (async-signal-safe; at most 64 are tracked,
// the rest are left to remove_stale_temps).
void remove_registered_temps() noexcept;

// The outputs of one run, published together: add() writes each to a hidden
// temp beside its target (making the directory if needed); publish() moves
// them all into place, or none — a failure restores every target it had
// already replaced. Until then, and when publish() fails, the targets are
// untouched; the destructor removes unpublished temps and the directories it
// made that are still empty.
// Targets that are symbolic links to files are followed (the file they point
// to is replaced); a FIFO, character device or socket at a target is written
// into directly at publish time (a FIFO must have a reader), and so is the
// process's own standard output or error (/dev/stdout, or the file it is
// redirected to: written through its descriptor, in order with the rest of
// the output); a directory at a target is an error.
class StagedFiles {
 public:
  StagedFiles() = default;
  StagedFiles(const StagedFiles&) = delete;
  StagedFiles& operator=(const StagedFiles&) = delete;
  ~StagedFiles();
  void add(const std::string& target, const std::string& bytes);
  // mkdir -p for targets to come; what it makes is removed again while empty.
  void make_dir(const std::string& dir) { dirs_.make(dir); }
  // An earlier file that is no longer part of the set (a trace of the other
  // compression, a merged trace this run could not make): removed when the
  // set is published, restored if publishing fails. Nothing when it is not a
  // file or link, or when the set writes it anew.
  void remove_at_publish(const std::string& target);
  // Throws FileError naming the target and the reason.
  void publish();
  const std::vector<std::string>& targets() const { return targets_; }
  bool empty() const { return targets_.empty(); }

 private:
  struct Entry {
    std::string target;  // as given
    std::string real;    // where the bytes go (a followed link's file)
    std::string temp;    // empty for a special file, written at publish time
    std::string bytes;   // kept only for a special file
    int fd = -1;         // the process's own stdout/stderr when the target is it (/dev/stdout)
    bool remove = false;  // remove_at_publish: no bytes, the target goes
  };
  void discard() noexcept;
  std::vector<Entry> entries_;
  std::vector<std::string> targets_;
  MadeDirs dirs_;
};

// How many files this process has published (moved into place, or written
// into a FIFO or device): whether "the files were written" is true.
long files_published() noexcept;

// Writes `bytes` to a temp file, flushes it to disk and renames it over `target`
// (a StagedFiles of one). On any failure `target` is left as it was.
void write_file_atomic(const std::string& target, const std::string& bytes);

// The bytes of a regular file (or a link to one), or of a FIFO or pipe that
// has a writer (`<(zcat a.gz)`); never blocks on a FIFO nobody writes to, and
// a slow writer's wait ends at a stop signal (throws attnprof::Interrupted).
// Throws FileError for a missing or unreadable path, a directory, a device or
// socket, a FIFO with no writer or whose writer sent nothing, and a file
// larger than `max_bytes`.
std::string read_file(const std::string& path, size_t max_bytes = SIZE_MAX);

// Whether anything (file, directory, link target) exists at `path`.
bool path_exists(const std::string& path) noexcept;
// `path` with links and "."/".." resolved; for a path that does not exist yet,
// its nearest existing ancestor resolved and the rest as written.
std::string canonical_path(const std::string& path);
// Whether `a` and `b` name one file: the same inode when both exist, else the
// same canonical path.
bool same_file(const std::string& a, const std::string& b) noexcept;
// Whether `path` is a FIFO, character device or socket (links followed):
// written into as a stream, so two outputs may share it (/dev/null, /dev/stdout).
bool is_stream(const std::string& path) noexcept;
// Whether `path` is `dir` or lies under it (canonical paths).
bool path_within(const std::string& path, const std::string& dir) noexcept;

// gzip framing (RFC 1952), so `gunzip` and Perfetto read it.
std::string gzip_compress(const std::string& bytes);
// Throws FileError for a stream that is not gzip, is truncated, or would expand
// past `max_bytes` (readers of untrusted files bound it: a small .gz can inflate
// to gigabytes).
std::string gzip_decompress(const std::string& bytes, size_t max_bytes = SIZE_MAX);

void remove_quietly(const std::string& path) noexcept;

// A temporary file that is removed (with a writer's own "<path>.tmp" beside
// it) when the owner goes away: what a failed or interrupted run leaves
// behind is nothing. Registered for remove_registered_temps().
class TempFile {
 public:
  TempFile() = default;
  explicit TempFile(std::string path);
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

// An exclusive lock on an output directory (flock on DIR/.attnprof.lock) for
// the whole of a run, so two runs never interleave their files there. The
// lock file holds the owner's pid and is removed on release.
class DirLock {
 public:
  // Throws DirBusy when another process holds it, FileError when the lock
  // file cannot be made.
  explicit DirLock(const std::string& dir);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};
class DirBusy : public FileError {
 public:
  DirBusy(const std::string& what, long holder) : FileError(what), holder_pid(holder) {}
  long holder_pid;  // -1 when unknown
};

// What attnprof writes in an output directory: `rel_dir` ("" for the
// directory itself, "naive", "naive/<stem>", "compare", "sweep/partial") and a
// file name there.
using OwnOutputs = std::function<bool(const std::string& rel_dir, const std::string& name)>;

// An output directory for the length of one run: made if missing (and removed
// again at the end when the run left nothing in it), locked against other
// attnprof runs (DirLock), and, given `own`, cleared of the temp files of
// runs that died: in it and two levels below (never through a link), only
// temps of the names `own` accepts. Throws FileError or DirBusy.
class OutputDir {
 public:
  explicit OutputDir(const std::string& dir, const OwnOutputs& own = {});
  ~OutputDir();
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;

 private:
  MadeDirs made_;  // declared first: removed last, after the lock file
  std::unique_ptr<DirLock> lock_;
};

// Bytes available to this user on the filesystem holding `path`; nullopt if unknown.
std::optional<uint64_t> free_bytes(const std::string& path) noexcept;

}  // namespace attnprof::io
