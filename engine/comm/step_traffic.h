#pragma once

#include <cstdint>
#include <vector>

#include "profiling/trace/comm_event.h"

namespace shardscope {

// What one rank handed to collectives during one training step. Bytes are each call's input
// payload on this rank (for all_gather: its contribution; for reduce_scatter: the whole flat
// vector), the convention of CommEvent.
struct StepTraffic {
  int all_reduces = 0;  // asynchronous ones: the gradient reductions
  int64_t all_reduce_bytes = 0;
  int64_t all_gather_bytes = 0;
  int64_t reduce_scatter_bytes = 0;
  int64_t total_bytes = 0;  // every collective in the step, including the ones above
  bool operator==(const StepTraffic& other) const {
    return all_reduces == other.all_reduces && all_reduce_bytes == other.all_reduce_bytes &&
           all_gather_bytes == other.all_gather_bytes &&
           reduce_scatter_bytes == other.reduce_scatter_bytes && total_bytes == other.total_bytes;
  }
};

// Splits a rank's calls into steps. The trainer ends every step with an all_gather_into of
// [loss, step time] in double precision, the only double collective, which marks the boundary
// (and is not counted). Calls after the last step (gathering weights for the check) are dropped.
std::vector<StepTraffic> traffic_per_step(const std::vector<profiling::CommEvent>& events);

// The median over steps of total_bytes: setup's one-off broadcast in step 0 does not count.
int64_t typical_bytes_per_step(const std::vector<StepTraffic>& steps);

}  // namespace shardscope
