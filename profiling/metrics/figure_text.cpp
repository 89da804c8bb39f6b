#include "profiling/metrics/figure_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace shardscope::profiling {
namespace {

// `value` with `significant` significant digits in fixed notation (no exponent): 123, 12.3,
// 1.23, 0.0123.
std::string significant_fixed(double value, int significant) {
  if (value == 0 || !std::isfinite(value)) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", value);
    return buf;
  }
  const int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(value))));
  int decimals = std::max(0, significant - 1 - magnitude);
  // Rounding can carry into the next power of ten (9.996 -> "10.00"); one decimal fewer then.
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
  if (decimals > 0 && std::fabs(std::atof(buf)) >= std::pow(10.0, magnitude + 1)) {
    std::snprintf(buf, sizeof(buf), "%.*f", decimals - 1, value);
  }
  return buf;
}

}  // namespace

std::string format_rate(double bytes_per_s) {
  static const char* const kUnits[] = {"B/s", "kB/s", "MB/s", "GB/s", "TB/s"};
  constexpr int kLast = 4;
  double value = bytes_per_s;
  int unit = 0;
  // Move up while the rounded figure would read 1000 or more in this unit.
  while (unit < kLast && std::fabs(value) >= 999.5) {
    value /= 1000;
    ++unit;
  }
  return significant_fixed(value, 3) + " " + kUnits[unit];
}

std::string format_percent(double fraction, int significant) {
  const double percent = 100 * fraction;
  if (percent == 0) return "0 %";
  // Whole percents need no more than the digits asked for; smaller ones keep theirs.
  return significant_fixed(percent, std::max(1, significant)) + " %";
}

}  // namespace shardscope::profiling
