#pragma once

#include <algorithm>
#include <vector>

namespace shardscope::analysis {

// The middle value, the upper of the two for an even count (a value that was measured, never an
// average of two); 0 for none. What the per-step figures of report, Compare, the projection and
// the pipeline's pass costs take over steps.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace shardscope::analysis
