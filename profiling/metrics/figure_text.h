#pragma once

#include <string>

namespace shardscope::profiling {

// Figures as people read them, one helper for every place that shows them (timeline, report,
// project, What-if), so that a figure never reads "0.00 GB/s" or "0.0 %" while it is not zero.

// A rate in the decimal unit that fits (B/s, kB/s, MB/s, GB/s, TB/s; 10^3 steps, as nccl-tests
// count GB/s), three significant digits: 850 B/s, 12.3 kB/s, 4.56 MB/s, 370 GB/s.
std::string format_rate(double bytes_per_s);
// The same from GB/s, the unit trace metrics and the link model keep busbw in.
inline std::string format_gbps(double gbps) {
  return format_rate(gbps * 1e9);
}

// A fraction as a percentage with `significant` significant digits (at least one decimal
// below 10 %): 0.4512 -> "45.1 %", 0.00123 -> "0.123 %", 0 -> "0 %".
std::string format_percent(double fraction, int significant = 3);

}  // namespace shardscope::profiling
