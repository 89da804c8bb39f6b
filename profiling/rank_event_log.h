#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include "profiling/comm_event.h"

namespace shardscope::profiling {

// Append-only event list owned by one rank. Backends complete async work on their own threads,
// so completion stamps arrive concurrently with new calls; the mutex is per rank and therefore
// never contended between ranks.
class RankEventLog {
 public:
  explicit RankEventLog(int rank) : rank_(rank) {}

  int rank() const { return rank_; }

  // Returns the index used to stamp the event later.
  size_t append(CommEvent event);
  void stamp_complete(size_t index, int64_t t_ns);
  void stamp_wait_end(size_t index, int64_t t_ns);
  void mark_blocking(size_t index);

  std::vector<CommEvent> snapshot() const;
  size_t size() const;

 private:
  int rank_;
  mutable std::mutex mutex_;
  std::vector<CommEvent> events_;
};

}  // namespace shardscope::profiling
