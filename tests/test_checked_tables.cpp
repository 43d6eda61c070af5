// The cache of block tables attnprof::flash_attention_paged has checked
// (kernels/flash_attention/checked_tables.h), on CPU tensors: a table is
// known again only while it is the same tensor, unwritten, checked over the
// same columns against the same pool.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <vector>

#include "kernels/flash_attention/checked_tables.h"

using attnprof::flash::CheckedTables;

namespace {

at::Tensor table() { return at::arange(12, at::kInt).view({3, 4}); }

}  // namespace

TEST(CheckedTables, KnowsATableUntilItIsWrittenInPlace) {
  CheckedTables checked;
  at::Tensor t = table();
  checked.add(*CheckedTables::key_of(t, 0, 4, 12));
  EXPECT_TRUE(checked.contains(*CheckedTables::key_of(t, 0, 4, 12)));
  EXPECT_FALSE(checked.contains(*CheckedTables::key_of(t, 0, 3, 12))) << "other columns";
  EXPECT_FALSE(checked.contains(*CheckedTables::key_of(t, 1, 4, 12))) << "other first column";
  EXPECT_FALSE(checked.contains(*CheckedTables::key_of(t, 0, 4, 11))) << "a smaller pool";
  EXPECT_FALSE(checked.contains(*CheckedTables::key_of(t.clone(), 0, 4, 12))) << "a copy is another table";
  t[1][2] = 99;  // through a view: the version counter is shared
  EXPECT_FALSE(checked.contains(*CheckedTables::key_of(t, 0, 4, 12))) << "written in place";
}

// A key taken before a check and a write during it: the entry added is already stale.
TEST(CheckedTables, AKeyTakenBeforeAWriteIsStale) {
  CheckedTables checked;
  at::Tensor t = table();
  const auto key = *CheckedTables::key_of(t, 0, 4, 12);
  t.fill_(0);
  checked.add(key);
  EXPECT_FALSE(checked.contains(*CheckedTables::key_of(t, 0, 4, 12)));
}

// Tables freed after their check: new tables, wherever the allocator puts
// them, are never taken for the checked one.
TEST(CheckedTables, ANewTableNeverInheritsAFreedOnesEntry) {
  CheckedTables checked;
  {
    at::Tensor t = table();
    checked.add(*CheckedTables::key_of(t, 0, 4, 12));
  }
  for (int i = 0; i < 200; ++i) {
    at::Tensor t = table();
    ASSERT_FALSE(checked.contains(*CheckedTables::key_of(t, 0, 4, 12))) << "table " << i;
  }
}

TEST(CheckedTables, InferenceTensorsAreNeverKept) {
  at::Tensor t;
  {
    c10::InferenceMode guard;
    t = table();
  }
  EXPECT_FALSE(CheckedTables::key_of(t, 0, 4, 12).has_value()) << "no version counter: checked on every call";
}

TEST(CheckedTables, KeepsTheLatestTables) {
  CheckedTables checked;
  std::vector<at::Tensor> tables;
  for (size_t i = 0; i < CheckedTables::kKept + 1; ++i) {
    tables.push_back(table());
    checked.add(*CheckedTables::key_of(tables.back(), 0, 4, 12));
  }
  EXPECT_FALSE(checked.contains(*CheckedTables::key_of(tables.front(), 0, 4, 12))) << "the oldest left";
  EXPECT_TRUE(checked.contains(*CheckedTables::key_of(tables[1], 0, 4, 12)));
  EXPECT_TRUE(checked.contains(*CheckedTables::key_of(tables.back(), 0, 4, 12)));
}
