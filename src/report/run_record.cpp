#include "attnprof/run_record.h"

namespace attnprof {

const char* status_name(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::skipped: return "skipped";
    case Status::failed: return "failed";
    case Status::interrupted: return "interrupted";
  }
  return "?";
}

std::optional<Status> parse_status(const std::string& s) {
  for (Status x : {Status::ok, Status::skipped, Status::failed, Status::interrupted})
    if (s == status_name(x)) return x;
  return std::nullopt;
}

const ScopeStats* RunRecord::scope(const std::string& name) const {
  for (const ScopeStats& s : scopes)
    if (s.scope == name) return &s;
  return nullptr;
}

double RunRecord::device_time_us() const {
  double t = 0;
  for (const ScopeStats& s : scopes) t += s.device_time_avg_us;
  return t;
}

double RunRecord::cpu_time_us() const {
  double t = 0;
  for (const ScopeStats& s : scopes) t += s.cpu_time_avg_us;
  return t;
}

double RunRecord::kernels_per_step() const {
  double n = 0;
  for (const ScopeStats& s : scopes) n += s.kernels_per_call;
  return n;
}

std::vector<KernelStats> RunRecord::kernels() const {
  std::vector<KernelStats> all;
  for (const ScopeStats& s : scopes) all.insert(all.end(), s.kernels.begin(), s.kernels.end());
  return all;
}

}  // namespace attnprof
