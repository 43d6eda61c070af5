// One Kineto profiling session as an object: the constructor prepares the
// profiler (CUPTI buffers and callbacks are set up here, during steps that are
// thrown away, so none of that cost lands in the recorded steps), start()
// begins recording, stop() ends it and hands over the events, and the
// destructor tears down whatever is still prepared or running — also when a
// step throws or a signal stops the run halfway.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include <torch/csrc/autograd/profiler_kineto.h>

#include "attnprof/events.h"
#include "attnprof/run_record.h"

namespace attnprof {

class KinetoSession {
 public:
  // `trace_id` names the trace as torch.profiler's does (32 hex digits; the
  // trace's "trace_id"), so tools that join traces by it see a fresh one.
  KinetoSession(bool cuda, const ProfilerOptions& options, const std::string& trace_id);
  ~KinetoSession();
  KinetoSession(const KinetoSession&) = delete;
  KinetoSession& operator=(const KinetoSession&) = delete;

  void start();
  // Adds `json_object` to the saved trace's top level under `key` (while recording).
  void add_trace_metadata(const std::string& key, const std::string& json_object);
  // Ends recording. The events come back as plain records; the result can
  // still save the Chrome trace.
  std::unique_ptr<torch::autograd::profiler::ProfilerResult> stop();

  // Kineto's events as attnprof's plain records, minus the ones the collector
  // marked hidden (Python's _parse_kineto_results drops them too).
  static std::vector<TraceEvent> events_of(const torch::autograd::profiler::ProfilerResult& result);

 private:
  enum class State { prepared, recording, stopped };
  torch::profiler::impl::ProfilerConfig config_;
  std::set<torch::profiler::impl::ActivityType> activities_;
  State state_ = State::prepared;
};

}  // namespace attnprof
