// The block tables attnprof::flash_attention_paged has checked (every page
// index it reads inside the pool), so a server's table, read by every layer of
// every step, costs the check's reduction and device sync once, not per call.
// A table is known by its TensorImpl, data pointer and version counter: an
// in-place write bumps the version and the table is checked again. The entry
// holds a weak reference to the TensorImpl, so while it lives no other tensor
// can be created at that address and inherit the entry. Tables without a
// version counter (made under inference mode) are never kept: each call checks
// them. A table written behind the counter (raw pointers, DLPack) is not
// checked again; the kernels then read an index outside the pool as a page of
// zeros (tile_ops.cuh), never outside the pools. LibTorch only, no CUDA: the
// host tests use it with CPU tensors.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>

namespace attnprof::flash {

class CheckedTables {
 public:
  // What one check covered: table identity and version, and the columns and
  // pool size it was checked against.
  struct Key {
    c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> impl;
    const void* data = nullptr;
    int64_t version = 0, rows = 0, first_column = 0, columns = 0, num_pages = 0;

    bool same(const Key& o) const {
      return impl._unsafe_get_target() == o.impl._unsafe_get_target() && data == o.data && version == o.version &&
             rows == o.rows && first_column == o.first_column && columns == o.columns && num_pages == o.num_pages;
    }
  };

  // The key of `table` checked over columns [first_column, columns) against a
  // pool of num_pages; nothing for a table without a version counter. Taken
  // once, before the check, so a write during the check makes it stale.
  static std::optional<Key> key_of(const at::Tensor& table, int64_t first_column, int64_t columns,
                                   int64_t num_pages) {
    if (table.is_inference()) return std::nullopt;
    return Key{c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>(table.getIntrusivePtr()),
               table.data_ptr(), table._version(), table.size(0), first_column, columns, num_pages};
  }

  bool contains(const Key& key) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::any_of(keys_.begin(), keys_.end(), [&](const Key& k) { return k.same(key); });
  }

  void add(Key key) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (keys_.size() >= kKept) keys_.pop_front();
    keys_.push_back(std::move(key));
  }

  // Tables a process alternates between (a layer group each, say).
  static constexpr size_t kKept = 64;

 private:
  mutable std::mutex mutex_;
  std::deque<Key> keys_;
};

}  // namespace attnprof::flash
