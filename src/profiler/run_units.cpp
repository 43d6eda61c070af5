#include "attnprof/run_units.h"

#include "attnprof/interrupt.h"
#include "attnprof/io/files.h"

namespace attnprof {

RunUnitsResult run_units(const std::vector<RunUnit>& units, RunUnitsOptions opt, const UnitObserver& observer) {
  RunUnitsResult res;
  auto call = [](const auto& f, auto&&... args) {
    if (f) f(args...);
  };
  for (size_t i = 0; i < units.size() && !interrupt_signal(); ++i) {
    RunUnit unit = units[i];
    if (!unit.decided && observer.decide) unit.decided = observer.decide(i, unit);
    call(observer.begin, i, unit);
    UnitOutcome o;
    if (unit.decided) {
      o.record = *unit.decided;
      o.record.variant = unit.variant;
      o.record.problem = unit.problem;
      call(observer.end);
    } else {
      bool writing = false;  // the run files of a finished unit
      try {
        // Support, the memory prediction and out-of-memory all come back as a skip.
        Measurement m = run_variant(unit.variant, unit.problem, opt.measure);
        opt.measure.startup_ms.reset();  // process start-up belongs to the first unit only
        o.record = std::move(m.record);
        if (o.record.ok()) {
          call(observer.measured, i, o.record, m.trace_json);
          call(observer.writing);
          writing = true;
          report::write_run_files(o.record, m.trace_json, opt.files);
          writing = false;
        }
        call(observer.end);
        if (o.record.status == Status::interrupted && opt.write_interrupted_summary)
          o.interrupted_summary = report::write_interrupted_summary(o.record, opt.files);
      } catch (const io::FileError& e) {
        call(observer.end);
        if (!interrupt_signal() || (writing && !opt.signal_excuses_run_files_error)) throw;
        // A signal came first: it decides the exit code; the unit counts as interrupted.
        o.record.status = Status::interrupted;
        o.files_error = e.what();
      }
    }
    res.records.push_back(o.record);
    if (o.record.status == Status::interrupted) {
      res.interrupted = std::move(o);
      break;
    }
    if (o.record.ok()) ++res.ok;
    else if (o.record.status == Status::skipped) ++res.skipped;
    else ++res.failed;
    if (observer.done && !observer.done(i, o)) break;
  }
  return res;
}

}  // namespace attnprof
