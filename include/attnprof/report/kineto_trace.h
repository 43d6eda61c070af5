// A Kineto Chrome trace (the DIR/<variant>/<stem>/<stem>.pt.trace.json.gz attnprof writes) read
// back into plain records, and the forwards found in it. The merged comparison
// trace and the forward timeline are pure functions of these records.
//
// Traces come from disk and may be hand-edited: every defect (unreadable,
// truncated, not JSON, wrongly typed or out-of-range fields, nested too deep,
// too large) is a TraceError whose message is one line naming the file and the
// field ("b.json.gz: traceEvents[12].dur: -5 is out of range [0, 4e+15]").
// A trace that reads but has no `attn_fwd` scope is not an error here: it simply
// has no forwards, and the consumers skip it with a note.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace attnprof::report {

class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Decompressed size past which a file is refused before parsing: a gzip bomb
// guard, and a bound on memory (the records take about the text's size).
constexpr size_t kMaxTraceBytes = size_t(512) << 20;
// Kineto nests 5 levels (root, traceEvents, event, args, "Input Dims" lists).
constexpr int kMaxTraceDepth = 32;
// |ts| and dur bound, in microseconds (~127 years): a time in integer
// nanoseconds, and the difference of two, then fit an int64.
constexpr double kMaxTraceTimeUs = 4e15;

// The user scope attnprof's runner opens around each forward ("attn_fwd" on the
// CPU thread; Kineto mirrors it on the GPU stream as a gpu_user_annotation).
inline constexpr std::string_view kForwardScope = "attn_fwd";
// Kineto's per-step user scope: "ProfilerStep#2", "ProfilerStep#3", ...
inline constexpr std::string_view kStepScopePrefix = "ProfilerStep#";

// What a complete event ("ph":"X") is, from its "cat". Not Kineto's
// ActivityType: only the distinctions the comparison needs.
enum class SliceKind : uint8_t {
  cpu_op,           // cpu_op
  user_annotation,  // user_annotation (CPU): attn_fwd, ProfilerStep#N
  runtime,          // cuda_runtime, cuda_driver: the calls that launch device work
  kernel,           // kernel
  memcpy,           // gpu_memcpy
  memset,           // gpu_memset
  gpu_annotation,   // gpu_user_annotation: a user scope's span on a GPU stream
  other,            // anything else (python_function, cuda_sync, ...)
};

bool is_device_work(SliceKind k);  // kernel, memcpy or memset

constexpr uint32_t kNoArgs = UINT32_MAX;

// One "ph":"X" event with numeric pid and tid. Times in integer nanoseconds
// (Kineto writes microseconds with three decimals).
struct TraceSlice {
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  int64_t pid = 0;
  int64_t tid = 0;
  uint32_t name = 0;  // index into KinetoTrace::strings
  uint32_t cat = 0;   // index into KinetoTrace::strings
  SliceKind kind = SliceKind::other;
  // args.correlation (CUPTI's id: a runtime call and the device work it
  // launched share it) and args["External id"] (the CPU op / user scope id);
  // -1 when absent or not a non-negative integer.
  int64_t correlation = -1;
  int64_t external_id = -1;
  uint32_t args = kNoArgs;  // index into KinetoTrace::args

  int64_t end_ns() const { return ts_ns + dur_ns; }
};

// One end of a flow arrow ("ph":"s" or "f"): Kineto's "ac2g" flows link a
// runtime call to the kernel it launched, with the correlation id as flow id.
struct TraceFlow {
  int64_t ts_ns = 0;
  int64_t pid = 0;
  int64_t tid = 0;
  uint64_t id = 0;  // numeric ids as they are; string ids interned (top bit set)
  bool start = true;           // "s"; false for "f"
  bool bind_enclosing = false;  // "bp":"e"
  uint32_t name = 0;
  uint32_t cat = 0;
};

struct KinetoTrace {
  std::string source;                // the path (or label) errors and notes name
  std::vector<std::string> strings;  // interned names and categories
  std::vector<TraceSlice> slices;    // in file order
  std::vector<TraceFlow> flows;      // in file order
  std::vector<std::string> args;     // each slice's "args" object as JSON text
  std::string attnprof_json;         // the top-level "attnprof" object (run parameters), "" if absent
  std::string device_properties_json;  // Kineto's "deviceProperties", "" if absent
  // Events read but not kept: metadata, instants, counters, flow steps, and
  // events whose pid or tid is a string (Kineto's "Spans"/"Traces" tracks).
  size_t ignored_events = 0;

  const std::string& name_of(const TraceSlice& s) const { return strings[s.name]; }
  const std::string& cat_of(const TraceSlice& s) const { return strings[s.cat]; }
};

// `text` is the JSON of a Chrome trace (not gzip); `source` names it in errors.
KinetoTrace parse_kineto_trace(std::string_view text, const std::string& source);
// A trace file, plain or gzip (told by its magic bytes, not its name).
KinetoTrace read_kineto_trace_file(const std::string& path);

// One `attn_fwd` scope on the CPU thread and the device work it launched.
struct Forward {
  size_t annotation = 0;            // index of the CPU attn_fwd slice
  std::vector<size_t> device_work;  // kernel/memcpy/memset slices, by start time
  int64_t device_ns = 0;            // their summed durations
};

// Every CPU attn_fwd scope, in time order, with its device work. Device work
// belongs to the forward whose time span holds the runtime call with the same
// correlation id, on the forward's thread: CUPTI's own link, exact even when
// several streams interleave. A runtime call on a thread of the same process
// that holds no scope (autograd's device thread running a CUDA backward)
// belongs to the scope whose span holds it. Only when the trace has no runtime call that
// links to device work (runtime events filtered out) does the forward take the
// device work inside its gpu_user_annotation span instead (matched by External
// id): that span is Kineto's reconstruction, absent from older Kineto versions
// and from CPU runs. An empty result means no attn_fwd scope at all.
std::vector<Forward> find_forwards(const KinetoTrace& trace, std::string_view scope = kForwardScope);

// The slices directly under `parent` on its thread (its children, not
// grandchildren), by start time: the ops of a forward on a CPU-only run.
std::vector<size_t> child_slices(const KinetoTrace& trace, size_t parent);

}  // namespace attnprof::report
