// The one run loop: a list of units (a variant on a problem), each measured
// with run_variant and its run files written, with the status transitions
// and the stop signal handled in one place. Nothing is printed here: the
// caller sees each unit through UnitObserver and gets typed records back.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "attnprof/problem.h"
#include "attnprof/report/run_files.h"
#include "attnprof/run_record.h"
#include "attnprof/session.h"

namespace attnprof {

struct RunUnit {
  std::string variant;
  Problem problem;
  // A unit decided before it runs (a sweep point that is not a valid
  // problem): its record is taken as it is, status skipped.
  std::optional<RunRecord> decided;
};

struct RunUnitsOptions {
  MeasureOptions measure;  // startup_ms belongs to the first unit that runs only
  report::RunFileOptions files;
  // An interrupted unit leaves OUT/.../<stem>.summary.json marked interrupted.
  bool write_interrupted_summary = true;
  // A FileError writing a finished unit's run files after a stop signal: the
  // unit counts as interrupted (UnitOutcome::files_error), or, false, it is
  // thrown as without a signal (a multi-GPU rank whose files are missing
  // exits 4 while its peers' are complete).
  bool signal_excuses_run_files_error = true;
};

// What one unit came to, as the caller prints it.
struct UnitOutcome {
  RunRecord record;  // status ok / skipped / failed / interrupted
  // Interrupted: the summary that marks it ("" when none was written, so the
  // earlier complete one is kept).
  std::string interrupted_summary;
  // A signal came first and then its files could not be written: the
  // error; the unit counts as interrupted.
  std::string files_error;
};

struct UnitObserver {
  // Settles a unit before it runs (the ranks of a multi-GPU run agree whether
  // every rank can run it): a record returned stands as RunUnit::decided
  // does; nullopt runs the unit. Not called for a unit decided in the list.
  std::function<std::optional<RunRecord>(size_t index, const RunUnit&)> decide;
  // Before the unit runs; its `decided` is set when it will not run.
  std::function<void(size_t index, const RunUnit&)> begin;
  // A unit that came out ok, before its files are written: what the caller
  // changes in the record (a rate, facts) goes into them. `trace_json` is
  // the run's Kineto trace.
  std::function<void(size_t index, RunRecord&, const std::string& trace_json)> measured;
  std::function<void()> writing;  // its run files are about to be written
  std::function<void()> end;      // files written (or not), before the outcome
  // Not called for an interrupted unit. false: stop, no unit after this one runs.
  std::function<bool(size_t index, const UnitOutcome&)> done;
};

struct RunUnitsResult {
  std::vector<RunRecord> records;  // the units reached, in order; the last may be interrupted
  std::optional<UnitOutcome> interrupted;  // the unit a signal stopped, when one did
  int ok = 0, skipped = 0, failed = 0;
};

// Stops before the next unit once a signal came, or when done says so. A
// FileError without a signal is thrown (exit 4 in the CLI); after one it
// becomes the interrupted unit's files_error (but see
// signal_excuses_run_files_error). What the hooks throw goes to the caller.
RunUnitsResult run_units(const std::vector<RunUnit>& units, RunUnitsOptions opt, const UnitObserver& observer);

}  // namespace attnprof
