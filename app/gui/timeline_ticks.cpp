#include "app/gui/timeline_ticks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace shardscope::gui {

double tick_step_ns(double ns_per_px, double px) {
  const double raw = std::max(ns_per_px * px, 1.0);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (p * m >= raw) return p * m;
  }
  return p * 10;
}

std::string tick_label(double t_ns, double step_ns) {
  const double magnitude = std::max(std::fabs(t_ns), step_ns);
  const char* unit = "ns";
  double unit_ns = 1;
  if (magnitude >= 1e9) {
    unit = "s", unit_ns = 1e9;
  } else if (magnitude >= 1e6) {
    unit = "ms", unit_ns = 1e6;
  } else if (magnitude >= 1e3) {
    unit = "us", unit_ns = 1e3;
  }
  // Steps are 1, 2 or 5 times a power of ten: that power's decimals tell neighbours apart.
  const int decimals =
      std::clamp(static_cast<int>(std::ceil(-std::log10(step_ns / unit_ns) - 1e-9)), 0, 12);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f %s", decimals, t_ns / unit_ns, unit);
  return buf;
}

std::string format_ms(double ms) {
  char buf[48];
  if (std::fabs(ms) >= 1000) {
    std::snprintf(buf, sizeof(buf), "%.3f s", ms / 1000);
  } else if (std::fabs(ms) >= 1) {
    std::snprintf(buf, sizeof(buf), "%.3f ms", ms);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f us", ms * 1000);
  }
  return buf;
}

std::string format_bytes(double bytes) {
  char buf[48];
  if (bytes >= 1e9) {
    std::snprintf(buf, sizeof(buf), "%.2f GB", bytes / 1e9);
  } else if (bytes >= 1e6) {
    std::snprintf(buf, sizeof(buf), "%.2f MB", bytes / 1e6);
  } else if (bytes >= 1e3) {
    std::snprintf(buf, sizeof(buf), "%.1f kB", bytes / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f B", bytes);
  }
  return buf;
}

int step_stride(const std::vector<StepSpan>& steps, double ns_per_px, double min_px) {
  if (steps.size() < 2 || ns_per_px <= 0) return 1;
  const double numbers = std::max(1, steps.back().step - steps.front().step);
  const double px_per_step = double(steps.back().t0_ns - steps.front().t0_ns) / numbers / ns_per_px;
  if (px_per_step >= min_px) return 1;
  for (double p = 1; p < 1e9; p *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      if (p * m * px_per_step >= min_px) return static_cast<int>(p * m);
    }
  }
  return 1000000000;
}

bool label_x(double x0, double x1, double width_px, double min_px, double* x) {
  const double a = std::max(x0, 0.0), b = std::min(x1, width_px);
  if (b - a < min_px) return false;
  *x = a + 3;
  return true;
}

const StepSpan* find_step(const std::vector<StepSpan>& steps, int number) {
  if (steps.empty()) return nullptr;
  auto it = std::lower_bound(steps.begin(), steps.end(), number,
                             [](const StepSpan& s, int n) { return s.step < n; });
  if (it == steps.end()) return &steps.back();
  if (it != steps.begin() && it->step != number && number - std::prev(it)->step < it->step - number)
    --it;
  return &*it;
}

int64_t held_at(const std::vector<std::pair<int64_t, int64_t>>& samples, int64_t t) {
  auto it = std::partition_point(samples.begin(), samples.end(),
                                 [&](const auto& s) { return s.first <= t; });
  return it == samples.begin() ? -1 : std::prev(it)->second;
}

}  // namespace shardscope::gui
