#include "engine/comm/step_traffic.h"

#include <algorithm>

namespace shardscope {

std::vector<StepTraffic> traffic_per_step(const std::vector<profiling::CommEvent>& events) {
  std::vector<StepTraffic> steps(1);
  for (const auto& e : events) {
    if (e.op == "all_gather_into" && e.dtype == "Double") {
      steps.emplace_back();
      continue;
    }
    StepTraffic& step = steps.back();
    step.total_bytes += e.bytes;
    if (e.op == "all_reduce" && e.async) {
      ++step.all_reduces;
      step.all_reduce_bytes += e.bytes;
    } else if (e.op == "all_gather_into") {
      step.all_gather_bytes += e.bytes;
    } else if (e.op == "reduce_scatter_tensor") {
      step.reduce_scatter_bytes += e.bytes;
    }
  }
  steps.pop_back();  // after the last step's boundary
  return steps;
}

int64_t typical_bytes_per_step(const std::vector<StepTraffic>& steps) {
  if (steps.empty()) return 0;
  std::vector<int64_t> totals;
  for (const auto& s : steps) totals.push_back(s.total_bytes);
  std::nth_element(totals.begin(), totals.begin() + totals.size() / 2, totals.end());
  return totals[totals.size() / 2];
}

}  // namespace shardscope
