// run_units(), the one run loop, through its hooks: a unit the caller decides
// before it runs, a measured record the caller adds to before its files are
// written, a caller that stops the loop, and what a FileError after a stop
// signal becomes. Real runs of the CPU variants on a tiny problem.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <string>
#include <vector>

#include "attnprof/interrupt.h"
#include "attnprof/io/files.h"
#include "attnprof/run_units.h"
#include "test_util.h"

namespace tu = attnprof::testing;
using namespace attnprof;

namespace {

Problem tiny() {
  Problem p;
  p.batch = 1, p.heads_q = p.heads_kv = 2, p.seq_q = p.seq_kv = 16, p.head_dim = 16;
  p.device = "cpu";
  return p;
}

RunUnitsOptions quick(const std::string& out_dir) {
  RunUnitsOptions o;
  o.measure.schedule = {1, 0, 1, 1};
  o.measure.timing_iters = 1;
  o.measure.scratch_dir = out_dir;
  o.files.out_dir = out_dir;
  return o;
}

std::string summary_path(const std::string& out_dir, const std::string& variant) {
  return out_dir + "/" + variant + "/" + tiny().file_stem() + ".summary.json";
}

}  // namespace

// A unit the decide hook settles is never run: its record comes back as the
// hook made it (variant and problem the unit's), begin sees it decided, no
// file is written for it; the other units run as usual.
TEST(RunUnits, AUnitTheCallerDecidesIsNotRun) {
  const std::string d = tu::make_temp_dir("run_units_decide");
  const std::vector<RunUnit> units = {{"naive", tiny(), std::nullopt}, {"inplace", tiny(), std::nullopt}};
  std::vector<std::string> seen;  // what each hook saw, in order
  UnitObserver obs;
  obs.decide = [&](size_t i, const RunUnit& u) -> std::optional<RunRecord> {
    seen.push_back("decide " + std::to_string(i));
    if (u.variant != "naive") return std::nullopt;
    RunRecord r;
    r.status = Status::skipped;
    r.reason = "refused by a peer";
    return r;
  };
  obs.begin = [&](size_t i, const RunUnit& u) {
    seen.push_back("begin " + std::to_string(i) + (u.decided ? " decided" : ""));
  };
  obs.measured = [&](size_t i, RunRecord&, const std::string&) { seen.push_back("measured " + std::to_string(i)); };
  obs.writing = [&] { seen.push_back("writing"); };
  obs.done = [&](size_t i, const UnitOutcome& u) {
    seen.push_back("done " + std::to_string(i) + " " + status_name(u.record.status));
    return true;
  };
  const RunUnitsResult res = run_units(units, quick(d), obs);
  ASSERT_EQ(res.records.size(), 2u);
  const RunRecord& decided = res.records[0];
  EXPECT_EQ(decided.status, Status::skipped);
  EXPECT_EQ(decided.reason, "refused by a peer");
  EXPECT_EQ(decided.variant, "naive");
  EXPECT_EQ(decided.problem.file_stem(), tiny().file_stem());
  EXPECT_TRUE(decided.phases_ms.empty()) << "run_variant was not called for it";
  EXPECT_FALSE(tu::path_exists(d + "/naive")) << "nothing written for it";
  EXPECT_TRUE(res.records[1].ok()) << res.records[1].reason;
  EXPECT_TRUE(tu::path_exists(summary_path(d, "inplace")));
  EXPECT_EQ(res.ok, 1);
  EXPECT_EQ(res.skipped, 1);
  EXPECT_EQ(seen, (std::vector<std::string>{"decide 0", "begin 0 decided", "done 0 skipped", "decide 1", "begin 1",
                                            "measured 1", "writing", "done 1 ok"}));

  // A unit decided in the list is not offered to the hook.
  seen.clear();
  RunRecord given;
  given.status = Status::skipped;
  given.reason = "not a valid problem";
  const RunUnitsResult again = run_units({{"naive", tiny(), given}}, quick(d), obs);
  ASSERT_EQ(again.records.size(), 1u);
  EXPECT_EQ(again.records[0].reason, "not a valid problem");
  EXPECT_EQ(seen, (std::vector<std::string>{"begin 0 decided", "done 0 skipped"}));
  tu::remove_tree(d);
}

// What the measured hook adds to the record is in the files written after
// it, and the hook sees the run's trace.
TEST(RunUnits, TheMeasuredHookAddsToTheRecordBeforeItsFilesAreWritten) {
  const std::string d = tu::make_temp_dir("run_units_measured");
  std::string trace;
  UnitObserver obs;
  obs.measured = [&](size_t, RunRecord& r, const std::string& trace_json) {
    trace = trace_json;
    r.facts.emplace_back("added by", "the measured hook");
  };
  const RunUnitsResult res = run_units({{"naive", tiny(), std::nullopt}}, quick(d), obs);
  ASSERT_EQ(res.ok, 1) << res.records.at(0).reason;
  EXPECT_TRUE(nlohmann::json::parse(trace).contains("traceEvents"));
  const nlohmann::json summary = nlohmann::json::parse(io::read_file(summary_path(d, "naive")));
  EXPECT_EQ(summary.at("facts").at("added by"), "the measured hook");
  tu::remove_tree(d);
}

// done returning false ends the loop after that unit.
TEST(RunUnits, DoneCanStopTheLoop) {
  const std::string d = tu::make_temp_dir("run_units_stop");
  UnitObserver obs;
  obs.done = [](size_t i, const UnitOutcome&) { return i < 1; };
  const RunUnitsResult res = run_units(
      {{"naive", tiny(), std::nullopt}, {"inplace", tiny(), std::nullopt}, {"sdpa-math", tiny(), std::nullopt}},
      quick(d), obs);
  ASSERT_EQ(res.records.size(), 2u);
  EXPECT_EQ(res.ok, 2);
  EXPECT_FALSE(res.interrupted);
  EXPECT_FALSE(tu::path_exists(d + "/sdpa-math")) << "the unit after the stop did not run";
  tu::remove_tree(d);
}

// A unit's files that cannot be written after a stop signal came: the unit
// counts as interrupted, with the error, or, where the caller asks for it,
// the FileError is thrown as without a signal.
TEST(RunUnits, AFileErrorAfterASignalInterruptsTheUnitOrIsThrown) {
  const std::string d = tu::make_temp_dir("run_units_file_error");
  io::write_file_atomic(d + "/not_a_dir", "a file where the output directory would be");
  RunUnitsOptions opt = quick(d);
  opt.files.out_dir = d + "/not_a_dir/out";
  UnitObserver obs;
  obs.measured = [](size_t, RunRecord&, const std::string&) { request_interrupt(SIGTERM); };
  const std::vector<RunUnit> units = {{"naive", tiny(), std::nullopt}, {"inplace", tiny(), std::nullopt}};

  const RunUnitsResult res = run_units(units, opt, obs);
  request_interrupt(0);
  ASSERT_EQ(res.records.size(), 1u);
  ASSERT_TRUE(res.interrupted);
  EXPECT_EQ(res.interrupted->record.status, Status::interrupted);
  EXPECT_NE(res.interrupted->files_error.find("not_a_dir"), std::string::npos) << res.interrupted->files_error;

  opt.signal_excuses_run_files_error = false;
  EXPECT_THROW(run_units(units, opt, obs), io::FileError);
  request_interrupt(0);
  tu::remove_tree(d);
}
