#include <algorithm>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "app/perf/perf_suite.h"
#include "engine/train/config.h"
#include "engine/train/run.h"

namespace shardscope::perf {

MeasuredRun measure_run(const std::string& overrides_json) {
  nlohmann::json overrides = nlohmann::json::parse(overrides_json);
  overrides["reference"] = false;
  Config config = config_from_json(overrides);
  finalize(config);
  check_environment(config);
  const RunSummary s = run_training(config);
  if (!s.ok) throw std::runtime_error(config.strategy + " failed: " + s.failure);
  MeasuredRun m;
  for (const auto& step : s.steps) m.step_seconds.push_back(step.step_time_s);
  for (const auto& r : s.ranks)
    m.peak_bytes = std::max<long long>(m.peak_bytes, r.peak_allocated_bytes);
  m.wall_seconds = s.wall_s;
  return m;
}

double run_step_seconds(const std::string& overrides_json) {
  return median_step_seconds(measure_run(overrides_json).step_seconds);
}

}  // namespace shardscope::perf
